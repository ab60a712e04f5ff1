package bridge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
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

// tierState is the broker's bookkeeping for copies. b.mu guards it.
type tierState struct {
	pending   []string       // jobs with a recorded copy intent to submit (submitCopies)
	due       []string       // jobs with an active backup held until its latest start (dueBackups)
	downSince []time.Time    // per site: start of the current run of failed status calls
	lostAt    []time.Time    // per site: the last cycle a loss was reported (losses.go)
	orphans   []cancelReq    // cancels of copies at sites that did not answer; retried (retryOrphans)
	orphanTry time.Time      // when they were last tried
	bgBusy    bool           // a background retry runs
	bg        sync.WaitGroup // background retries (tests wait for them)
	buf       []policy.Job   // tierOrder's reordered queue
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
func (b *Broker) copiesFor(j *Job) bool {
	return b.opts.Tiers != nil && j.Resv == nil && (j.Tier == TierHigh || j.Tier == TierLow)
}

// hasCopies reports whether a live job's components are tier copies.
func (b *Broker) hasCopies(j *Job) bool {
	return slices.ContainsFunc(j.Comps, func(c Component) bool { return c.Role != "" })
}

// retries reports whether a failure of any kind (not only a lost job) is
// retried: the none tier's rule.
func (b *Broker) retries(j *Job) bool { return b.opts.Tiers != nil && j.Tier == TierNone }

// avoid records that an attempt failed at site. b.mu held.
func (b *Broker) avoid(j *Job, site string) {
	if b.opts.Tiers != nil && !slices.Contains(j.Avoid, site) {
		j.Avoid = append(j.Avoid, site)
	}
}

// avoiding narrows a job's allowed sites (nil: all) by Job.Avoid, unless
// that would leave none. b.mu held.
func (b *Broker) avoiding(j *Job, allowed []int) []int {
	var out []int
	for s := range b.sites {
		if (allowed == nil || slices.Contains(allowed, s)) && !slices.Contains(j.Avoid, b.sites[s].Name) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return allowed
	}
	return out
}

// placeCopies chooses the copies' placements: copy 0 is the planner's
// choice — or, with a Reliability model and a job that fits one site, the
// least-RC site with room — and copy 1 the best other site big enough for
// the whole job: one with the nodes free now first, then least RC when a
// model is set, then earliest predicted end, then configuration order
// (deterministic); else a disjoint placement the planner beat. nil second:
// no other placement can hold the job. b.mu held, inside a cycle.
func (b *Broker) placeCopies(j *Job, d policy.Decision) (first, second []policy.Part) {
	pj := b.policyJob(j)
	in := &policy.CopyInput{Snapshot: &b.snap, Job: &pj, Decision: d}
	if r := b.opts.Tiers.Reliability; r != nil {
		in.RC = make([]float64, len(b.snap.Sites))
		for s := range in.RC {
			parts := []policy.Part{{Site: s, Nodes: pj.Width}}
			in.RC[s] = r.RC(b.snap.Sites[s].Name, b.snap.Runtime(&pj, parts)+b.snap.Transfer(&pj, parts))
		}
	}
	return b.tiering().Copies(in)
}

// backupMode decides whether a low job's backup is active or passive
// (submitted only if the primary fails), and says why. An active backup
// is submitted as late as the rule allows: at due, its latest start (now
// when that has passed). b.mu held, inside a cycle.
func (b *Broker) backupMode(j *Job, now time.Time, primary policy.Option, backup []policy.Part) (passive bool, due time.Time, why string) {
	pj := b.policyJob(j)
	bk := b.tiering().Backup(&policy.BackupInput{Snapshot: &b.snap, Job: &pj, Now: now, Primary: primary, Backup: backup})
	return bk.Passive, bk.Due, bk.Why
}

// dispatchCopies starts a high or low job: it records every copy as a
// write-ahead intent, then submits the copies that start now. b.mu held on
// entry, released on return.
func (b *Broker) dispatchCopies(ctx context.Context, now time.Time, j *Job, d policy.Decision, rep *CycleReport) {
	names := b.names
	first, second := b.placeCopies(j, d)
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
		passive, due, why := b.backupMode(j, now, d.Chosen, second)
		if !passive && due.After(now) {
			passive = true // held until due (dueBackups)
			b.tiers.due = append(b.tiers.due, j.ID)
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
	b.addEvent(j, now, "dispatch", "", msg)
	j.State, j.Intent = Submitting, now // Intent: SubmitGrace after a restart (recover.go)
	if err := b.persist(ctx, j); err != nil {
		j.State, j.Comps, j.Attempts = Queued, nil, j.Attempts-1
		b.mu.Unlock()
		rep.Errors = append(rep.Errors, fmt.Errorf("job %s: recording the dispatch intent: %w", j.ID, err))
		return
	}
	specs := b.copySpecs(j, d.Chosen)
	b.mu.Unlock()

	ids, errs := b.submitSpecs(ctx, j.Comps, specs, j.Req.SiteInputs)

	b.mu.Lock()
	undo := b.applySubmits(ctx, now, j, ids, errs)
	if !slices.ContainsFunc(j.Comps, func(c Component) bool { return c.RemoteID != "" || c.Passive }) {
		// No copy reached a site and none is waiting: as for a single job.
		first := firstErr(errs)
		j.Comps = nil
		if backends.Retryable(first) && j.Attempts < b.opts.MaxAttempts {
			j.State = Queued
			b.addEvent(j, now, "retry-later", "", fmt.Sprintf("submission failed (%v); stays queued", first))
		} else {
			why := fmt.Sprintf("submission failed: %v", first)
			j.State, j.Reason, j.End = Failed, why, now
			b.addEvent(j, now, "failed", "", why)
			b.dequeue(j.ID)
		}
		_ = b.persist(ctx, j)
		rep.Errors = append(rep.Errors, fmt.Errorf("job %s: %w", j.ID, first))
		b.mu.Unlock()
		b.doCancels(ctx, now, undo)
		return
	}
	j.State = Dispatched
	b.dequeue(j.ID)
	b.live = append(b.live, j.ID)
	if j.Tier == TierHigh {
		rep.Replicated++
	} else {
		rep.Started++
	}
	var crep CycleReport
	undo = append(undo, b.trackCopies(ctx, j, now, &crep)...) // a failed primary activates its backup
	b.compactLive()
	b.mu.Unlock()
	b.doCancels(ctx, now, undo)
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
// placement, under its own tag. b.mu held.
func (b *Broker) copySpecs(j *Job, chosen policy.Option) []*backends.JobSpec {
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
			parts = append(parts, policy.Part{Site: b.siteIdx[j.Comps[k].Site], Nodes: j.Comps[k].Nodes})
		}
		opt := chosen
		if b.snap.Sites != nil {
			pj := b.policyJob(j)
			opt.Parts = parts
			opt.Runtime = b.snap.Runtime(&pj, parts)
			opt.Transfer = b.snap.Transfer(&pj, parts)
		} else {
			opt = policy.Option{}
		}
		for n, k := range idx {
			c := &j.Comps[k]
			if c.Passive || c.RemoteID != "" || c.State.Final() {
				continue
			}
			sp := b.spec(j, n, len(idx), c.Site, c.Nodes, opt)
			sp.GridID = c.Tag
			specs[k] = sp
		}
	}
	return specs
}

// submitSpecs submits the non-nil specs, outside b.mu.
func (b *Broker) submitSpecs(ctx context.Context, comps []Component, specs []*backends.JobSpec, ins []backends.SiteFile) ([]backends.JobID, []error) {
	ids := make([]backends.JobID, len(specs))
	errs := make([]error, len(specs))
	var data relays // sitedata.go: inputs that lie at a site
	defer data.close()
	for k, sp := range specs {
		if sp == nil {
			continue
		}
		s := b.siteIdx[comps[k].Site]
		if _, errs[k] = b.stageData(ctx, &data, s, sp, ins); errs[k] != nil {
			continue
		}
		ids[k], errs[k] = b.sites[s].Backend.Submit(ctx, sp)
		b.markStale(s)
	}
	return ids, errs
}

// applySubmits records submission outcomes in the job's components: a
// copy with a part that could not be submitted fails as a whole, and its
// parts that were submitted are returned to cancel. b.mu held.
func (b *Broker) applySubmits(ctx context.Context, now time.Time, j *Job, ids []backends.JobID, errs []error) []cancelReq {
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
			b.addEvent(j, now, "submit-failed", c.Site, errs[k].Error())
		case ids[k] != "":
			c.RemoteID, c.State = ids[k], backends.StatePending
			b.where[compKey{b.siteIdx[c.Site], c.RemoteID}] = j.ID
			b.addEvent(j, now, "submitted-remote", c.Site, fmt.Sprintf("%s copy %d: remote job %s (%d node(s)), tag %s", c.Role, c.Copy, c.RemoteID, c.Nodes, c.Tag))
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
	_ = b.persist(ctx, j)
	return undo
}

// copyState summarises one copy's components.
type copyState struct {
	has                   bool // the copy still has components
	n                     int
	done, failed, running bool
	passive, intent       bool
	site, reason          string
	exit                  int
}

func copyStates(j *Job) []copyState {
	var out []copyState
	for _, c := range j.Comps {
		for len(out) <= c.Copy {
			out = append(out, copyState{n: len(out), done: true, running: true})
		}
		s := &out[c.Copy]
		s.has = true
		if s.site == "" {
			s.site = c.Site
		} else if !strings.Contains(s.site, c.Site) {
			s.site += "+" + c.Site
		}
		s.done = s.done && c.State == backends.StateCompleted
		s.running = s.running && (c.State == backends.StateRunning || c.State == backends.StateCompleted)
		s.passive = s.passive || c.Passive
		s.intent = s.intent || (!c.Passive && c.RemoteID == "" && !c.State.Final())
		if c.State.Final() && c.State != backends.StateCompleted && !s.failed {
			s.failed = true
			s.reason = fmt.Sprintf("ended %s", c.State)
			if c.State == backends.StateFailed && c.RemoteID != "" {
				s.reason += fmt.Sprintf(" with exit code %d", c.ExitCode)
			}
			if c.Reason != "" {
				s.reason += " (" + c.Reason + ")"
			}
			s.exit = c.ExitCode
		}
	}
	return out
}

// trackCopies folds the copies' states into the job (see the top of this
// file). It returns the remote cancels to issue. b.mu held.
func (b *Broker) trackCopies(ctx context.Context, j *Job, now time.Time, rep *CycleReport) []cancelReq {
	var cancels []cancelReq
	cs := copyStates(j)
	win := -1
	for _, s := range cs {
		if s.has && s.done && !s.passive {
			win = s.n
			break
		}
	}
	if win >= 0 {
		live := false
		for k := range j.Comps {
			c := &j.Comps[k]
			if c.Copy == win || c.State.Final() {
				continue
			}
			switch {
			case c.Passive || c.RemoteID == "":
				// Never submitted: it never will be.
				c.State, c.Reason, c.End = backends.StateCancelled, fmt.Sprintf("not submitted: copy %d succeeded", win), now
			default:
				live = true
				cancels = append(cancels, cancelReq{j.ID, c.Site, c.RemoteID,
					fmt.Sprintf("%s copy %d withdrawn: copy %d at %s succeeded first", c.Role, c.Copy, win, cs[win].site)})
			}
		}
		if live {
			if !j.won {
				j.won = true
				b.addEvent(j, now, "copy-won", cs[win].site, fmt.Sprintf("copy %d at %s succeeded first; withdrawing the others", win, cs[win].site))
			}
			_ = b.persist(ctx, j)
			return cancels
		}
		var keep []Component
		for _, c := range j.Comps {
			if c.Copy == win {
				keep = append(keep, c)
			} else {
				delete(b.where, compKey{b.siteIdx[c.Site], c.RemoteID})
				j.Withdrawn = append(j.Withdrawn, c)
			}
		}
		j.Comps = keep
		f := outcome{state: Completed, kind: "completed",
			msg: fmt.Sprintf("copy %d at %s succeeded (tier %s); no other copy runs", win, cs[win].site, j.Tier)}
		f.start, f.end = latest(j.Comps, now)
		f.start, f.end = clampTimes(j.Submit, f.start, f.end)
		b.finish(j, f, now)
		rep.Ended++
		_ = b.persist(ctx, j)
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
			delete(b.where, compKey{b.siteIdx[c.Site], c.RemoteID})
			j.Withdrawn = append(j.Withdrawn, c)
			b.avoid(j, c.Site)
		}
		j.Comps = keep
		what := fmt.Sprintf("copy %d at %s %s", s.n, s.site, s.reason)
		if slices.ContainsFunc(j.Comps, func(c Component) bool { return c.Passive }) {
			for k := range j.Comps {
				j.Comps[k].Passive = false
			}
			b.tiers.pending = append(b.tiers.pending, j.ID)
			b.addEvent(j, now, "backup-activated", s.site, what+"; the passive backup is submitted now")
		} else if len(j.Comps) > 0 {
			b.addEvent(j, now, "copy-failed", s.site, what+"; the other copy goes on")
		}
	}
	if len(j.Comps) == 0 {
		reason := fmt.Sprintf("every copy failed; last: copy %d at %s %s", last.n, last.site, last.reason)
		if j.Attempts < b.opts.MaxAttempts {
			b.requeueAs(j, now, "requeued", fmt.Sprintf("attempt %d: %s; queued again", j.Attempts, reason))
		} else {
			b.finish(j, outcome{state: Failed, reason: reason, exit: last.exit, start: j.Start, end: now,
				kind: "failed", site: last.site, msg: reason}, now)
			rep.Ended++
		}
		_ = b.persist(ctx, j)
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
			j.State = Running
			j.Start, _ = latest(comps, now)
			j.Start, _ = clampTimes(j.Submit, j.Start, j.Start)
			b.addEvent(j, now, "running", "", fmt.Sprintf("copy %d running on %s", s.n, s.site))
			break
		}
	}
	_ = b.persist(ctx, j)
	return cancels
}

