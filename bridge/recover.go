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

// RecoverReport says what Recover found.
type RecoverReport struct {
	Queued, Live          int // jobs back in the queue, and dispatched or running ones tracked again
	Adopted, NeverReached int // intended submissions found at their site, and ones that never got there
	Unresolved            int // submissions whose site could not be asked; retried every cycle
	Reserved              int // jobs waiting for their advance reservation, admitted again
	DuplicatesCancelled   int // extra remote jobs with the same tag, cancelled
	Errors                []error
}

// reconciler settles dispatch intents by their tags: at Recover, and at
// the start of a cycle for those whose sites could not be asked.
type reconciler struct {
	part
	*duties  // abandoned tags, and the grace for submissions in flight
	*tracker // folding what the sites said into the jobs
}

// Recover loads the unfinished jobs of the store into an empty broker after a
// restart and reconciles every dispatch intent with the sites: a submission
// whose remote job carries its tag is adopted, one that never reached the site
// goes back to the queue. So a crash at any instant neither loses a job nor
// submits it twice. Call it once, before the first Cycle.
func (b *Broker) Recover(ctx context.Context, now time.Time) (RecoverReport, error) {
	b.cycleMu.Lock()
	defer b.cycleMu.Unlock()
	defer b.flushEvents()
	var rep RecoverReport
	jobs, err := b.store.List(ctx, Filter{States: []JobState{Queued, Submitting, Dispatched, Running, Reserved, Held}, Events: true})
	if err != nil {
		return rep, fmt.Errorf("recover: listing unfinished jobs: %w", err)
	}
	for _, j := range jobs {
		if err := b.checkSites("sites of stored job "+j.ID, compSites(j)); err != nil {
			return rep, fmt.Errorf("recover: %w (was a site removed from the configuration?)", err)
		}
	}
	resv := slices.ContainsFunc(jobs, func(j *Job) bool { return j.Resv != nil })
	if resv {
		b.resv.learnCapacity(ctx, now)
	}
	b.mu.Lock()
	b.loadUsage(ctx) // the users' accounted use, for fair share (usage.go)
	if resv {
		b.resv.readmit(ctx, jobs, now)
	}
	b.duties.loadDuties(ctx, &rep) // pending cancels and late watches
	var cancels []cancelReq
	for _, j := range jobs {
		if _, dup := b.jobs[j.ID]; dup {
			continue
		}
		b.jobs[j.ID] = j
		b.duties.rewatch(j)
		// How a job ends while its outputs are fetched lives in memory
		// only; a store that hands back the struct (MemStore) must not
		// make the recovered job skip its fetch.
		j.final = nil
		if j.Group != nil || j.State == Held {
			if j.State == Held {
				b.held = append(b.held, j.ID)
			}
			if j.Group != nil {
				b.parents = append(b.parents, j.ID)
			}
			continue
		}
		if j.Moving != nil {
			took, cs := b.rm.recoverMove(ctx, j, now, &rep)
			cancels = append(cancels, cs...)
			if took {
				continue
			}
		}
		switch j.State {
		case Queued:
			b.queueLast(j)
			rep.Queued++
		case Dispatched, Running:
			b.adopt(j)
			b.remember(j)
			rep.Live++
			if hasCopies(j) { // a copy intent it holds was written before the restart
				b.markRestarted(j)
			}
			if hasCopies(j) {
				ok, cs := b.rec.lookupIntents(ctx, j, now, &rep)
				cancels = append(cancels, cs...)
				if !ok {
					continue
				}
			}
			// Components that ended before the crash (the job was stopped
			// while fetching its outputs): no poll asks about them again.
			if slices.ContainsFunc(j.Comps, func(c Component) bool { return c.State.Final() }) {
				var crep CycleReport
				cancels = append(cancels, b.stages.track.track(ctx, j, now, &crep)...)
			}
		case Submitting:
			b.markRestarted(j)
			cancels = append(cancels, b.rec.reconcile(ctx, j, now, &rep)...)
		case Reserved:
			b.reserved = append(b.reserved, j.ID)
			rep.Reserved++
		}
	}
	b.grp.recoverGroups(ctx, now, &rep)
	b.compactLive()
	b.mu.Unlock()
	b.duties.doCancels(ctx, now, cancels)
	return rep, nil
}

// compSites lists the sites a job's components name.
func compSites(j *Job) []string {
	var out []string
	for _, c := range j.Comps {
		out = append(out, c.Site)
	}
	return out
}

