package bridge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// Copies of QoS-tiered jobs (SPEC.md §5), in the broker:
//
//   - high: replication. Copy 0 and copy 1 are submitted at once on two
//     disjoint placements; the first copy to SUCCEED wins, the others are
//     cancelled at once, and the job ends only once they are gone — so a
//     broker restarted in between cancels them again. Only the winner's
//     components stay in Job.Comps (the losers move to Job.Withdrawn), so
//     only the winner's outputs are fetched.
//   - low: primary–backup. The backup (copy 1) on another site is active
//     when its latest start — deadline minus its predicted run — is not
//     after the primary's expected end: it is then submitted at that latest
//     start (Component.Due), as late as the rule allows. Otherwise it is
//     passive: recorded, submitted only if the primary fails. It is
//     cancelled (or never submitted) when the primary succeeds.
//   - none: one copy; after a failure the job is queued again within
//     Options.MaxAttempts, and the next placement avoids the sites where it
//     failed (Job.Avoid) while another can take it.
//
// Every copy carries its own remote tag (copy 0: RemoteTag, copy k:
// RemoteTag + "-ck") and so its own remote directory, and every submission
// is a write-ahead intent in the store (a component with its Tag and no
// RemoteID) before any site hears of it; Recover looks intents up by tag.

// copies runs the QoS-tier copies of jobs (see the top of this file):
// their placement, intents, submission, tracking and recovery. Its own
// bookkeeping is guarded by the ledger's lock.
type copies struct {
	part
	*duties                     // the cancel stage: losing and failed copies
	*submitter                  // the submit stage, and the inputs that lie at a site
	*tracker                    // how a job ends (finish) or is retried (retryAfter)
	snap       *policy.Snapshot // the cycle's snapshot

	toSubmit []string     // jobs with a recorded copy intent to submit (submitCopies)
	due      []string     // jobs with an active backup held until its latest start (dueBackups)
	buf      []policy.Job // tierOrder's reordered queue
}

// Roles of copy components.
const (
	RoleReplica = "replica" // a copy of a replicated (high) job
	RolePrimary = "primary" // the primary of a low job
	RoleBackup  = "backup"  // the backup of a low job
)

// CopyTag is the remote tag of copy k of attempt a of job id.
func CopyTag(id string, attempt, k int) string {
	if k == 0 {
		return RemoteTag(id, attempt)
	}
	return fmt.Sprintf("%s-c%d", RemoteTag(id, attempt), k)
}

// copiesFor reports whether a job about to be dispatched runs as copies.
func (cp *copies) copiesFor(j *Job) bool {
	return cp.opts.Tiers != nil && j.Resv == nil && (j.Tier == TierHigh || j.Tier == TierLow)
}

// hasCopies reports whether a live job's components are tier copies.
func hasCopies(j *Job) bool {
	return slices.ContainsFunc(j.Comps, func(c Component) bool { return c.Role != "" })
}

// retries reports whether a failure of any kind (not only a lost job) is
// retried: the none tier's rule.
func (cp *copies) retries(j *Job) bool {
	return cp.opts.Tiers != nil && j.Tier == TierNone && !j.Req.NoRetry
}

// avoid records that an attempt failed at site. The ledger's lock held.
func (cp *copies) avoid(j *Job, site string) {
	if cp.opts.Tiers != nil && !slices.Contains(j.Avoid, site) {
		j.Avoid = append(j.Avoid, site)
	}
}

// placeCopies chooses the copies' placements: copy 0 is the planner's
// choice — or, with a Reliability model and a job that fits one site, the
// least-RC site with room — and copy 1 the best other site big enough for
// the whole job: one with the nodes free now first, then least RC when a
// model is set, then earliest predicted end, then configuration order
// (deterministic); else a disjoint placement the planner beat. nil second:
// no other placement can hold the job. The ledger's lock held, inside a cycle.
func (cp *copies) placeCopies(j *Job, d policy.Decision) (first, second []policy.Part) {
	pj := cp.policyJob(j)
	in := &policy.CopyInput{Snapshot: cp.snap, Job: &pj, Decision: d}
	if r := cp.opts.Tiers.Reliability; r != nil {
		in.RC = make([]float64, len(cp.snap.Sites))
		for s := range in.RC {
			parts := []policy.Part{{Site: s, Nodes: pj.Width}}
			in.RC[s] = r.RC(cp.snap.Sites[s].Name, cp.snap.Runtime(&pj, parts)+cp.snap.Transfer(&pj, parts))
		}
	}
	return cp.opts.tiering().Copies(in)
}

