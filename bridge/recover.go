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
		b.learnCapacity(ctx, now)
	}
	b.mu.Lock()
	if resv {
		b.readmit(ctx, jobs, now)
	}
	b.loadDuties(ctx, &rep) // duties.go: pending cancels and late watches
	var cancels []cancelReq
	for _, j := range jobs {
		if _, dup := b.jobs[j.ID]; dup {
			continue
		}
		b.jobs[j.ID] = j
		b.rewatch(j) // duties.go
		// How a job ends while its outputs are fetched lives in memory
		// only; a store that hands back the struct (MemStore) must not
		// make the recovered job skip its fetch.
		j.final = nil
		if j.Group != nil || j.State == Held { // group.go, deps.go
			if j.State == Held {
				b.held = append(b.held, j.ID)
			}
			if j.Group != nil {
				b.parents = append(b.parents, j.ID)
			}
			continue
		}
		if j.Moving != nil { // remap.go
			took, cs := b.recoverMove(ctx, j, now, &rep)
			cancels = append(cancels, cs...)
			if took {
				continue
			}
		}
		switch j.State {
		case Queued:
			b.queue = append(b.queue, j.ID)
			b.pq = append(b.pq, b.policyJob(j))
			rep.Queued++
		case Dispatched, Running:
			b.track0(j)
			rep.Live++
			if b.hasCopies(j) { // a copy intent it holds was written before the restart
				b.markRestarted(j)
			}
			if b.hasCopies(j) && !b.lookupIntents(ctx, j, now, &rep) { // recover_copies.go
				continue
			}
			// Components that ended before the crash (the job was stopped
			// while fetching its outputs): no poll asks about them again.
			if slices.ContainsFunc(j.Comps, func(c Component) bool { return c.State.Final() }) {
				var crep CycleReport
				cancels = append(cancels, b.track(ctx, j, now, &crep)...)
			}
		case Submitting:
			b.markRestarted(j)
			cancels = append(cancels, b.reconcile(ctx, j, now, &rep)...)
		case Reserved:
			b.reserved = append(b.reserved, j.ID)
			rep.Reserved++
		}
	}
	b.recoverGroups(ctx, now, &rep)
	b.compactLive()
	b.mu.Unlock()
	b.doCancels(ctx, now, cancels)
	return rep, nil
}

// markRestarted records that j's intents were written by the process
// before the restart (Options.SubmitGrace applies to them). b.mu held.
func (b *Broker) markRestarted(j *Job) {
	if b.restarted == nil {
		b.restarted = map[string]bool{}
	}
	b.restarted[j.ID] = true
}

// compSites lists the sites a job's components name.
func compSites(j *Job) []string {
	var out []string
	for _, c := range j.Comps {
		out = append(out, c.Site)
	}
	return out
}

// track0 makes a dispatched or running job live again. b.mu held.
func (b *Broker) track0(j *Job) {
	b.live = append(b.live, j.ID)
	for _, c := range j.Comps {
		if c.RemoteID != "" {
			b.where[compKey{b.siteIdx[c.Site], c.RemoteID}] = j.ID
		}
	}
}

// reconcile settles a job found in the Submitting state: for each intended
// component it asks the site for remote jobs carrying the attempt's tag. b.mu
// held (the sites are asked with it held: recovery runs before any cycle). It
// returns the remote cancels to issue once b.mu is released.
func (b *Broker) reconcile(ctx context.Context, j *Job, now time.Time, rep *RecoverReport) []cancelReq {
	if b.hasCopies(j) {
		return b.reconcileCopies(ctx, j, now, rep) // recover_copies.go
	}
	tag := RemoteTag(j.ID, j.Attempts)
	found, missing, unknown := 0, 0, 0
	for k := range j.Comps {
		c := &j.Comps[k]
		if c.RemoteID != "" {
			found++
			continue
		}
		be := b.sites[b.siteIdx[c.Site]].Backend
		f, ok := backends.AsFinder(be)
		if !ok {
			unknown++
			b.addEvent(j, now, "reconcile", c.Site, "the site cannot look jobs up by tag; assuming the submission did not reach it")
			missing++
			continue
		}
		sts, err := f.FindByGridID(ctx, tag)
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("job %s at %s: %w", j.ID, c.Site, err))
			rep.Unresolved++
			b.addEvent(j, now, "reconcile-failed", c.Site, fmt.Sprintf("looking up %s: %v; the job is held until the site answers", tag, err))
			_ = b.persist(ctx, j)
			b.unresolved = append(b.unresolved, j.ID)
			return nil
		}
		if len(sts) == 0 {
			missing++
			continue
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
		found++
		rep.Adopted++
		for _, extra := range sts[1:] { // never expected; cancel rather than run twice
			if !extra.State.Final() {
				_ = be.Cancel(ctx, extra.ID)
			}
			rep.DuplicatesCancelled++
		}
	}
	if b.waitInFlight(ctx, j, now, missing, rep) {
		return nil
	}
	var cancels []cancelReq
	switch {
	case missing == 0:
		j.State = Dispatched
		b.addEvent(j, now, "reconciled", "", fmt.Sprintf("after a restart: attempt %d found at %s", j.Attempts, j.Sites()))
		b.track0(j)
		rep.Live++
		// The remote jobs may have run, or ended, while nobody watched: fold
		// what the sites said into the job now. A poll would never do it for
		// a component already final.
		var crep CycleReport
		cancels = b.track(ctx, j, now, &crep)
	default:
		for _, c := range j.Comps {
			if c.RemoteID != "" && !c.State.Final() {
				cancels = append(cancels, cancelReq{j.ID, c.Site, c.RemoteID, "its co-allocated siblings never reached their sites"})
			}
			if c.RemoteID == "" {
				b.abandon(ctx, j, c, tag, now) // duties.go: cancelled if it lands after all
			}
		}
		rep.NeverReached += missing
		j.Comps = nil
		if j.Resv != nil && j.Resv.State == ResvBound {
			b.addEvent(j, now, "reconciled", "", fmt.Sprintf("after a restart: attempt %d never reached its reservation; submitted into it again", j.Attempts))
			b.waitReserved(j)
			break
		}
		j.State = Queued
		b.addEvent(j, now, "reconciled", "", fmt.Sprintf("after a restart: attempt %d never reached %d site(s); queued again", j.Attempts, missing))
		b.queue = append(b.queue, j.ID)
		b.pq = append(b.pq, b.policyJob(j))
		rep.Queued++
	}
	_ = b.persist(ctx, j)
	return cancels
}