// submitCopies submits the copies whose intent is recorded but which were
// not submitted yet: activated backups, and copies a restart found
// missing. Called every cycle after the poll.
func (b *Broker) submitCopies(ctx context.Context, now time.Time, rep *CycleReport) {
	b.mu.Lock()
	b.retryOrphans(ctx, now)
	b.dueBackups(ctx, now)
	ids := b.tiers.pending
	b.tiers.pending = nil
	for _, id := range ids {
		j := b.jobs[id]
		if j == nil || (j.State != Dispatched && j.State != Running) {
			continue
		}
		specs := b.copySpecs(j, j.Predicted)
		if !slices.ContainsFunc(specs, func(s *backends.JobSpec) bool { return s != nil }) {
			continue
		}
		comps := slices.Clone(j.Comps)
		j.Intent = now // a restart gives these submissions SubmitGrace to land (recover.go)
		_ = b.persist(ctx, j)
		b.mu.Unlock()
		rids, errs := b.submitSpecs(ctx, comps, specs, j.Req.SiteInputs)
		b.mu.Lock()
		if len(j.Comps) != len(comps) || (j.State != Dispatched && j.State != Running) {
			// Changed meanwhile (a cancel by the user): withdraw what was submitted.
			var undo []cancelReq
			for k, rid := range rids {
				if rid != "" {
					undo = append(undo, cancelReq{j.ID, comps[k].Site, rid, "the job changed while its copy was submitted"})
				}
			}
			b.mu.Unlock()
			b.doCancels(ctx, now, undo)
			b.mu.Lock()
			continue
		}
		undo := b.applySubmits(ctx, now, j, rids, errs)
		for _, e := range errs {
			if e != nil {
				rep.Errors = append(rep.Errors, fmt.Errorf("job %s: %w", j.ID, e))
			}
		}
		var crep CycleReport
		undo = append(undo, b.trackCopies(ctx, j, now, &crep)...)
		b.compactLive()
		b.mu.Unlock()
		b.doCancels(ctx, now, undo)
		b.mu.Lock()
	}
	b.mu.Unlock()
}

// retryAfter queues a job again after attempt failure c: a lost job as
// before, any other failure of the none tier as a retry avoiding the site.
// b.mu held.
func (b *Broker) retryAfter(j *Job, c Component, now time.Time, reason string) {
	b.avoid(j, c.Site)
	if c.State == backends.StateLost {
		b.requeue(j, now, reason)
		return
	}
	b.requeueAs(j, now, "retry", fmt.Sprintf("attempt %d failed: %s; tier none: queued again, avoiding %s while another site can take it",
		j.Attempts, reason, strings.Join(j.Avoid, ", ")))
}

// dueBackups makes the active backups whose latest start has come intents
// to submit now (recorded first). b.mu held.
func (b *Broker) dueBackups(ctx context.Context, now time.Time) {
	if len(b.tiers.due) == 0 {
		return
	}
	keep := b.tiers.due[:0]
	for _, id := range b.tiers.due {
		j := b.jobs[id]
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
			b.addEvent(j, now, "backup-due", "", "the backup's latest start has come: it is submitted now, beside the primary")
			_ = b.persist(ctx, j)
			b.tiers.pending = append(b.tiers.pending, id)
		}
		if waiting {
			keep = append(keep, id)
		}
	}
	b.tiers.due = keep
}