// backupMode decides whether a low job's backup is active or passive
// (submitted only if the primary fails), and says why. An active backup
// is submitted as late as the rule allows: at due, its latest start (now
// when that has passed). The ledger's lock held, inside a cycle.
func (cp *copies) backupMode(j *Job, now time.Time, primary policy.Option, backup []policy.Part) (passive bool, due time.Time, why string) {
	pj := cp.policyJob(j)
	bk := cp.opts.tiering().Backup(&policy.BackupInput{Snapshot: cp.snap, Job: &pj, Now: now, Primary: primary, Backup: backup})
	return bk.Passive, bk.Due, bk.Why
}

// dispatchCopies starts a high or low job: it records every copy as a
// write-ahead intent, then submits the copies that start now. The ledger's lock held on
// entry, released on return.
func (cp *copies) dispatchCopies(ctx context.Context, now time.Time, j *Job, d policy.Decision, rep *CycleReport) {
	names := cp.names
	first, second := cp.placeCopies(j, d)
	j.Attempts++
	j.Predicted, j.Beaten, j.SiteNames = d.Chosen, d.Beaten, names
	roleA, roleB := RoleReplica, RoleReplica
	if j.Tier == TierLow {
		roleA, roleB = RolePrimary, RoleBackup
	}
	j.Comps = j.Comps[:0]
	for _, p := range first {
		j.Comps = append(j.Comps, Component{Site: names[p.Site], Nodes: p.Nodes, State: backends.StateUnknown, ExitCode: -1,
			Role: roleA, Tag: CopyTag(j.ID, j.Attempts, 0)})
	}
	var msg string
	switch {
	case second == nil:
		msg = fmt.Sprintf("attempt %d: %s copy at %s; no other site can hold the job, so it runs without a second copy",
			j.Attempts, roleA, partsString(names, first))
	case j.Tier == TierLow:
		passive, due, why := cp.backupMode(j, now, d.Chosen, second)
		if !passive && due.After(now) {
			passive = true // held until due (dueBackups)
			cp.due = append(cp.due, j.ID)
		} else {
			due = time.Time{}
		}
		for _, p := range second {
			j.Comps = append(j.Comps, Component{Site: names[p.Site], Nodes: p.Nodes, State: backends.StateUnknown, ExitCode: -1,
				Copy: 1, Role: roleB, Tag: CopyTag(j.ID, j.Attempts, 1), Passive: passive, Due: due})
		}
		msg = fmt.Sprintf("attempt %d: primary at %s, backup at %s (%s)", j.Attempts, partsString(names, first), partsString(names, second), why)
	default:
		for _, p := range second {
			j.Comps = append(j.Comps, Component{Site: names[p.Site], Nodes: p.Nodes, State: backends.StateUnknown, ExitCode: -1,
				Copy: 1, Role: roleB, Tag: CopyTag(j.ID, j.Attempts, 1)})
		}
		msg = fmt.Sprintf("attempt %d: replicating: copy 0 at %s, copy 1 at %s, both now; the first to succeed wins",
			j.Attempts, partsString(names, first), partsString(names, second))
	}
	cp.note(j, now, "dispatch", "", msg)
	j.State, j.Intent = Submitting, now // Intent: SubmitGrace after a restart (recover.go)
	if err := cp.save(ctx, j); err != nil {
		j.State, j.Comps, j.Attempts = Queued, nil, j.Attempts-1
		cp.mu.Unlock()
		rep.Errors = append(rep.Errors, fmt.Errorf("job %s: recording the dispatch intent: %w", j.ID, err))
		return
	}
	specs := cp.copySpecs(j, d.Chosen)
	cp.mu.Unlock()

	ids, errs := cp.submitSpecs(ctx, cp.identityOwner(j), j.Comps, specs, j.Req.SiteInputs)

	cp.mu.Lock()
	undo := cp.applySubmits(ctx, now, j, ids, errs)
	if !slices.ContainsFunc(j.Comps, func(c Component) bool { return c.RemoteID != "" || c.Passive }) {
		// No copy reached a site and none is waiting: as for a single job.
		first := firstErr(errs)
		j.Comps = nil
		if backends.Retryable(first) && j.Attempts < cp.opts.MaxAttempts {
			cp.transition(j, Queued, now, "retry-later", "", fmt.Sprintf("submission failed (%v); stays queued", first))
		} else {
			why := fmt.Sprintf("submission failed: %v", first)
			cp.endAs(j, now, Failed, "failed", "", why)
			cp.dequeue(j.ID)
		}
		_ = cp.save(ctx, j)
		rep.Errors = append(rep.Errors, fmt.Errorf("job %s: %w", j.ID, first))
		cp.mu.Unlock()
		cp.duties.doCancels(ctx, now, undo)
		return
	}
	cp.goLive(j)
	if j.Tier == TierHigh {
		rep.Replicated++
	} else {
		rep.Started++
	}
	var crep CycleReport
	undo = append(undo, cp.trackCopies(ctx, j, now, &crep)...) // a failed primary activates its backup
	cp.compactLive()
	cp.mu.Unlock()
	cp.duties.doCancels(ctx, now, undo)
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return fmt.Errorf("%w: no copy could be submitted", backends.ErrUnavailable)
}

