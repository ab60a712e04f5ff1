package backends

import (
	"context"
	"errors"
)

// ErrStarted: a job could not be withdrawn from its site's queue because it
// had already started (or ended); it was left alone. Withdrawer returns it.
var ErrStarted = errors.New("job already started")

// Withdrawer is an optional capability: take a job that has not started out
// of the site's queue, and never stop one that has.
//
// Contract: Withdraw is idempotent. It returns nil once the site confirms
// the job is gone without having run (withdrawn now, withdrawn or
// cancelled earlier while it waited, or unknown to the site); an error
// wrapping ErrStarted when the job had started (or ended) first — it is
// left running; any other error when the outcome is not known (the site
// did not answer, or still lists the job as waiting): call again. The
// job is first made unable to start (SLURM: `scontrol uhold`), then its
// state is read, and only a job still waiting is removed; a started one is
// released and left alone, so a job that starts meanwhile is never killed.
//
// A backend behind a plugin boundary (a Declarer) is never treated as a
// Withdrawer: the capability does not cross it.
type Withdrawer interface {
	Withdraw(ctx context.Context, id JobID) error
}

// AsWithdrawer returns b as a Withdrawer when it has that capability.
func AsWithdrawer(b Backend) (Withdrawer, bool) {
	if _, decl := b.(Declarer); decl {
		return nil, false
	}
	w, ok := b.(Withdrawer)
	return w, ok
}
