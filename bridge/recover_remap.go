package bridge

import (
	"context"
	"fmt"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// recoverMove resolves a move a restart found under way (remap.go). It
// reports whether it took the job (Recover skips it then) and returns the
// remote cancels to issue once the ledger's lock is released. The ledger's lock held, in Recover.
func (rm *remapper) recoverMove(ctx context.Context, j *Job, now time.Time, rep *RecoverReport) (bool, []cancelReq) {
	mv := j.Moving
	switch {
	case mv.Phase == MoveWithdraw && j.State == Dispatched:
		// Nothing can be at the target yet: its intent is written only
		// after the old site confirmed the withdrawal. The withdrawal is
		// redone (idempotent) by the next cycle before anything else:
		// still waiting → withdrawn now; started → it stays; gone → the
		// new attempt is submitted. Not indexed meanwhile: a poll must not
		// read a withdrawn component as a failure.
		rm.live = append(rm.live, j.ID)
		rm.moving = append(rm.moving, j.ID)
		rm.record(ctx, j, now, "reconcile", "", fmt.Sprintf("after a restart: attempt %d was being withdrawn from %s to move it to %s; the withdrawal is checked (and redone) before anything is submitted",
			mv.FromAttempt, compsString(mv.From), compsString(mv.To)))
		rep.Live++
		return true, nil
	case mv.Phase == MoveSubmit && j.State == Submitting:
		// The old attempt was confirmed gone before this intent was
		// written. Asked once more all the same: a job in two queues is
		// the outcome never allowed.
		there, sts := rm.oldStillThere(ctx, rm.identityOwner(j), mv.From)
		if !there {
			j.Moving = nil // an ordinary dispatch intent now: reconcile (Recover) adopts or requeues it
			return false, nil
		}
		var cancels []cancelReq
		tag := RemoteTag(j.ID, j.Attempts)
		for _, c := range j.Comps {
			be, err := rm.backendFor(ctx, rm.siteIdx[c.Site], rm.identityOwner(j))
			if err != nil {
				rep.Errors = append(rep.Errors, fmt.Errorf("job %s at %s: looking up %s: %w", j.ID, c.Site, tag, err))
				continue
			}
			f, ok := backends.AsFinder(be)
			if !ok {
				continue
			}
			found, err := f.FindByGridID(ctx, tag)
			if err != nil {
				rep.Errors = append(rep.Errors, fmt.Errorf("job %s at %s: looking up %s: %w", j.ID, c.Site, tag, err))
				continue
			}
			for _, st := range found {
				if !st.State.Final() {
					cancels = append(cancels, cancelReq{j.ID, c.Site, st.ID, "the move found the job still at its old site: the newer copy is withdrawn"})
					rep.DuplicatesCancelled++
				}
			}
		}
		j.Comps = mv.From
		for k := range j.Comps {
			j.Comps[k].State, j.Comps[k].Reason = sts[k].State, sts[k].Reason
			j.Comps[k].Start = sts[k].Start
		}
		j.Attempts, j.State, j.Moving = mv.FromAttempt, Dispatched, nil
		j.Moves--
		rm.adopt(j)
		rm.record(ctx, j, now, "reconciled", "", fmt.Sprintf("after a restart: attempt %d is still at %s; the move to %s is undone (attempt %d cancelled wherever it landed)",
			mv.FromAttempt, j.Sites(), compsString(mv.To), mv.FromAttempt+1))
		rep.Live++
		return true, cancels
	default:
		// Settled before the crash (dispatched, queued again, failed);
		// only the flag was left.
		j.Moving = nil
		return false, nil
	}
}

// oldStillThere asks the old sites about a moved job's withdrawn
// components: true when one of them is not cancelled or gone (with the
// statuses, in order). A site that does not answer counts as confirmed:
// the withdrawal was confirmed before the move went on.
func (rm *remapper) oldStillThere(ctx context.Context, owner string, from []Component) (bool, []backends.JobStatus) {
	sts := make([]backends.JobStatus, len(from))
	there := false
	for k, c := range from {
		s := rm.siteIdx[c.Site]
		be, err := rm.backendFor(ctx, s, owner)
		var got []backends.JobStatus
		if err == nil {
			got, err = be.Status(ctx, []backends.JobID{c.RemoteID})
		}
		if err != nil || len(got) != 1 {
			sts[k] = backends.JobStatus{ID: c.RemoteID, State: backends.StateCancelled}
			continue
		}
		sts[k] = got[0]
		if st := got[0].State; st != backends.StateCancelled && st != backends.StateLost {
			there = true
		}
	}
	return there, sts
}