// copySpecs builds the JobSpec of every component to submit now (nil for
// passive or already submitted ones): each copy runs alone on its own
// placement, under its own tag. The ledger's lock held.
func (cp *copies) copySpecs(j *Job, chosen policy.Option) []*backends.JobSpec {
	specs := make([]*backends.JobSpec, len(j.Comps))
	top := -1
	for _, c := range j.Comps {
		top = max(top, c.Copy)
	}
	for copyN := 0; copyN <= top; copyN++ {
		var idx []int
		for k, c := range j.Comps {
			if c.Copy == copyN {
				idx = append(idx, k)
			}
		}
		if len(idx) == 0 {
			continue
		}
		var parts []policy.Part
		for _, k := range idx {
			parts = append(parts, policy.Part{Site: cp.siteIdx[j.Comps[k].Site], Nodes: j.Comps[k].Nodes})
		}
		opt := chosen
		if cp.snap.Sites != nil {
			pj := cp.policyJob(j)
			opt.Parts = parts
			opt.Runtime = cp.snap.Runtime(&pj, parts)
			opt.Transfer = cp.snap.Transfer(&pj, parts)
		} else {
			opt = policy.Option{}
		}
		for n, k := range idx {
			c := &j.Comps[k]
			if c.Passive || c.RemoteID != "" || c.State.Final() {
				continue
			}
			sp := cp.spec(j, n, len(idx), c.Site, c.Nodes, opt)
			sp.GridID = c.Tag
			specs[k] = sp
		}
	}
	return specs
}

// submitSpecs stages the site inputs of the non-nil specs and hands them
// to the submit stage (submitAll), without the ledger's lock.
func (cp *copies) submitSpecs(ctx context.Context, owner string, comps []Component, specs []*backends.JobSpec, ins []backends.SiteFile) ([]backends.JobID, []error) {
	ids := make([]backends.JobID, len(specs))
	errs := make([]error, len(specs))
	var data relays // inputs that lie at a site
	defer data.close()
	var reqs []submitReq
	var at []int
	for k, sp := range specs {
		if sp == nil {
			continue
		}
		s := cp.siteIdx[comps[k].Site]
		if _, errs[k] = cp.stageData(ctx, &data, s, owner, sp, ins); errs[k] != nil {
			continue
		}
		reqs = append(reqs, submitReq{s, sp, owner})
		at = append(at, k)
	}
	rids, serrs := cp.submitAll(ctx, reqs)
	for i, k := range at {
		ids[k], errs[k] = rids[i], serrs[i]
	}
	return ids, errs
}

