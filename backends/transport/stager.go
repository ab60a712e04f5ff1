package transport

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/gridsub/gridsub/backends"
)

// Stager stages files over the Client's one SFTP session, confined to a
// root directory at the site. It is safe for concurrent use.
type Stager struct {
	c        *Client
	root     string
	rootMade atomic.Bool // root was created (or found) by a Put
}

var _ backends.Stager = (*Stager)(nil)

// Stager returns a Stager whose remote paths are relative to root (an
// absolute path at the site, or one relative to the login directory; "" is
// the login directory).
func (c *Client) Stager(root string) *Stager {
	if root == "" {
		root = "."
	}
	return &Stager{c: c, root: path.Clean(root)}
}

// Root is the directory the Stager is confined to.
func (s *Stager) Root() string { return s.root }

// resolve turns a path relative to the root into the remote path, refusing
// absolute paths and paths that leave the root.
func (s *Stager) resolve(remote string) (string, error) {
	switch {
	case remote == "":
		return "", fmt.Errorf("%w: empty remote path (want a file path relative to %s)", backends.ErrInvalidSpec, s.root)
	case strings.IndexByte(remote, 0) >= 0:
		return "", fmt.Errorf("%w: remote path %q contains a NUL byte", backends.ErrInvalidSpec, remote)
	case path.IsAbs(remote):
		return "", fmt.Errorf("%w: %q is absolute (want a path relative to %s)", ErrPathEscape, remote, s.root)
	}
	clean := path.Clean(remote)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%w: %q leaves %s (want a path inside it, without leading ..)", ErrPathEscape, remote, s.root)
	}
	if clean == "." {
		return "", fmt.Errorf("%w: %q names the staging root itself (want a file inside %s)", backends.ErrInvalidSpec, remote, s.root)
	}
	return path.Join(s.root, clean), nil
}

// sftpClient returns the connection's SFTP client, creating it on first use
// (it then holds one session slot until the connection dies or the Client
// is closed). Stale temp files of earlier failed Puts are removed here.
func (c *Client) sftpClient(ctx context.Context) (*sftpSession, error) {
	for attempt := 0; ; attempt++ {
		cn, err := c.get(ctx)
		if err != nil {
			return nil, err
		}
		ss, err := c.sftpOn(ctx, cn)
		if err == nil {
			c.removeOrphans(ss.Client)
			return ss, nil
		}
		if attempt > 0 || !errors.Is(err, errConnDead) || ctx.Err() != nil {
			return nil, err
		}
	}
}

func (c *Client) sftpOn(ctx context.Context, cn *conn) (*sftpSession, error) {
	cn.sftpMu.Lock()
	ss := cn.sftp
	cn.sftpMu.Unlock()
	if ss != nil {
		return ss, nil
	}
	select {
	case cn.sftpTok <- struct{}{}:
		defer func() { <-cn.sftpTok }()
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the sftp session to %s: %w", c.cfg.addr(), ctx.Err())
	}
	cn.sftpMu.Lock()
	ss = cn.sftp
	cn.sftpMu.Unlock()
	if ss != nil {
		return ss, nil
	}
	release, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	sess, err := c.openOn(ctx, cn)
	if err != nil {
		release()
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { sess.Close() }) // bounds the setup exchanges
	fail := func(what string, err error) (*sftpSession, error) {
		sess.Close()
		release()
		if !stop() {
			return nil, fmt.Errorf("starting sftp on %s: %s: %w", c.cfg.addr(), what, ctx.Err())
		}
		return nil, unavailable("starting sftp on %s: %s: %w", c.cfg.addr(), what, err)
	}
	w, err := sess.StdinPipe()
	if err != nil {
		return fail("stdin", err)
	}
	r, err := sess.StdoutPipe()
	if err != nil {
		return fail("stdout", err)
	}
	if err := sess.RequestSubsystem("sftp"); err != nil {
		return fail("subsystem request", err)
	}
	opts := []sftp.ClientOption{
		sftp.UseConcurrentWrites(!c.cfg.SFTPSequential),
		sftp.UseConcurrentReads(!c.cfg.SFTPSequential),
		sftp.MaxConcurrentRequestsPerFile(c.cfg.SFTPRequests),
	}
	sc, err := sftp.NewClientPipe(r, w, opts...)
	if err != nil {
		return fail("sftp init", err)
	}
	if !stop() {
		sc.Close()
		return fail("sftp init", ctx.Err())
	}
	ss = &sftpSession{Client: sc, sess: sess, cn: cn}
	cn.sftpMu.Lock()
	cn.sftp = ss
	cn.sftpMu.Unlock()
	go func() {
		err := sc.Wait()
		cn.sftpMu.Lock()
		if cn.sftp == ss {
			cn.sftp = nil
		}
		cn.sftpMu.Unlock()
		sess.Close()
		release()
		c.log.Debug("sftp session ended", "err", err)
	}()
	return ss, nil
}

