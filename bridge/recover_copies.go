package bridge

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// reconcileCopies settles a QoS-tiered job found Submitting after a
// restart: every copy intent is looked up by its own tag; a copy found is
// adopted, one that never reached its site is submitted again under the
// same tag by the next cycle (it was not there, so nothing runs twice), and
// a passive backup stays passive. Then the copies are tracked as usual, so
// a winner found is kept and the losers cancelled. The ledger's lock held.
func (rc *reconciler) reconcileCopies(ctx context.Context, j *Job, now time.Time, rep *RecoverReport) []cancelReq {
	ok, cancels := rc.lookupIntents(ctx, j, now, rep)
	if !ok {
		return cancels
	}
	j.State = Dispatched
	rc.addEvent(j, now, "reconciled", "", fmt.Sprintf("after a restart: attempt %d, copies %s", j.Attempts, j.Sites()))
	rc.adopt(j)
	rep.Live++
	var crep CycleReport
	return append(cancels, rc.trackCopies(ctx, j, now, &crep)...)
}

// lookupIntents resolves the copy intents of j (components with a tag and
// no remote id) at their sites. It reports false when a site could not be
// asked, or when a copy not found yet may still land (waitInFlight, within
// Options.SubmitGrace): the job is then held and looked up again every
// cycle, as a single job is. Past the grace a copy not found is submitted
// again under its tag. It returns the cancels of duplicates found under a
// tag, for the cancel stage. The ledger's lock held.
func (rc *reconciler) lookupIntents(ctx context.Context, j *Job, now time.Time, rep *RecoverReport) (bool, []cancelReq) {
	resubmit := false
	var cancels []cancelReq
	var missing []int // components whose tag the site does not know (yet)
	for k := range j.Comps {
		c := &j.Comps[k]
		if c.RemoteID != "" || c.Passive || c.State.Final() {
			continue
		}
		got, dups := rc.lookup(ctx, j, c, c.Tag, now, rep)
		cancels = append(cancels, dups...)
		switch got {
		case tagUnknowable:
			rc.addEvent(j, now, "reconcile", c.Site, "the site cannot look jobs up by tag; assuming copy "+fmt.Sprint(c.Copy)+" did not reach it")
			resubmit = true
			rep.NeverReached++
		case tagUnanswered:
			rc.unlive(j)
			rc.unresolved = append(rc.unresolved, j.ID)
			return false, cancels
		case tagMissing:
			missing = append(missing, k)
		case tagFound:
			if j.State != Submitting {
				rc.index(j.ID, *c)
			}
		}
	}
	if rc.duties.waitInFlight(ctx, j, now, len(missing), rep) { // the same grace as a single job's
		rc.unlive(j)
		return false, cancels
	}
	for _, k := range missing {
		resubmit = true
		rep.NeverReached++
		// Submitted again under the same tag: the watch cancels the
		// remote job under it that the copy does not own (duties.go).
		rc.duties.abandon(ctx, j, j.Comps[k], j.Comps[k].Tag, now)
	}
	if resubmit {
		rc.copies.toSubmit = append(rc.copies.toSubmit, j.ID)
	}
	if slices.ContainsFunc(j.Comps, func(c Component) bool { return c.Passive && !c.Due.IsZero() }) {
		rc.copies.due = append(rc.copies.due, j.ID)
	}
	_ = rc.persist(ctx, j)
	return true, cancels
}
