package slurm

import (
	"context"
	"fmt"
	"strings"

	"github.com/gridsub/gridsub/backends"
)

var _ backends.Withdrawer = (*Backend)(nil)

// WithdrawArgv cancels job id only while it is pending: slurmctld checks
// the state and cancels under one lock, so a job that has started is
// never killed by it.
func WithdrawArgv(id backends.JobID) []string {
	return []string{"scancel", "--state=PENDING", string(id)}
}

// Withdraw implements backends.Withdrawer: one scancel restricted to
// pending jobs, then one Status call to learn what became of the job.
func (b *Backend) Withdraw(ctx context.Context, id backends.JobID) error {
	if !validJobID(string(id)) {
		return fmt.Errorf("%w: %q is not a SLURM job id", backends.ErrUnknownJob, id)
	}
	argv := WithdrawArgv(id)
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return err
	}
	if r.ExitCode != 0 {
		msg := Message(r)
		// A job the controller no longer knows: Status below says whether
		// it ran.
		if !strings.Contains(msg, "Invalid job id") && !strings.Contains(msg, "already completing or completed") {
			return b.commandErr(argv, r)
		}
	}
	sts, err := b.Status(ctx, []backends.JobID{id})
	if err != nil {
		return err
	}
	return withdrawn(b.cfg.Name, sts[0])
}

// withdrawn reads a job's status after a withdrawal.
func withdrawn(site string, st backends.JobStatus) error {
	switch st.State {
	case backends.StateCancelled:
		if !st.Start.IsZero() && !st.End.IsZero() && st.End.After(st.Start) {
			return fmt.Errorf("%w: job %s at %s ran from %s and was cancelled", backends.ErrStarted, st.ID, site,
				st.Start.UTC().Format("15:04:05"))
		}
		return nil
	case backends.StateLost:
		return nil // no record anywhere: it never ran (a job that ran leaves its exit-code file)
	case backends.StatePending, backends.StateUnknown:
		return fmt.Errorf("%w: job %s at %s is still listed as %s after scancel --state=PENDING", backends.ErrUnavailable, st.ID, site, st.State)
	default:
		return fmt.Errorf("%w: job %s at %s is %s", backends.ErrStarted, st.ID, site, st.State)
	}
}