// retryUnresolved re-runs reconciliation for jobs whose site could not be
// asked during Recover. Called at the start of a cycle.
func (b *Broker) retryUnresolved(ctx context.Context, now time.Time) {
	b.mu.Lock()
	if len(b.unresolved) == 0 {
		b.mu.Unlock()
		return
	}
	ids := b.unresolved
	b.unresolved = nil
	var rep RecoverReport
	var cancels []cancelReq
	for _, id := range ids {
		if j := b.jobs[id]; j.State == Submitting {
			cancels = append(cancels, b.reconcile(ctx, j, now, &rep)...)
		}
	}
	b.compactLive()
	b.mu.Unlock()
	b.doCancels(ctx, now, cancels)
}

// readmit rebuilds the resource–reservation graph after a restart: every
// unfinished job with a live reservation is admitted again, earliest window
// first. One still waiting that no longer passes (a site gone, or down at
// the restart) fails with the test's reason; one already running in its
// reservation stays, whatever the graph says. b.mu held.
func (b *Broker) readmit(ctx context.Context, jobs []*Job, now time.Time) {
	var rs []*Job
	for _, j := range jobs {
		if r := j.Resv; r != nil && (r.State == ResvAdmitted || r.State == ResvBinding || r.State == ResvBound) {
			rs = append(rs, j)
		}
	}
	slices.SortStableFunc(rs, func(x, y *Job) int { return x.Resv.Earliest.Compare(y.Resv.Earliest) })
	g := b.graph()
	running := b.gridRunning(now)
	for _, j := range rs {
		st := g.Admit(b.resvRequest(j), now, running)
		ok, why := st.Code == policy.Success, strings.Join(st.Reasons, "; ")
		if ok || j.State != Reserved || j.Resv.State != ResvAdmitted {
			continue
		}
		j.Resv.State, j.Resv.Reason = ResvFailed, why
		j.State, j.Reason, j.End = Failed, "reservation failed: after a restart the admission test no longer holds it: "+why, now
		b.addEvent(j, now, "failed", "", j.Reason)
		_ = b.persist(ctx, j)
	}
}

// waitInFlight applies Options.SubmitGrace to a job found Submitting
// after a restart, missing of whose intended submissions were not found
// at their sites: not found yet is not "never submitted", since a command
// sent just before the broker stopped may still land. While the intent is
// in flight (inFlight) the job stays Submitting and is looked up again
// every cycle (retryUnresolved), with one reconcile-wait event per
// attempt; it reports true then. The one rule for single and co-allocated
// jobs (reconcile) and for QoS copies (lookupIntents). b.mu held.
func (b *Broker) waitInFlight(ctx context.Context, j *Job, now time.Time, missing int, rep *RecoverReport) bool {
	if missing == 0 || !b.inFlight(j, now) {
		return false
	}
	if !slices.ContainsFunc(j.Events, func(e Event) bool {
		return e.Kind == "reconcile-wait" && strings.Contains(e.Msg, fmt.Sprintf("attempt %d ", j.Attempts))
	}) {
		b.addEvent(j, now, "reconcile-wait", "", fmt.Sprintf("after a restart: attempt %d not found at %d site(s) yet; a submission in flight may still land, looking again until %s",
			j.Attempts, missing, j.Intent.Add(b.opts.SubmitGrace).Format(time.RFC3339)))
		_ = b.persist(ctx, j)
	}
	rep.Unresolved++
	b.unresolved = append(b.unresolved, j.ID)
	return true
}

// inFlight says whether job j's dispatch intent, written by the process
// before a restart, is recent enough that a submission it sent just
// before it stopped may still reach its site (Options.SubmitGrace). A
// batch this process cut itself is not waited for: its remote shell stops
// at the next marker it cannot write (backends/sshbatch). An intent
// recorded before Intent existed (zero) is not waited for. b.mu held.
func (b *Broker) inFlight(j *Job, now time.Time) bool {
	return b.opts.SubmitGrace > 0 && b.restarted[j.ID] && !j.Intent.IsZero() && now.Before(j.Intent.Add(b.opts.SubmitGrace))
}
