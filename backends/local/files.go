//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gridsub/gridsub/backends"
)

// ctxReader stops a copy once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// copyInto writes r (at most limit bytes) to rel inside dst, atomically:
// a temporary file renamed into place, so a reader sees all or nothing.
func copyInto(ctx context.Context, dst *os.Root, rel string, r io.Reader, limit int64, mode fs.FileMode) (int64, error) {
	if d := path.Dir(rel); d != "." {
		if err := dst.MkdirAll(d, 0o755); err != nil {
			return 0, err
		}
	}
	tmp := rel + ".gridsub-part"
	f, err := dst.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, io.LimitReader(ctxReader{ctx, r}, limit+1))
	if err == nil && n > limit {
		err = fmt.Errorf("%w: larger than the limit of %d bytes", backends.ErrRejected, limit)
	}
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dst.Rename(tmp, rel)
	}
	if err != nil {
		dst.Remove(tmp)
		return n, err
	}
	return n, nil
}

func writeFile(dst *os.Root, rel string, b []byte, mode fs.FileMode) error {
	_, err := copyInto(context.Background(), dst, rel, strings.NewReader(string(b)), int64(len(b)), mode)
	return err
}

// stage copies one input into the job directory. The source is a regular
// file on this machine (a symbolic link to one is followed: the user named
// it); the destination stays inside the job directory whatever links it
// holds.
func (s *Site) stage(ctx context.Context, dir *os.Root, in backends.StageFile) error {
	rel, err := relPath("input", in.Remote)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(in.Local, os.O_RDONLY|syscallNonblock, 0)
	if err != nil {
		return fmt.Errorf("%w: %s: input %s: %w", backends.ErrInvalidSpec, s.cfg.Name, in.Local, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: input %s: %w", s.cfg.Name, in.Local, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s: input %s is not a regular file", backends.ErrInvalidSpec, s.cfg.Name, in.Local)
	}
	if fi.Size() > s.cfg.MaxInputBytes {
		return fmt.Errorf("%w: %s: input %s has %d bytes, more than the limit of %d", backends.ErrInvalidSpec, s.cfg.Name, in.Local, fi.Size(), s.cfg.MaxInputBytes)
	}
	mode := in.Mode.Perm()
	if mode == 0 {
		mode = 0o644
	}
	if _, err := copyInto(ctx, dir, rel, f, s.cfg.MaxInputBytes, mode); err != nil {
		if errors.Is(err, backends.ErrRejected) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: staging %s: %w", s.cfg.Name, in.Remote, err)
		}
		return fmt.Errorf("%w: %s: staging %s into the job directory: %w", backends.ErrInvalidSpec, s.cfg.Name, in.Remote, err)
	}
	return nil
}

// FetchOutputs copies the job's gridsub.out and gridsub.err (when present)
// and spec.Outputs (required; a path ending in "/" is a directory whose
// regular files are copied) from its job directory into localDir, and
// returns the local paths. spec may be nil: the outputs of the submitted
// spec are fetched. The job must have ended.
//
// Confinement: sources are opened through an os.Root on the job directory
// and destinations through one on localDir, so no path or link leads out of
// either; a source that is a symbolic link, or not a regular file, is
// refused (ErrRejected), as is one larger than MaxOutputBytes.
func (s *Site) FetchOutputs(ctx context.Context, id backends.JobID, spec *backends.JobSpec, localDir string) ([]string, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	j, ok := s.jobs[id]
	if !ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %s has no job %q", backends.ErrUnknownJob, s.cfg.Name, id)
	}
	final, tag, outs := j.final(), j.rec.Tag, j.rec.Outputs
	st := j.state()
	s.mu.Unlock()
	if !final {
		return nil, fmt.Errorf("%w: %s: job %s is %s; its outputs are fetched once it has ended", backends.ErrRejected, s.cfg.Name, id, st)
	}
	if spec != nil {
		outs = spec.Outputs
	}
	rels := make([]string, len(outs))
	for i, o := range outs {
		r, err := relPath("output", o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.cfg.Name, err)
		}
		rels[i] = r
	}
	src, err := s.root.OpenRoot(tag)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: job directory of job %s: %w", backends.ErrRejected, s.cfg.Name, id, err)
	}
	defer src.Close()
	if err := os.MkdirAll(localDir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: destination %s: %w", s.cfg.Name, localDir, err)
	}
	dst, err := os.OpenRoot(localDir)
	if err != nil {
		return nil, fmt.Errorf("%s: destination %s: %w", s.cfg.Name, localDir, err)
	}
	defer dst.Close()
	f := &fetch{s: s, ctx: ctx, src: src, dst: dst, localDir: localDir, id: id}
	for _, n := range []string{StdoutFile, StderrFile} {
		if err := f.file(n, true); err != nil {
			return f.got, err
		}
	}
	for i, o := range outs {
		var err error
		if strings.HasSuffix(o, "/") {
			err = f.tree(rels[i])
		} else {
			err = f.file(rels[i], false)
		}
		if err != nil {
			return f.got, err
		}
	}
	return f.got, nil
}