// applySubmits records submission outcomes in the job's components: a
// copy with a part that could not be submitted fails as a whole, and its
// parts that were submitted are returned to cancel. The ledger's lock held.
func (cp *copies) applySubmits(ctx context.Context, now time.Time, j *Job, ids []backends.JobID, errs []error) []cancelReq {
	failedCopy := map[int]bool{}
	for k := range j.Comps {
		if k >= len(ids) {
			break
		}
		c := &j.Comps[k]
		switch {
		case errs[k] != nil:
			c.State, c.Reason, c.End = backends.StateFailed, "submission failed: "+errs[k].Error(), now
			failedCopy[c.Copy] = true
			cp.note(j, now, "submit-failed", c.Site, errs[k].Error())
		case ids[k] != "":
			c.RemoteID, c.State = ids[k], backends.StatePending
			cp.index(j.ID, *c)
			cp.note(j, now, "submitted-remote", c.Site, fmt.Sprintf("%s copy %d: remote job %s (%d node(s)), tag %s", c.Role, c.Copy, c.RemoteID, c.Nodes, c.Tag))
		}
	}
	var undo []cancelReq
	for k := range j.Comps {
		c := &j.Comps[k]
		if failedCopy[c.Copy] && c.RemoteID != "" && !c.State.Final() {
			undo = append(undo, cancelReq{j.ID, c.Site, c.RemoteID, "another part of its copy could not be submitted"})
			c.State, c.End = backends.StateCancelled, now
		}
	}
	_ = cp.save(ctx, j)
	return undo
}

// trackCopies folds the copies' states into the job (see the top of this
// file): the first copy to succeed wins (winner, firstToSucceed). It
// returns the remote cancels to issue. The ledger's lock held.
func (cp *copies) trackCopies(ctx context.Context, j *Job, now time.Time, rep *CycleReport) []cancelReq {
	var cancels []cancelReq
	cs := copyStates(j)
	win := winner(cs, firstToSucceed)
	if win >= 0 {
		var live bool
		cancels, live = withdrawLosers(j, win, now, func(c Component) string {
			return fmt.Sprintf("%s copy %d withdrawn: copy %d at %s succeeded first", c.Role, c.Copy, win, cs[win].site)
		})
		if live {
			if !j.won {
				j.won = true
				cp.note(j, now, "copy-won", cs[win].site, fmt.Sprintf("copy %d at %s succeeded first; withdrawing the others", win, cs[win].site))
			}
			_ = cp.save(ctx, j)
			return cancels
		}
		var keep []Component
		for _, c := range j.Comps {
			if c.Copy == win {
				keep = append(keep, c)
			} else {
				cp.forget(c)
				j.Withdrawn = append(j.Withdrawn, c)
			}
		}
		j.Comps = keep
		f := outcome{state: Completed, kind: "completed",
			msg: fmt.Sprintf("copy %d at %s succeeded (tier %s); no other copy runs", win, cs[win].site, j.Tier)}
		f.start, f.end = latest(j.Comps, now)
		f.start, f.end = clampTimes(j.Submit, f.start, f.end)
		cp.finish(j, f, now)
		rep.Ended++
		_ = cp.save(ctx, j)
		return nil
	}

	// No winner yet. A failed copy leaves: its other parts are cancelled
	// and it moves to Withdrawn; a failed primary activates a passive backup.
	var last copyState
	for _, s := range cs {
		if !s.has || !s.failed {
			continue
		}
		last = s
		var keep []Component
		for _, c := range j.Comps {
			if c.Copy != s.n {
				keep = append(keep, c)
				continue
			}
			if !c.State.Final() && c.RemoteID != "" {
				cancels = append(cancels, cancelReq{j.ID, c.Site, c.RemoteID, fmt.Sprintf("another part of copy %d failed", s.n)})
			}
			cp.forget(c)
			j.Withdrawn = append(j.Withdrawn, c)
			cp.avoid(j, c.Site)
		}
		j.Comps = keep
		what := fmt.Sprintf("copy %d at %s %s", s.n, s.site, s.reason)
		if slices.ContainsFunc(j.Comps, func(c Component) bool { return c.Passive }) {
			for k := range j.Comps {
				j.Comps[k].Passive = false
			}
			cp.toSubmit = append(cp.toSubmit, j.ID)
			cp.note(j, now, "backup-activated", s.site, what+"; the passive backup is submitted now")
		} else if len(j.Comps) > 0 {
			cp.note(j, now, "copy-failed", s.site, what+"; the other copy goes on")
		}
	}
	if len(j.Comps) == 0 {
		reason := fmt.Sprintf("every copy failed; last: copy %d at %s %s", last.n, last.site, last.reason)
		if j.Attempts < cp.opts.MaxAttempts {
			cp.requeueAs(j, now, "requeued", fmt.Sprintf("attempt %d: %s; queued again", j.Attempts, reason))
		} else {
			cp.finish(j, outcome{state: Failed, reason: reason, exit: last.exit, start: j.Start, end: now,
				kind: "failed", site: last.site, msg: reason}, now)
			rep.Ended++
		}
		_ = cp.save(ctx, j)
		return cancels
	}
	for _, s := range copyStates(j) {
		if s.has && s.running && !s.passive && !s.intent && j.State != Running {
			var comps []Component
			for _, c := range j.Comps {
				if c.Copy == s.n {
					comps = append(comps, c)
				}
			}
			j.Start, _ = latest(comps, now)
			j.Start, _ = clampTimes(j.Submit, j.Start, j.Start)
			cp.transition(j, Running, now, "running", "", fmt.Sprintf("copy %d running on %s", s.n, s.site))
			break
		}
	}
	_ = cp.save(ctx, j)
	return cancels
}

