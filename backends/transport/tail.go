package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/gridsub/gridsub/backends"
)

// ReadRange reads at most max bytes (clamped by backends.LogMax) of the
// remote file from offset on, for following a file that is still being
// written (a running job's output). It returns the bytes and the file's
// size at the time of reading. The path is confined like Get's: relative
// to the Stager's root, every component checked, no link followed, only a
// regular file read. A file (or a directory on its way) that does not
// exist is an error wrapping fs.ErrNotExist. The read runs under the
// transfer deadline of its size.
func (s *Stager) ReadRange(ctx context.Context, remote string, offset int64, max int) ([]byte, int64, error) {
	if offset < 0 {
		return nil, 0, fmt.Errorf("%w: negative offset %d", backends.ErrInvalidSpec, offset)
	}
	full, err := s.resolve(remote)
	if err != nil {
		return nil, 0, err
	}
	c := s.c
	max = backends.LogMax(max)
	tctx, dl := c.transferDeadline(ctx, "read of "+full)
	defer dl.stop()
	dl.expect(int64(max))
	ss, err := c.sftpClient(tctx)
	if err != nil {
		return nil, 0, s.timeoutErr(tctx, err)
	}
	defer c.abortOnCancel(tctx, ss)()
	sc := ss.Client
	lfi, err := s.walk(sc, full, false)
	if err == nil && lfi == nil {
		err = c.transferErr("opening", full, fs.ErrNotExist)
	}
	if err != nil {
		return nil, 0, s.timeoutErr(tctx, err)
	}
	f, err := sc.Open(full)
	if err != nil {
		return nil, 0, s.timeoutErr(tctx, c.transferErr("opening", full, err))
	}
	defer f.Close() // read-only
	st, err := f.Stat()
	if err != nil {
		return nil, 0, s.timeoutErr(tctx, c.transferErr("stat of", full, err))
	}
	// The handle must be the regular file walk checked (a component
	// swapped for a link in between shows as another type or inode time).
	if !st.Mode().IsRegular() || !lfi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%w: %s on %s changed while it was opened (now a %s); refused", ErrSpecialFile, full, c.cfg.addr(), fileType(st.Mode()))
	}
	size := st.Size()
	if offset >= size {
		return nil, size, nil
	}
	n := min(int64(max), size-offset)
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, size, s.timeoutErr(tctx, c.transferErr("reading", full, err))
	}
	// A growing file's size and time change legitimately, so the check of
	// GetLimit (same size and time) cannot apply: the path is Lstat'ed again
	// after the read and must still be a regular file, not a link planted
	// since the walk.
	if again, err := sc.Lstat(full); err != nil || !again.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%w: %s on %s changed while it was read; refused", ErrSpecialFile, full, c.cfg.addr())
	}
	return buf[:got], size, nil
}
