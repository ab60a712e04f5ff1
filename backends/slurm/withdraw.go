package slurm

import (
	"context"
	"fmt"
	"strings"

	"github.com/gridsub/gridsub/backends"
)

var _ backends.Withdrawer = (*Backend)(nil)

// HoldArgv puts a user hold on job id (`uhold`: one the user can release,
// even when the login user is a SLURM operator). A held pending job cannot
// start. The hold does not say whether the job had already started —
// SLURM 22.05 holds a running job too (it only zeroes its priority) — so a
// withdrawal holds first and then reads the job's state: pending means it
// is held and can no longer start, and only then is it cancelled; running
// or ended means it started, and the hold is released. This is why
// `scancel --state=PENDING` is not used: 22.05's scancel lists the jobs,
// filters them by state in the client and then cancels, so a job starting
// in between would be killed.
func HoldArgv(id backends.JobID) []string {
	return []string{"scontrol", "uhold", string(id)}
}

// ReleaseArgv releases the hold HoldArgv put on a job found started.
func ReleaseArgv(id backends.JobID) []string {
	return []string{"scontrol", "release", string(id)}
}

// WithdrawArgv cancels job id once HoldArgv has held it and it was found
// still pending.
func WithdrawArgv(id backends.JobID) []string {
	return []string{"scancel", string(id)}
}

// Withdraw implements backends.Withdrawer: `scontrol uhold`, one Status
// call, and then either `scancel` of the held job (it was pending: held, it
// cannot start) and one more Status, or — it had started — `scontrol
// release` and ErrStarted: a started job is never cancelled. A held job
// whose scancel did not answer stays held, so it cannot start, and the
// next call finishes the withdrawal.
func (b *Backend) Withdraw(ctx context.Context, id backends.JobID) error {
	if !validJobID(string(id)) {
		return fmt.Errorf("%w: %q is not a SLURM job id", backends.ErrUnknownJob, id)
	}
	// Its status reads must answer now, whatever the poll schedule says.
	ctx = backends.OnDemand(ctx)
	x := b.Exec()
	argv := HoldArgv(id)
	r, err := x.Run(ctx, argv, nil)
	if err != nil {
		return err
	}
	held := r.ExitCode == 0
	if !held && !notPending(Message(r)) {
		return x.Fail(argv, r)
	}
	sts, err := b.Status(ctx, []backends.JobID{id})
	if err != nil {
		return err
	}
	switch st := sts[0]; st.State {
	case backends.StatePending:
		if !held {
			return fmt.Errorf("%w: job %s at %s is pending but could not be held: %s", backends.ErrUnavailable, id, x.Site, Message(r))
		}
	case backends.StateCancelled, backends.StateLost:
		return withdrawn(x.Site, st)
	default: // it started (or the site cannot say): leave it alone
		if held {
			argv = ReleaseArgv(id)
			if r, err := x.Run(ctx, argv, nil); err == nil && r.ExitCode != 0 && !notPending(Message(r)) {
				x.Log.Warn("releasing the hold of a job found started failed", "job", string(id), "err", Message(r))
			}
		}
		return withdrawn(x.Site, st)
	}
	argv = WithdrawArgv(id)
	if r, err = x.Run(ctx, argv, nil); err != nil {
		return err
	}
	if r.ExitCode != 0 && !notPending(Message(r)) {
		return x.Fail(argv, r)
	}
	if sts, err = b.Status(ctx, []backends.JobID{id}); err != nil {
		return err
	}
	return withdrawn(x.Site, sts[0])
}

// notPending reports scontrol's and scancel's words for a job that is no
// longer waiting (started, ended, or unknown to the controller): the
// status then says which.
func notPending(msg string) bool {
	for _, s := range []string{"no longer pending", "Invalid job id", "already completing or completed", "Job has already finished"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
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
		return fmt.Errorf("%w: job %s at %s is still listed as %s after its hold and scancel", backends.ErrUnavailable, st.ID, site, st.State)
	default:
		return fmt.Errorf("%w: job %s at %s is %s", backends.ErrStarted, st.ID, site, st.State)
	}
}