// sftpSession is an SFTP client and the SSH session it runs on.
type sftpSession struct {
	*sftp.Client
	sess *ssh.Session
	cn   *conn
}

// abort ends the session without waiting for the server: pending requests
// fail, and the client shuts down (sftp.Client.Close alone would wait for
// the server to answer). When even that does not end it within abortGrace
// (the network path itself hangs: the server never confirms the close),
// the whole SSH connection is closed; the next call reconnects.
func (ss *sftpSession) abort(log *slog.Logger) {
	ss.sess.Close()
	go func() {
		done := make(chan struct{})
		go func() { ss.Client.Close(); close(done) }()
		t := time.NewTimer(abortGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			log.Warn("sftp session did not end after it was closed; closing the ssh connection", "grace", abortGrace)
			ss.cn.ssh.Close()
		}
	}()
}

// removeOrphans retries the removal of temp files that a failed Put left
// behind (typically because the connection died under it).
func (c *Client) removeOrphans(sc *sftp.Client) {
	c.mu.Lock()
	orphans := c.orphans
	c.orphans = nil
	c.mu.Unlock()
	var keep []string
	for _, p := range orphans {
		if err := sc.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			keep = append(keep, p)
			continue
		}
		c.log.Info("removed temp file of an earlier failed upload", "path", p)
	}
	if len(keep) > 0 {
		c.mu.Lock()
		c.orphans = append(c.orphans, keep...)
		c.mu.Unlock()
	}
}

// transferErr classifies an SFTP error: a status from the server (no such
// file, permission denied, ...) is the server's answer; anything else (EOF,
// connection lost) means the transport failed and is retryable.
func (c *Client) transferErr(what, p string, err error) error {
	var se *sftp.StatusError
	if errors.As(err, &se) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%s %s on %s: %w", what, p, c.cfg.addr(), err)
	}
	return unavailable("%s %s on %s: %w", what, p, c.cfg.addr(), err)
}

// srcReader stops a copy once ctx is done and remembers errors of the
// local source, which are not the site's fault.
type srcReader struct {
	ctx context.Context
	r   io.Reader
	err error
}

func (r *srcReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}

// abortGrace is how long a transfer may go on after its ctx ended (pkg/sftp
// only notices between requests) before the SFTP session is closed under it.
var abortGrace = 2 * time.Second

// abortOnCancel closes the SFTP client if ctx ends and the transfer has not
// returned within abortGrace (a stalled server). Other transfers on it then
// fail as unavailable, and the next one starts a new SFTP session. Call the
// returned func when the transfer has returned.
func (c *Client) abortOnCancel(ctx context.Context, ss *sftpSession) (done func()) {
	finished := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(abortGrace)
		defer t.Stop()
		select {
		case <-finished:
		case <-t.C:
			c.log.Warn("sftp transfer still running after its context ended; closing the sftp session", "grace", abortGrace)
			ss.abort(c.log)
		}
	})
	return func() {
		stop()
		close(finished)
	}
}