// reconcile settles a job found in the Submitting state: for each intended
// component it asks the site for remote jobs carrying the attempt's tag. The ledger's lock
// held (the sites are asked with it held: recovery runs before any cycle). It
// returns the remote cancels to issue once the ledger's lock is released.
func (rc *reconciler) reconcile(ctx context.Context, j *Job, now time.Time, rep *RecoverReport) []cancelReq {
	if hasCopies(j) {
		return rc.reconcileCopies(ctx, j, now, rep)
	}
	tag := RemoteTag(j.ID, j.Attempts)
	found, missing, unknown := 0, 0, 0
	var cancels []cancelReq // duplicates under the tag, and what the outcome below withdraws
	for k := range j.Comps {
		c := &j.Comps[k]
		if c.RemoteID != "" {
			found++
			continue
		}
		got, dups := rc.lookup(ctx, j, c, tag, now, rep)
		cancels = append(cancels, dups...)
		switch got {
		case tagUnknowable:
			unknown++
			rc.note(j, now, "reconcile", c.Site, "the site cannot look jobs up by tag; assuming the submission did not reach it")
			missing++
		case tagUnanswered:
			rc.unresolved = append(rc.unresolved, j.ID)
			return cancels
		case tagMissing:
			missing++
		case tagFound:
			found++
		}
	}
	if rc.duties.waitInFlight(ctx, j, now, missing, rep) {
		return cancels
	}
	switch {
	case missing == 0:
		rc.transition(j, Dispatched, now, "reconciled", "", fmt.Sprintf("after a restart: attempt %d found at %s", j.Attempts, j.Sites()))
		rc.adopt(j)
		rep.Live++
		// The remote jobs may have run, or ended, while nobody watched: fold
		// what the sites said into the job now. A poll would never do it for
		// a component already final.
		var crep CycleReport
		cancels = append(cancels, rc.track(ctx, j, now, &crep)...)
	default:
		for _, c := range j.Comps {
			if c.RemoteID != "" && !c.State.Final() {
				cancels = append(cancels, cancelReq{j.ID, c.Site, c.RemoteID, "its co-allocated siblings never reached their sites"})
			}
			if c.RemoteID == "" {
				rc.duties.abandon(ctx, j, c, tag, now) // cancelled if it lands after all
			}
		}
		rep.NeverReached += missing
		j.Comps = nil
		if j.Resv != nil && j.Resv.State == ResvBound {
			rc.note(j, now, "reconciled", "", fmt.Sprintf("after a restart: attempt %d never reached its reservation; submitted into it again", j.Attempts))
			rc.waitReserved(j)
			break
		}
		rc.transition(j, Queued, now, "reconciled", "", fmt.Sprintf("after a restart: attempt %d never reached %d site(s); queued again", j.Attempts, missing))
		rc.queueLast(j)
		rep.Queued++
	}
	_ = rc.save(ctx, j)
	return cancels
}

// retryUnresolved re-runs reconciliation for jobs whose site could not be
// asked during Recover. Called at the start of a cycle.
func (rc *reconciler) retryUnresolved(ctx context.Context, now time.Time) {
	rc.mu.Lock()
	if len(rc.unresolved) == 0 {
		rc.mu.Unlock()
		return
	}
	ids := rc.unresolved
	rc.unresolved = nil
	var rep RecoverReport
	var cancels []cancelReq
	for _, id := range ids {
		if j := rc.jobs[id]; j.State == Submitting {
			cancels = append(cancels, rc.reconcile(ctx, j, now, &rep)...)
		}
	}
	rc.compactLive()
	rc.mu.Unlock()
	rc.duties.doCancels(ctx, now, cancels)
}

// readmit rebuilds the resource–reservation graph after a restart: every
// unfinished job with a live reservation is admitted again, earliest window
// first. One still waiting that no longer passes (a site gone, or down at
// the restart) fails with the test's reason; one already running in its
// reservation stays, whatever the graph says. The ledger's lock held.
func (rsv *reservations) readmit(ctx context.Context, jobs []*Job, now time.Time) {
	var rs []*Job
	for _, j := range jobs {
		if r := j.Resv; r != nil && (r.State == ResvAdmitted || r.State == ResvBinding || r.State == ResvBound) {
			rs = append(rs, j)
		}
	}
	slices.SortStableFunc(rs, func(x, y *Job) int { return x.Resv.Earliest.Compare(y.Resv.Earliest) })
	g := rsv.graph()
	running := rsv.gridRunning(now)
	for _, j := range rs {
		st := g.Admit(rsv.resvRequest(j), now, running)
		ok, why := st.Code == policy.Success, strings.Join(st.Reasons, "; ")
		if ok || j.State != Reserved || j.Resv.State != ResvAdmitted {
			continue
		}
		j.Resv.State, j.Resv.Reason = ResvFailed, why
		rsv.endAs(j, now, Failed, "failed", "", "reservation failed: after a restart the admission test no longer holds it: "+why)
		_ = rsv.save(ctx, j)
	}
}