// submitCopies submits the copies whose intent is recorded but which were
// not submitted yet: activated backups, and copies a restart found
// missing. Called every cycle after the poll.
func (cp *copies) submitCopies(ctx context.Context, now time.Time, rep *CycleReport) {
	cp.mu.Lock()
	cp.duties.retryOrphans(ctx, now)
	cp.dueBackups(ctx, now)
	ids := cp.toSubmit
	cp.toSubmit = nil
	for _, id := range ids {
		j := cp.jobs[id]
		if j == nil || (j.State != Dispatched && j.State != Running) {
			continue
		}
		specs := cp.copySpecs(j, j.Predicted)
		if !slices.ContainsFunc(specs, func(s *backends.JobSpec) bool { return s != nil }) {
			continue
		}
		comps := slices.Clone(j.Comps)
		j.Intent = now // a restart gives these submissions SubmitGrace to land (recover.go)
		_ = cp.save(ctx, j)
		cp.mu.Unlock()
		rids, errs := cp.submitSpecs(ctx, cp.identityOwner(j), comps, specs, j.Req.SiteInputs)
		cp.mu.Lock()
		if len(j.Comps) != len(comps) || (j.State != Dispatched && j.State != Running) {
			// Changed meanwhile (a cancel by the user): withdraw what was submitted.
			var undo []cancelReq
			for k, rid := range rids {
				if rid != "" {
					undo = append(undo, cancelReq{j.ID, comps[k].Site, rid, "the job changed while its copy was submitted"})
				}
			}
			cp.mu.Unlock()
			cp.duties.doCancels(ctx, now, undo)
			cp.mu.Lock()
			continue
		}
		undo := cp.applySubmits(ctx, now, j, rids, errs)
		for _, e := range errs {
			if e != nil {
				rep.Errors = append(rep.Errors, fmt.Errorf("job %s: %w", j.ID, e))
			}
		}
		var crep CycleReport
		undo = append(undo, cp.trackCopies(ctx, j, now, &crep)...)
		cp.compactLive()
		cp.mu.Unlock()
		cp.duties.doCancels(ctx, now, undo)
		cp.mu.Lock()
	}
	cp.mu.Unlock()
}

// retryAfter queues a job again after attempt failure c: a lost job as
// before, any other failure of the none tier as a retry avoiding the site.
// The ledger's lock held.
func (tk *tracker) retryAfter(j *Job, c Component, now time.Time, reason string) {
	tk.avoid(j, c.Site)
	if c.State == backends.StateLost {
		tk.requeue(j, now, reason)
		return
	}
	tk.requeueAs(j, now, "retry", fmt.Sprintf("attempt %d failed: %s; tier none: queued again, avoiding %s while another site can take it",
		j.Attempts, reason, strings.Join(j.Avoid, ", ")))
}

// dueBackups makes the active backups whose latest start has come intents
// to submit now (recorded first). The ledger's lock held.
func (cp *copies) dueBackups(ctx context.Context, now time.Time) {
	if len(cp.due) == 0 {
		return
	}
	keep := cp.due[:0]
	for _, id := range cp.due {
		j := cp.jobs[id]
		if j == nil || (j.State != Dispatched && j.State != Running) {
			continue
		}
		waiting, fired := false, false
		for k := range j.Comps {
			c := &j.Comps[k]
			if !c.Passive || c.Due.IsZero() {
				continue
			}
			if now.Before(c.Due) {
				waiting = true
				continue
			}
			c.Passive, fired = false, true
		}
		if fired {
			cp.record(ctx, j, now, "backup-due", "", "the backup's latest start has come: it is submitted now, beside the primary")
			cp.toSubmit = append(cp.toSubmit, id)
		}
		if waiting {
			keep = append(keep, id)
		}
	}
	cp.due = keep
}
