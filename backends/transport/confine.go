package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
)

// Staging limits applied by Dial to zero Config fields.
const (
	// DefaultMaxFileSize bounds one staged or fetched file: 10 GiB.
	DefaultMaxFileSize int64 = 10 << 30
	// DefaultMinTransferRate is the slowest transfer rate tolerated, in
	// bytes per second (1 MiB/s): a transfer of n bytes must end within
	// DefaultMinTransferTime + n/DefaultMinTransferRate.
	DefaultMinTransferRate float64 = 1 << 20
	// DefaultMinTransferTime is the time every transfer gets whatever its
	// size (setup, directory walk, rename, fsync).
	DefaultMinTransferTime = time.Minute
)

// fileType names the type of a file mode for messages: "symbolic link",
// "named pipe (FIFO)", "socket", "device", "directory", "regular file".
func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "regular file"
	}
	return "irregular file (" + m.Type().String() + ")"
}

// walk checks every component of full (a path below s.root that resolve
// returned) with Lstat, without following any symbolic link: each parent
// must be a real directory (with mkdirs, a missing one is created, one at a
// time, and checked again). It returns the final component's FileInfo (nil
// when it does not exist). A symbolic link, device, FIFO or socket anywhere
// below the root is refused with ErrSpecialFile naming the path and its
// type; so is a final component that is not a regular file. The root itself
// is the site's configuration and is trusted (it may be a link, as
// /scratch often is).
func (s *Stager) walk(sc *sftp.Client, full string, mkdirs bool) (fs.FileInfo, error) {
	c := s.c
	rel := strings.TrimPrefix(full, s.root+"/")
	if s.root == "." {
		rel = full
	}
	parts := strings.Split(rel, "/")
	if mkdirs && !s.rootMade.Load() {
		// The root is configuration: create it as configured, once.
		if err := sc.MkdirAll(s.root); err != nil {
			return nil, c.transferErr("creating directory", s.root, err)
		}
		s.rootMade.Store(true)
	}
	// Every component is Lstat'ed at once (pkg/sftp pipelines concurrent
	// requests: one round trip, not one per level), then judged in order.
	paths := make([]string, len(parts))
	cur := s.root
	for i, p := range parts {
		cur = path.Join(cur, p)
		paths[i] = cur
	}
	infos := make([]fs.FileInfo, len(paths))
	errs := make([]error, len(paths))
	var wg sync.WaitGroup
	for i := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			infos[i], errs[i] = sc.Lstat(paths[i])
		}()
	}
	wg.Wait()
	for i, cur := range paths[:len(paths)-1] {
		fi, err := infos[i], errs[i]
		if errors.Is(err, fs.ErrNotExist) && mkdirs {
			if err := sc.Mkdir(cur); err != nil {
				// Someone may have made it meanwhile: check what is there.
				if fi, err2 := sc.Lstat(cur); err2 != nil || !fi.IsDir() {
					return nil, c.transferErr("creating directory", cur, err)
				}
			}
			fi, err = sc.Lstat(cur)
			// What lay below a missing directory was not there either.
			for k := i + 1; k < len(paths); k++ {
				infos[k], errs[k] = nil, fs.ErrNotExist
			}
		}
		if err != nil {
			return nil, c.transferErr("checking", cur, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("%w: %s on %s is a %s, not a directory; refused (nothing is followed out of %s)",
				ErrSpecialFile, cur, c.cfg.addr(), fileType(fi.Mode()), s.root)
		}
	}
	fi, err := infos[len(paths)-1], errs[len(paths)-1]
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, c.transferErr("checking", full, err)
	}
	if !fi.Mode().IsRegular() {
		return fi, fmt.Errorf("%w: %s on %s is a %s; only regular files are transferred",
			ErrSpecialFile, full, c.cfg.addr(), fileType(fi.Mode()))
	}
	return fi, nil
}

// deadline bounds one transfer: it cancels the transfer's context once
// MinTransferTime plus the expected size at MinTransferRate has passed
// since the transfer began, with an ErrTransferTimeout cause.
type deadline struct {
	c      *Client
	what   string
	start  time.Time
	timer  *time.Timer
	cancel context.CancelCauseFunc
}

// transferDeadline returns the context a transfer runs under; it ends
// MinTransferTime from now until expect names the size. Call stop when
// the transfer has returned.
func (c *Client) transferDeadline(ctx context.Context, what string) (context.Context, *deadline) {
	tctx, cancel := context.WithCancelCause(ctx)
	d := &deadline{c: c, what: what, start: time.Now(), cancel: cancel}
	d.timer = time.AfterFunc(c.cfg.MinTransferTime, func() { d.expire(-1) })
	return tctx, d
}

// maxDeadline caps a computed transfer deadline (a year).
const maxDeadline = 365 * 24 * time.Hour

// limit is the time allowed for a transfer of size bytes (-1: not known
// yet).
func (d *deadline) limit(size int64) time.Duration {
	l := d.c.cfg.MinTransferTime
	if size > 0 {
		// Clamped: a huge size at a tiny rate must not overflow into a
		// negative duration.
		l += time.Duration(min(float64(size)/d.c.cfg.MinTransferRate*float64(time.Second), float64(maxDeadline)))
	}
	return min(l, maxDeadline)
}

func (d *deadline) expire(size int64) {
	why := fmt.Sprintf("%s on %s did not finish within %s", d.what, d.c.cfg.addr(), d.limit(size).Round(time.Millisecond))
	if size >= 0 {
		why += fmt.Sprintf(" (%s plus %d bytes at the minimum rate of %.0f bytes/s)", d.c.cfg.MinTransferTime, size, d.c.cfg.MinTransferRate)
	} else {
		why += " (the minimum transfer time, before the size was known)"
	}
	d.cancel(fmt.Errorf("%w: %s", ErrTransferTimeout, why))
}

// expect sets the deadline for a transfer of size bytes, counted from the
// transfer's start.
func (d *deadline) expect(size int64) {
	if !d.timer.Stop() {
		return // already expired
	}
	d.timer = time.AfterFunc(time.Until(d.start.Add(d.limit(size))), func() { d.expire(size) })
}

func (d *deadline) stop() {
	d.timer.Stop()
	d.cancel(nil)
}

// ctxErr is why ctx ended: its cause (ErrTransferTimeout for a transfer
// deadline) or ctx.Err().
func ctxErr(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return ctx.Err()
}

// errLimit marks a copy stopped at the size limit (internal: the caller
// turns it into an ErrTooLarge naming the file).
var errLimit = errors.New("size limit reached")

// capReader reads at most max bytes of r; asked for more while r has more,
// it fails with errLimit.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			return 0, errLimit
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// size of a source when it can tell (an *os.File, a *bytes.Reader, ...);
// -1 otherwise.
func sourceSize(r io.Reader) int64 {
	switch v := r.(type) {
	case interface{ Stat() (fs.FileInfo, error) }:
		if fi, err := v.Stat(); err == nil && fi.Mode().IsRegular() {
			return fi.Size()
		}
	case interface{ Len() int }:
		return int64(v.Len())
	}
	return -1
}
