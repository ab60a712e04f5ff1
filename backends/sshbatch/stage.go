package sshbatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport"
)

// Staging: inputs in before the submission, outputs back after the end,
// logs and site files. What the Stager enforces on each remote file is in
// backends/transport (confine.go); this file adds the job's byte budget,
// the directory listing, and the local side (backends.OutputDir).

// put stages one input and returns its size. The local file must be a
// regular file (opened without blocking, so a FIFO named as an input is
// refused instead of hanging) no larger than what is left of the job's
// budget; the Stager confines and bounds the remote side.
func (b *Backend) put(ctx context.Context, dir string, in backends.StageFile, budget int64) (int64, error) {
	rel, err := RelPath("input", in.Remote)
	if err != nil {
		return 0, err
	}
	f, err := os.OpenFile(in.Local, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, fmt.Errorf("%w: input %s: %w", backends.ErrInvalidSpec, in.Local, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("%w: input %s: %w", backends.ErrInvalidSpec, in.Local, err)
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%w: input %s is a %s, not a regular file", backends.ErrInvalidSpec, in.Local, fi.Mode().Type())
	}
	if fi.Size() > budget {
		return 0, fmt.Errorf("%w: input %s (%d bytes) exceeds what is left of the job's limit of %d bytes (staging.max_job_bytes): %d bytes",
			transport.ErrTooLarge, in.Local, fi.Size(), b.maxJobBytes(), budget)
	}
	mode := in.Mode
	if mode == 0 {
		mode = 0o644
	}
	// The file may grow while read: never send more than was counted.
	src := io.LimitReader(f, fi.Size())
	tr, err := b.stage.Put(ctx, sizedReader{src, f}, path.Join(dir, rel), mode)
	if err != nil {
		return 0, fmt.Errorf("%s: staging %s: %w", b.cfg.Name, in.Remote, err)
	}
	return tr.Bytes, nil
}

// sizedReader reads r and reports f's Stat (the Stager sizes the
// transfer's deadline and limit from it).
type sizedReader struct {
	io.Reader
	f *os.File
}

func (s sizedReader) Stat() (fs.FileInfo, error) { return s.f.Stat() }

// FetchOutputs copies the job's stdout and stderr (gridsub.out,
// gridsub.err) and spec.Outputs from its job directory into localDir, and
// returns the local paths. A missing stdout/stderr is skipped; a missing
// declared output is an error.
//
// Nothing but regular files is fetched: a symbolic link, device, FIFO or
// socket among the outputs (or on the way to one) is refused by the Stager
// with an error naming it and its type, and the other outputs are still
// fetched; the errors are joined. The outputs of one job together may not
// exceed Config.MaxJobBytes (each file also has the Stager's own limit).
// Locally, files are written through backends.OutputDir: never through a
// link out of localDir, each complete under its name or not at all.
func (b *Backend) FetchOutputs(ctx context.Context, id backends.JobID, spec *backends.JobSpec, localDir string) ([]string, error) {
	if b.stage == nil {
		return nil, fmt.Errorf("%w: %s has no stager", backends.ErrUnsupported, b.cfg.Name)
	}
	dir := JobDir(spec)
	out, err := backends.OpenOutputDir(localDir)
	if err != nil {
		return nil, fmt.Errorf("%s: fetching outputs of job %s: %w", b.cfg.Name, id, err)
	}
	defer out.Close()
	var got []string
	var errs []error
	budget := b.maxJobBytes()
	// fetch returns an error only when the fetch must stop (budget spent,
	// site or deadline trouble); refusals of one file are collected.
	fetch := func(rel string, optional bool) error {
		f, err := out.Create(rel)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: fetching %s of job %s: %w", b.cfg.Name, rel, id, err))
			return nil
		}
		before := budget
		bw := &budgetWriter{w: f, left: budget}
		var gerr error
		if g, ok := b.stage.(limitGetter); ok {
			_, gerr = g.GetLimit(ctx, path.Join(dir, rel), bw, budget)
		} else {
			_, gerr = b.stage.Get(ctx, path.Join(dir, rel), bw)
		}
		budget -= bw.n
		if gerr != nil {
			f.Discard()
			if optional && errors.Is(gerr, os.ErrNotExist) {
				return nil
			}
			err := fmt.Errorf("%s: fetching %s of job %s: %w", b.cfg.Name, rel, id, gerr)
			if bw.over || (errors.Is(gerr, transport.ErrTooLarge) && before < b.maxFileSize()) {
				return fmt.Errorf("%w: the outputs of job %s exceed its limit of %d bytes (staging.max_job_bytes): %w",
					transport.ErrTooLarge, id, b.maxJobBytes(), err)
			}
			if errors.Is(gerr, backends.ErrInvalidSpec) || errors.Is(gerr, os.ErrNotExist) {
				errs = append(errs, err)
				return nil
			}
			return err
		}
		p, err := f.Commit()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: fetching %s of job %s: %w", b.cfg.Name, rel, id, err))
			return nil
		}
		got = append(got, p)
		return nil
	}
	stop := func(err error) ([]string, error) {
		return got, errors.Join(append(errs, err)...)
	}
	for _, f := range []string{StdoutFile, StderrFile} {
		if err := fetch(f, true); err != nil {
			return stop(err)
		}
	}
	for _, o := range spec.Outputs {
		rel, err := RelPath("output", o)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !strings.HasSuffix(o, "/") {
			if err := fetch(rel, false); err != nil {
				return stop(err)
			}
			continue
		}
		// A directory: list what is below it without following links;
		// anything but regular files and directories is refused.
		files, special, err := b.listFiles(ctx, path.Join(dir, rel))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: listing %s of job %s: %w", b.cfg.Name, o, id, err))
			continue
		}
		for _, e := range special {
			errs = append(errs, fmt.Errorf("%s: fetching %s of job %s: %w: %s is a %s; only regular files are transferred",
				b.cfg.Name, path.Join(rel, e.Path), id, transport.ErrSpecialFile, path.Join(rel, e.Path), e.TypeName()))
		}
		for _, f := range files {
			if err := fetch(path.Join(rel, f), false); err != nil {
				return stop(err)
			}
		}
	}
	return got, errors.Join(errs...)
}

