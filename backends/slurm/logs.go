package slurm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/gridsub/gridsub/backends"
)

// rangeReader is the Stager capability of reading part of a growing file
// (transport.Stager.ReadRange).
type rangeReader interface {
	ReadRange(ctx context.Context, remote string, offset int64, max int) ([]byte, int64, error)
}

var _ backends.LogReader = (*Backend)(nil)

// ReadLog implements backends.LogReader: it reads the job's gridsub.out or
// gridsub.err in its job directory over SFTP (confined to the staging root,
// no link followed), while the job runs and after.
func (b *Backend) ReadLog(ctx context.Context, id backends.JobID, spec *backends.JobSpec, stream string, offset int64, max int) ([]byte, int64, error) {
	return ReadJobLog(ctx, b.cfg.Name, b.stage, id, spec, stream, offset, max)
}

// ReadJobLog is ReadLog for any backend that keeps a job's output in
// JobDir(spec) below a Stager's root (SLURM, PBS).
func ReadJobLog(ctx context.Context, site string, st backends.Stager, id backends.JobID, spec *backends.JobSpec, stream string, offset int64, max int) ([]byte, int64, error) {
	name := backends.LogFile(stream)
	if name == "" {
		return nil, 0, fmt.Errorf("%w: log stream %q (want %s or %s)", backends.ErrInvalidSpec, stream, backends.StreamStdout, backends.StreamStderr)
	}
	rr, ok := st.(rangeReader)
	if !ok {
		return nil, 0, fmt.Errorf("%w: %s cannot read a job's output while it runs (no SFTP stager)", backends.ErrUnsupported, site)
	}
	data, size, err := rr.ReadRange(ctx, path.Join(JobDir(spec), name), offset, max)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil // not written yet
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%s: reading %s of job %s: %w", site, name, id, err)
	}
	return data, size, nil
}
