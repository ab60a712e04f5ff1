package slurm

import (
	"context"
	"fmt"
	"io"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

var _ backends.DataHolder = (*Backend)(nil)

// ReadData copies a file that lies below the site's remote_dir
// (backends.DataHolder; confinement and bounds are the Stager's).
func (b *Backend) ReadData(ctx context.Context, p string, dst io.Writer, limit int64) (backends.Transfer, error) {
	if b.stage == nil {
		return backends.Transfer{}, fmt.Errorf("%w: %s has no stager", backends.ErrUnsupported, b.cfg.Name)
	}
	return sshbatch.ReadData(ctx, b.cfg.Name, b.stage, p, dst, limit)
}

// LinkData links a file that lies below the site's remote_dir into spec's
// job directory (backends.DataHolder).
func (b *Backend) LinkData(ctx context.Context, spec *backends.JobSpec, p, remote string) (int64, error) {
	if b.stage == nil {
		return 0, fmt.Errorf("%w: %s has no stager", backends.ErrUnsupported, b.cfg.Name)
	}
	if err := checkSpec(spec); err != nil {
		return 0, err
	}
	return sshbatch.LinkData(ctx, b.cfg.Name, b.stage, JobDir(spec), p, remote)
}
