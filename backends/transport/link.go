package transport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// Link makes link (relative to the root) a symbolic link to target
// (relative to the root), so that a job reads a file that lies at the site
// where it lies, without a copy (a job file input with `site:`). It returns
// the target's size.
//
// Confinement: every component of target is checked with Lstat as Get
// checks it (a symbolic link, device, FIFO or socket on the way, or a
// target that is not a regular file, fails with ErrSpecialFile; a missing
// one wraps fs.ErrNotExist); link's directories are created and checked as
// Put creates them. The link's text is relative ("../../data/x"), so it
// names the checked file below the root whatever the root's absolute path.
// An earlier symbolic link at link is replaced atomically (a temporary link
// renamed over it); any other file there is refused.
func (s *Stager) Link(ctx context.Context, target, link string) (int64, error) {
	tfull, err := s.resolve(target)
	if err != nil {
		return 0, err
	}
	lfull, err := s.resolve(link)
	if err != nil {
		return 0, err
	}
	c := s.c
	tctx, dl := c.transferDeadline(ctx, "link of "+lfull)
	defer dl.stop()
	ss, err := c.sftpClient(tctx)
	if err != nil {
		return 0, s.timeoutErr(tctx, err)
	}
	defer c.abortOnCancel(tctx, ss)()
	sc := ss.Client
	tfi, err := s.walk(sc, tfull, false)
	if err == nil && tfi == nil {
		err = c.transferErr("checking", tfull, fs.ErrNotExist)
	}
	if err != nil {
		return 0, s.timeoutErr(tctx, err)
	}
	old, err := s.walk(sc, lfull, true)
	if err != nil && (old == nil || old.Mode()&fs.ModeSymlink == 0) {
		return 0, s.timeoutErr(tctx, err)
	}
	if old != nil && old.Mode()&fs.ModeSymlink == 0 {
		return 0, fmt.Errorf("%w: %s on %s is a %s; refused to replace it with a link", ErrSpecialFile, lfull, c.cfg.addr(), fileType(old.Mode()))
	}
	rel := strings.TrimPrefix(path.Clean(link), "./")
	text := strings.Repeat("../", strings.Count(rel, "/")) + path.Clean(target)
	var rnd [6]byte
	rand.Read(rnd[:])
	dir, name := path.Split(lfull)
	tmp := path.Join(dir, "."+name[:min(len(name), 200)]+".gridsub-tmp-"+hex.EncodeToString(rnd[:]))
	if err := sc.Symlink(text, tmp); err != nil {
		return 0, s.timeoutErr(tctx, c.transferErr("linking", lfull, err))
	}
	if _, ok := sc.HasExtension("posix-rename@openssh.com"); ok {
		err = sc.PosixRename(tmp, lfull)
	} else {
		if old != nil {
			_ = sc.Remove(lfull)
		}
		err = sc.Rename(tmp, lfull)
	}
	if err != nil {
		if rmErr := sc.Remove(tmp); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
			c.log.Warn("could not remove a temporary link", "path", tmp, "err", rmErr)
		}
		return 0, s.timeoutErr(tctx, c.transferErr("renaming into place", lfull, err))
	}
	return tfi.Size(), nil
}