// limitGetter is the Stager capability of a per-call size limit
// (transport.Stager.GetLimit): a file over the job's remaining budget is
// refused before its bytes move.
type limitGetter interface {
	GetLimit(ctx context.Context, remote string, dst io.Writer, limit int64) (backends.Transfer, error)
}

// budgetWriter fails a write past left bytes (a job's output budget).
type budgetWriter struct {
	w    io.Writer
	n    int64
	left int64
	over bool
}

func (w *budgetWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > w.left-w.n {
		w.over = true
		return 0, fmt.Errorf("%w: the job's output budget is spent", transport.ErrTooLarge)
	}
	n, err := w.w.Write(p)
	w.n += int64(n)
	return n, err
}

// DefaultMaxJobBytes bounds the bytes staged in, and those fetched, for
// one job: 50 GiB.
const DefaultMaxJobBytes int64 = 50 << 30

func (b *Backend) maxJobBytes() int64 {
	if b.cfg.MaxJobBytes > 0 {
		return b.cfg.MaxJobBytes
	}
	return DefaultMaxJobBytes
}

func (b *Backend) maxFileSize() int64 {
	if b.cfg.MaxFileSize > 0 {
		return b.cfg.MaxFileSize
	}
	return transport.DefaultMaxFileSize
}

// listFiles returns the regular files below dir (relative to RemoteDir),
// as paths relative to dir, sorted, and the entries that are neither
// regular files nor directories (links are listed, never followed).
func (b *Backend) listFiles(ctx context.Context, dir string) ([]string, []FileEntry, error) {
	argv := ListFilesArgv(path.Join(b.RemoteDir(), dir))
	r, err := b.x.Output(ctx, argv)
	if err != nil {
		return nil, nil, err
	}
	ents, err := ParseFileList(r.Stdout)
	if err != nil {
		return nil, nil, err
	}
	var files []string
	var special []FileEntry
	for _, e := range ents {
		switch e.Type {
		case 'f':
			files = append(files, e.Path)
		case 'd':
		default:
			special = append(special, e)
		}
	}
	return files, special, nil
}

// rangeReader is the Stager capability of reading part of a growing file
// (transport.Stager.ReadRange).
type rangeReader interface {
	ReadRange(ctx context.Context, remote string, offset int64, max int) ([]byte, int64, error)
}

// ReadLog implements backends.LogReader: it reads the job's gridsub.out or
// gridsub.err in its job directory over SFTP (confined to the staging root,
// no link followed). Under a batch system that spools a running job's
// output elsewhere (PBS), the streams read as empty until the job ends.
func (b *Backend) ReadLog(ctx context.Context, id backends.JobID, spec *backends.JobSpec, stream string, offset int64, max int) ([]byte, int64, error) {
	name := backends.LogFile(stream)
	if name == "" {
		return nil, 0, fmt.Errorf("%w: log stream %q (want %s or %s)", backends.ErrInvalidSpec, stream, backends.StreamStdout, backends.StreamStderr)
	}
	rr, ok := b.stage.(rangeReader)
	if !ok {
		return nil, 0, fmt.Errorf("%w: %s cannot read a job's output while it runs (no SFTP stager)", backends.ErrUnsupported, b.cfg.Name)
	}
	data, size, err := rr.ReadRange(ctx, path.Join(JobDir(spec), name), offset, max)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil // not written yet
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%s: reading %s of job %s: %w", b.cfg.Name, name, id, err)
	}
	return data, size, nil
}

// ReadData copies a file that lies below the site's remote directory
// (backends.DataHolder; confinement and bounds are the Stager's).
func (b *Backend) ReadData(ctx context.Context, p string, dst io.Writer, limit int64) (backends.Transfer, error) {
	if b.stage == nil {
		return backends.Transfer{}, fmt.Errorf("%w: %s has no stager", backends.ErrUnsupported, b.cfg.Name)
	}
	return ReadData(ctx, b.cfg.Name, b.stage, p, dst, limit)
}

// LinkData links a file that lies below the site's remote directory into
// spec's job directory (backends.DataHolder).
func (b *Backend) LinkData(ctx context.Context, spec *backends.JobSpec, p, remote string) (int64, error) {
	if b.stage == nil {
		return 0, fmt.Errorf("%w: %s has no stager", backends.ErrUnsupported, b.cfg.Name)
	}
	if err := b.checkSpec(spec); err != nil {
		return 0, err
	}
	return LinkData(ctx, b.cfg.Name, b.stage, JobDir(spec), p, remote)
}