// Put uploads src to remote (relative to the root) atomically: the bytes go
// to a temp file ".<name>.gridsub-tmp-<random>" in the same directory, which
// is fsynced (when the server offers fsync@openssh.com), checked for size,
// and renamed over the final name with posix-rename@openssh.com (servers
// without it get a plain SFTP rename, which refuses to replace an existing
// file). On any failure the temp file is removed (or, if the connection
// died, when the next SFTP session starts); the final name never holds a
// partial file. Missing parent directories inside the root are created.
// mode 0 means 0644. The Transfer records bytes, duration and the SHA-256
// computed while streaming, and feeds the Client's Estimator.
//
// Confinement: every directory below the root on the way to remote is
// checked with Lstat (and created one at a time); a symbolic link, device,
// FIFO or socket there, or an existing final name that is not a regular
// file, fails with ErrSpecialFile and nothing is written. Bounds: more than
// Config.MaxFileSize bytes fail with ErrTooLarge (the copy stops there),
// and the whole Put is cancelled with ErrTransferTimeout after
// MinTransferTime + size/MinTransferRate (size from src's Stat or Len, else
// MaxFileSize).
func (s *Stager) Put(ctx context.Context, src io.Reader, remote string, mode fs.FileMode) (backends.Transfer, error) {
	var tr backends.Transfer
	full, err := s.resolve(remote)
	if err != nil {
		return tr, err
	}
	if mode == 0 {
		mode = 0o644
	}
	c := s.c
	max := c.cfg.MaxFileSize
	size := sourceSize(src)
	if size > max {
		return tr, fmt.Errorf("%w: %s is %d bytes, over the limit of %d bytes (staging.max_file_size)", ErrTooLarge, remote, size, max)
	}
	tctx, dl := c.transferDeadline(ctx, "upload of "+full)
	defer dl.stop()
	if size < 0 {
		dl.expect(max)
	} else {
		dl.expect(size)
	}
	ss, err := c.sftpClient(tctx)
	if err != nil {
		return tr, s.timeoutErr(tctx, err)
	}
	defer c.abortOnCancel(tctx, ss)()
	sc := ss.Client
	start := time.Now()
	dir, name := path.Split(full)
	dir = path.Clean(dir)
	if _, err := s.walk(sc, full, true); err != nil {
		return tr, s.timeoutErr(tctx, err)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	// Keep the temp name within NAME_MAX (255) for long final names.
	tmp := path.Join(dir, "."+name[:min(len(name), 200)]+".gridsub-tmp-"+hex.EncodeToString(rnd[:]))
	h := sha256.New()
	in := &srcReader{ctx: tctx, r: io.TeeReader(&capReader{r: src, left: max}, h)}
	n, err := s.upload(tctx, sc, in, tmp, mode)
	if errors.Is(err, errLimit) {
		err = fmt.Errorf("%w: %s: stopped after %d bytes, the limit (staging.max_file_size)", ErrTooLarge, remote, max)
	}
	if err == nil {
		if _, ok := sc.HasExtension("posix-rename@openssh.com"); ok {
			err = sc.PosixRename(tmp, full)
		} else {
			err = sc.Rename(tmp, full) // SFTPv3 rename: fails if full exists
		}
		if err != nil {
			err = c.transferErr("renaming into place", full, err)
		}
	}
	if err != nil {
		if rmErr := sc.Remove(tmp); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
			c.mu.Lock()
			c.orphans = append(c.orphans, tmp)
			c.mu.Unlock()
			c.log.Warn("could not remove temp file of a failed upload; will retry with the next sftp session", "path", tmp, "err", rmErr)
		}
		return tr, s.timeoutErr(tctx, err)
	}
	tr = backends.Transfer{Bytes: n, Duration: time.Since(start), SHA256: hex.EncodeToString(h.Sum(nil))}
	c.est.Observe(tr)
	return tr, nil
}

// timeoutErr adds why tctx ended (the caller's cancel or the transfer
// deadline) to err when it did and err does not say so yet.
func (s *Stager) timeoutErr(tctx context.Context, err error) error {
	cause := ctxErr(tctx)
	if cause == nil || errors.Is(err, cause) {
		return err
	}
	if errors.Is(cause, ErrTransferTimeout) || !errors.Is(err, tctx.Err()) {
		return fmt.Errorf("%w (%w)", cause, err)
	}
	return err
}

// upload writes r to tmp and returns the byte count once the file is
// durable (as far as the server allows) and has the expected size.
func (s *Stager) upload(ctx context.Context, sc *sftp.Client, r *srcReader, tmp string, mode fs.FileMode) (n int64, err error) {
	c := s.c
	f, err := sc.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return 0, c.transferErr("creating", tmp, err)
	}
	defer func() {
		if f != nil {
			f.Close() // error path only; the success path checks Close
		}
	}()
	if c.cfg.SFTPSequential {
		n, err = io.Copy(struct{ io.Writer }{f}, r) // hide ReadFrom: plain sequential writes
	} else {
		n, err = f.ReadFromWithConcurrency(r, c.cfg.SFTPRequests)
	}
	if err != nil {
		if errors.Is(err, errLimit) || errors.Is(r.err, errLimit) {
			return n, errLimit
		}
		if ctx.Err() != nil {
			return n, fmt.Errorf("uploading %s to %s: %w", tmp, c.cfg.addr(), ctxErr(ctx))
		}
		if r.err != nil {
			return n, fmt.Errorf("uploading %s to %s: reading the local source: %w", tmp, c.cfg.addr(), r.err)
		}
		return n, c.transferErr("writing", tmp, err)
	}
	if err := f.Chmod(mode.Perm()); err != nil {
		return n, c.transferErr("setting mode of", tmp, err)
	}
	if _, ok := sc.HasExtension("fsync@openssh.com"); ok {
		if err := f.Sync(); err != nil {
			return n, c.transferErr("fsync of", tmp, err)
		}
	}
	err = f.Close()
	f = nil
	if err != nil {
		return n, c.transferErr("closing", tmp, err)
	}
	st, err := sc.Stat(tmp)
	if err != nil {
		return n, c.transferErr("checking size of", tmp, err)
	}
	if st.Size() != n {
		return n, unavailable("upload of %s to %s is incomplete: wrote %d bytes, the server has %d", tmp, c.cfg.addr(), n, st.Size())
	}
	return n, nil
}