// fetch is one FetchOutputs call.
type fetch struct {
	s        *Site
	ctx      context.Context
	src, dst *os.Root
	localDir string
	id       backends.JobID
	got      []string
	dirs     int // directories listed
}

func (f *fetch) fail(rel string, err error) error {
	return fmt.Errorf("%s: fetching %s of job %s: %w", f.s.cfg.Name, rel, f.id, err)
}

// file copies one regular file; optional ones may be missing.
func (f *fetch) file(rel string, optional bool) error {
	if len(f.got) >= f.s.cfg.MaxOutputFiles {
		return f.fail(rel, fmt.Errorf("%w: more than %d files", backends.ErrRejected, f.s.cfg.MaxOutputFiles))
	}
	li, err := f.src.Lstat(rel)
	if err != nil {
		if optional && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return f.fail(rel, err)
	}
	switch {
	case li.Mode()&fs.ModeSymlink != 0:
		return f.fail(rel, fmt.Errorf("%w: it is a symbolic link; only regular files are fetched", backends.ErrRejected))
	case !li.Mode().IsRegular():
		return f.fail(rel, fmt.Errorf("%w: it is not a regular file (%s)", backends.ErrRejected, li.Mode().Type()))
	case li.Size() > f.s.cfg.MaxOutputBytes:
		return f.fail(rel, fmt.Errorf("%w: %d bytes, more than the limit of %d", backends.ErrRejected, li.Size(), f.s.cfg.MaxOutputBytes))
	}
	r, err := f.src.OpenFile(rel, os.O_RDONLY|syscallNonblock, 0)
	if err != nil {
		return f.fail(rel, err)
	}
	defer r.Close()
	// The file opened must be the one checked: not swapped for a link or
	// a device in between.
	if fi, err := r.Stat(); err != nil || !os.SameFile(fi, li) {
		return f.fail(rel, fmt.Errorf("%w: it changed while being opened", backends.ErrRejected))
	}
	if _, err := copyInto(f.ctx, f.dst, rel, r, f.s.cfg.MaxOutputBytes, 0o644); err != nil {
		return f.fail(rel, err)
	}
	f.got = append(f.got, filepath.Join(f.localDir, filepath.FromSlash(rel)))
	return nil
}

// tree copies the regular files below a directory (links are not
// followed, other files skipped), in name order.
func (f *fetch) tree(rel string) error {
	if f.dirs++; f.dirs+len(f.got) > f.s.cfg.MaxOutputFiles {
		return f.fail(rel, fmt.Errorf("%w: more than %d files and directories", backends.ErrRejected, f.s.cfg.MaxOutputFiles))
	}
	li, err := f.src.Lstat(rel)
	if err != nil {
		return f.fail(rel, err)
	}
	if !li.IsDir() {
		return f.fail(rel, fmt.Errorf("%w: declared as a directory but it is not one", backends.ErrRejected))
	}
	d, err := f.src.Open(rel)
	if err != nil {
		return f.fail(rel, err)
	}
	ents, err := d.ReadDir(f.s.cfg.MaxOutputFiles + 1)
	d.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return f.fail(rel, err)
	}
	sort.Slice(ents, func(a, b int) bool { return ents[a].Name() < ents[b].Name() })
	for _, e := range ents {
		p := path.Join(rel, e.Name())
		switch {
		case e.Type().IsRegular():
			err = f.file(p, false)
		case e.IsDir():
			err = f.tree(p)
		}
		if err != nil {
			return err
		}
		if err := f.ctx.Err(); err != nil {
			return f.fail(p, err)
		}
	}
	return nil
}
