package pbs

import (
	"context"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/slurm"
)

var _ backends.LogReader = (*Backend)(nil)

// ReadLog implements backends.LogReader: gridsub.out and gridsub.err of
// the job directory, over SFTP. PBS spools a running job's output on the
// execution host and copies it into the job directory when the job ends,
// so a running job's streams read as empty until then.
func (b *Backend) ReadLog(ctx context.Context, id backends.JobID, spec *backends.JobSpec, stream string, offset int64, max int) ([]byte, int64, error) {
	return slurm.ReadJobLog(ctx, b.cfg.Name, b.stage, id, spec, stream, offset, max)
}