// Get downloads remote (relative to the root) into dst. It checks that the
// bytes received equal the remote file's size; the Transfer records bytes,
// duration and SHA-256, and feeds the Client's Estimator. On error dst may
// hold a prefix of the file.
//
// Confinement: every component below the root is checked with Lstat
// first; a symbolic link (to /etc/passwd, to /dev/zero, to a directory),
// device, FIFO or socket anywhere on the path fails with ErrSpecialFile
// before anything is opened, and the opened handle must still be the
// regular file checked. Bounds: a file over Config.MaxFileSize fails with
// ErrTooLarge (one that grows past it while read stops at the limit), and
// the Get is cancelled with ErrTransferTimeout after MinTransferTime +
// size/MinTransferRate.
func (s *Stager) Get(ctx context.Context, remote string, dst io.Writer) (backends.Transfer, error) {
	return s.GetLimit(ctx, remote, dst, 0)
}

// GetLimit is Get with a tighter size limit for this file (a job's
// remaining byte budget): limit <= 0 or above Config.MaxFileSize means
// Config.MaxFileSize.
func (s *Stager) GetLimit(ctx context.Context, remote string, dst io.Writer, limit int64) (backends.Transfer, error) {
	var tr backends.Transfer
	full, err := s.resolve(remote)
	if err != nil {
		return tr, err
	}
	c := s.c
	max := c.cfg.MaxFileSize
	if limit > 0 && limit < max {
		max = limit
	}
	tctx, dl := c.transferDeadline(ctx, "download of "+full)
	defer dl.stop()
	ss, err := c.sftpClient(tctx)
	if err != nil {
		return tr, s.timeoutErr(tctx, err)
	}
	defer c.abortOnCancel(tctx, ss)()
	sc := ss.Client
	start := time.Now()
	lfi, err := s.walk(sc, full, false)
	if err == nil && lfi == nil {
		err = c.transferErr("opening", full, fs.ErrNotExist)
	}
	if err != nil {
		return tr, s.timeoutErr(tctx, err)
	}
	if lfi.Size() > max {
		return tr, fmt.Errorf("%w: %s on %s is %d bytes, over the limit of %d bytes", ErrTooLarge, full, c.cfg.addr(), lfi.Size(), max)
	}
	dl.expect(lfi.Size())
	f, err := sc.Open(full)
	if err != nil {
		return tr, s.timeoutErr(tctx, c.transferErr("opening", full, err))
	}
	defer f.Close() // read-only: a close error cannot lose data
	st, err := f.Stat()
	if err != nil {
		return tr, s.timeoutErr(tctx, c.transferErr("stat of", full, err))
	}
	// The handle must be the file walk checked: a component swapped for a
	// link in between shows here as another type, size or time.
	if !st.Mode().IsRegular() || st.Size() != lfi.Size() || !st.ModTime().Equal(lfi.ModTime()) {
		return tr, fmt.Errorf("%w: %s on %s changed while it was opened (now a %s of %d bytes); refused",
			ErrSpecialFile, full, c.cfg.addr(), fileType(st.Mode()), st.Size())
	}
	h := sha256.New()
	w := &ctxWriter{ctx: tctx, w: io.MultiWriter(dst, h), left: max}
	var n int64
	if c.cfg.SFTPSequential {
		n, err = io.Copy(w, struct{ io.Reader }{f})
	} else {
		n, err = f.WriteTo(w)
	}
	if err != nil {
		switch {
		case w.over:
			return tr, fmt.Errorf("%w: %s on %s grew past the limit of %d bytes while read; stopped there", ErrTooLarge, full, c.cfg.addr(), max)
		case tctx.Err() != nil:
			return tr, fmt.Errorf("downloading %s from %s: %w", full, c.cfg.addr(), ctxErr(tctx))
		case w.err != nil:
			return tr, fmt.Errorf("downloading %s from %s: writing locally: %w", full, c.cfg.addr(), err)
		}
		return tr, c.transferErr("reading", full, err)
	}
	if n != st.Size() {
		return tr, unavailable("download of %s from %s is incomplete: got %d of %d bytes", full, c.cfg.addr(), n, st.Size())
	}
	tr = backends.Transfer{Bytes: n, Duration: time.Since(start), SHA256: hex.EncodeToString(h.Sum(nil))}
	c.est.Observe(tr)
	return tr, nil
}

// ctxWriter stops a copy once ctx is done or left bytes were written,
// and remembers local write errors.
type ctxWriter struct {
	ctx  context.Context
	w    io.Writer
	left int64
	over bool // the copy hit the limit
	err  error
}

func (w *ctxWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	if int64(len(p)) > w.left {
		n, err := w.w.Write(p[:w.left])
		w.left -= int64(n)
		w.over = true
		if err != nil {
			w.err = err
			return n, err
		}
		return n, errLimit
	}
	n, err := w.w.Write(p)
	w.left -= int64(n)
	if err != nil {
		w.err = err
	}
	return n, err
}