// waitInFlight applies Options.SubmitGrace to a job found Submitting
// after a restart, missing of whose intended submissions were not found
// at their sites: not found yet is not "never submitted", since a command
// sent just before the broker stopped may still land. While the intent is
// in flight (inFlight) the job stays Submitting and is looked up again
// every cycle (retryUnresolved), with one reconcile-wait event per
// attempt; it reports true then. The one rule for single and co-allocated
// jobs (reconcile) and for QoS copies (lookupIntents). The ledger's lock held.
func (d *duties) waitInFlight(ctx context.Context, j *Job, now time.Time, missing int, rep *RecoverReport) bool {
	if missing == 0 || !d.inFlight(j, now) {
		return false
	}
	if !slices.ContainsFunc(j.Events, func(e Event) bool {
		return e.Kind == "reconcile-wait" && strings.Contains(e.Msg, fmt.Sprintf("attempt %d ", j.Attempts))
	}) {
		d.record(ctx, j, now, "reconcile-wait", "", fmt.Sprintf("after a restart: attempt %d not found at %d site(s) yet; a submission in flight may still land, looking again until %s",
			j.Attempts, missing, j.Intent.Add(d.opts.SubmitGrace).Format(time.RFC3339)))
	}
	rep.Unresolved++
	d.unresolved = append(d.unresolved, j.ID)
	return true
}

// inFlight says whether job j's dispatch intent, written by the process
// before a restart, is recent enough that a submission it sent just
// before it stopped may still reach its site (Options.SubmitGrace). A
// batch this process cut itself is not waited for: its remote shell stops
// at the next marker it cannot write (backends/sshbatch). An intent
// recorded before Intent existed (zero) is not waited for. The ledger's lock held.
func (d *duties) inFlight(j *Job, now time.Time) bool {
	return d.opts.SubmitGrace > 0 && d.restarted[j.ID] && !j.Intent.IsZero() && now.Before(j.Intent.Add(d.opts.SubmitGrace))
}

// duplicates are the cancels of the remote jobs found under one tag beside
// the one adopted: never expected, and cancelled rather than run twice
// (counted in rep; the cancel stage sends them).
func duplicates(job, site, tag string, extra []backends.JobStatus, rep *RecoverReport) []cancelReq {
	var cs []cancelReq
	for _, st := range extra {
		if !st.State.Final() {
			cs = append(cs, cancelReq{job, site, st.ID, fmt.Sprintf("remote job %s: a duplicate under tag %s, cancelled rather than run twice", st.ID, tag)})
		}
		rep.DuplicatesCancelled++
	}
	return cs
}

// tagLookup is what a site said of a dispatch intent's tag.
type tagLookup int

const (
	tagFound      tagLookup = iota // a remote job carries it: adopted
	tagMissing                     // no remote job carries it (yet)
	tagUnknowable                  // the site cannot look jobs up by tag
	tagUnanswered                  // the site did not answer
)

// lookup asks component c's site for the remote jobs carrying tag — the
// one lookup of every dispatch intent after a restart, single jobs,
// co-allocated parts, replicas and QoS copies alike. Found: the first is
// adopted into c (its id, state and times), any other is a duplicate
// whose cancel is returned. Unanswered: the failure is recorded in rep and
// on the job (written), and the caller holds the job for the next cycle.
// The ledger's lock held.
func (rc *reconciler) lookup(ctx context.Context, j *Job, c *Component, tag string, now time.Time, rep *RecoverReport) (tagLookup, []cancelReq) {
	be, err := rc.backendFor(ctx, rc.siteIdx[c.Site], rc.identityOwner(j))
	var f backends.Finder
	if err == nil {
		var ok bool
		if f, ok = backends.AsFinder(be); !ok {
			return tagUnknowable, nil
		}
	}
	var sts []backends.JobStatus
	if err == nil {
		sts, err = f.FindByGridID(ctx, tag)
	}
	if err != nil {
		rep.Errors = append(rep.Errors, fmt.Errorf("job %s at %s: %w", j.ID, c.Site, err))
		rep.Unresolved++
		rc.record(ctx, j, now, "reconcile-failed", c.Site, fmt.Sprintf("looking up %s: %v; the job is held until the site answers", tag, err))
		return tagUnanswered, nil
	}
	if len(sts) == 0 {
		return tagMissing, nil
	}
	st := sts[0]
	c.RemoteID, c.State, c.Reason = st.ID, st.State, st.Reason
	if c.State == backends.StateUnknown {
		c.State = backends.StatePending
	}
	if !st.Start.IsZero() {
		c.Start = st.Start
	}
	if c.State.Final() {
		c.ExitCode, c.End = st.ExitCode, orNow(st.End, now)
	}
	rep.Adopted++
	return tagFound, duplicates(j.ID, c.Site, tag, sts[1:], rep)
}
