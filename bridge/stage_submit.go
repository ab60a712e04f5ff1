package bridge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// submitter is the submit stage: submitAll hands specs to the sites, and
// the outcome of a job's submission is settled here (finishParts).
type submitter struct {
	part
	*duties       // the cancel stage: what a partial dispatch undoes
	*reservations // a job that fails for good gives its reservation up
}

// MaxSiteSubmits bounds how many real sites a cycle submits to at once.
const MaxSiteSubmits = 16

// pendingSubmit is a job whose dispatch intent is recorded and whose
// components are still to be submitted.
type pendingSubmit struct {
	id    string
	owner string // whose identity submits it (siteTable.identityOwner)
	d     policy.Decision
	specs []*backends.JobSpec
}

// submitReq is one component to submit: its spec, at site, through
// owner's identity there (siteTable.backendFor).
type submitReq struct {
	site  int
	spec  *backends.JobSpec
	owner string
}

// submitAll is the submit stage: the one place that hands JobSpecs to the
// sites (Backend.Submit, BatchSubmitter.SubmitBatch). It returns each
// request's remote id or error, in the order of reqs. Each request goes
// through its owner's identity at its site (siteTable.backendFor): a
// site's requests are handed over per identity, a "unit". A unit whose
// backend has the batch capability (backends.BatchSubmitter) and two or
// more of the requests gets them all in one SubmitBatch — one remote
// command instead of one per job; the other units' requests get one
// Submit each, in order. Real sites are submitted to concurrently (at
// most MaxSiteSubmits units at a time), simulated ones in order: a cycle
// with jobs for 50 sites costs about the slowest site's submission, not
// the sum of all, and a replay stays deterministic. Every site asked is
// marked stale (its Info changed). Called without the ledger's lock.
func (sm *submitter) submitAll(ctx context.Context, reqs []submitReq) ([]backends.JobID, []error) {
	rids := make([]backends.JobID, len(reqs))
	errs := make([]error, len(reqs))
	type unit struct {
		site  int
		owner string
	}
	byUnit := map[unit][]int{}
	var order []unit
	for i, r := range reqs {
		u := unit{r.site, r.owner}
		if sm.sites[r.site].Simulated {
			u.owner = "" // a simulated site has no identities (backendFor)
		}
		if _, seen := byUnit[u]; !seen {
			order = append(order, u)
		}
		byUnit[u] = append(byUnit[u], i)
	}
	backend := func(u unit) (backends.Backend, error) { return sm.backendFor(ctx, u.site, u.owner) }
	batched := func(u unit) bool {
		if len(byUnit[u]) < 2 {
			return false
		}
		be, err := backend(u)
		if err != nil {
			return false // one Submit each, each failing with err
		}
		_, ok := siteSubmitBatch(be)
		return ok
	}
	// one submits request i alone, through the backend of unit u.
	one := func(u unit, i int) {
		be, err := backend(u)
		if err != nil {
			errs[i] = err
			return
		}
		rids[i], errs[i] = be.Submit(ctx, reqs[i].spec)
		sm.markStale(u.site)
	}
	// submitAt submits unit u's requests: one SubmitBatch when it is
	// batched, else one Submit each in order.
	submitAt := func(u unit) {
		idx := byUnit[u]
		si := u.site
		if !batched(u) {
			for _, i := range idx {
				one(u, i)
			}
			return
		}
		be, _ := backend(u)
		submitBatch, _ := siteSubmitBatch(be)
		specs := make([]*backends.JobSpec, len(idx))
		for k, i := range idx {
			specs[k] = reqs[i].spec
		}
		t0 := time.Now()
		res := submitBatch(ctx, specs)
		sm.markStale(si)
		failed := 0
		for _, r := range res {
			if r.Err != nil {
				failed++
			}
		}
		sm.log.Info("batched submission", "site", sm.names[si], "jobs", len(specs), "failed", failed,
			"took", time.Since(t0).Round(time.Millisecond))
		for k, i := range idx {
			if len(res) != len(idx) {
				// A broken contract: nothing can be trusted, and any of
				// them may be at the site.
				errs[i] = fmt.Errorf("%w: %w: %s: SubmitBatch returned %d results for %d jobs",
					backends.ErrUnavailable, backends.ErrOutcomeUnknown, sm.names[si], len(res), len(idx))
				continue
			}
			rids[i], errs[i] = res[k].ID, res[k].Err
		}
	}
	// Simulated sites one request after the other in order (then their
	// batches, site by site); real sites concurrently (each unit's
	// requests stay in order, each slot of rids/errs is written by its
	// own unit only).
	for i, r := range reqs {
		if u := (unit{site: r.site}); sm.sites[r.site].Simulated && !batched(u) {
			one(u, i)
		}
	}
	sem := make(chan struct{}, MaxSiteSubmits)
	var wg sync.WaitGroup
	for _, u := range order {
		if sm.sites[u.site].Simulated {
			if batched(u) {
				submitAt(u)
			}
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			submitAt(u)
		})
	}
	wg.Wait()
	return rids, errs
}

// run is the submit stage of a cycle: it submits the jobs the dispatch
// stage recorded intents for (cs.pend), as submitPending does.
func (sm *submitter) run(ctx context.Context, cs *cycleState) {
	sm.submitPending(ctx, cs.now, cs.pend, &cs.rep)
	cs.pend = nil
}

// submitPending submits a cycle's dispatched jobs through submitAll, in
// plan order, and settles each job as submitParts does, from its own
// components' outcomes only: one job's refusal does not touch another's.
func (sm *submitter) submitPending(ctx context.Context, now time.Time, pend []pendingSubmit, rep *CycleReport) {
	var data relays
	defer data.close()
	pend = sm.stagePending(ctx, now, &data, pend, rep) // inputs that lie at a site
	if len(pend) == 0 {
		return
	}
	var reqs []submitReq
	for _, ps := range pend {
		for k, part := range ps.d.Chosen.Parts {
			reqs = append(reqs, submitReq{part.Site, ps.specs[k], ps.owner})
		}
	}
	ids, errs := sm.submitAll(ctx, reqs)
	// The jobs' settled states are written together at the end (one
	// commit for many; their intents are already stored).
	sm.mu.Lock()
	sm.startGroup()
	sm.mu.Unlock()
	at := 0
	for _, ps := range pend {
		n := len(ps.d.Chosen.Parts)
		sm.finishParts(ctx, now, ps.id, ps.d, ids[at:at+n], errs[at:at+n], rep)
		at += n
	}
	sm.mu.Lock()
	sm.flushGroup(ctx)
	sm.mu.Unlock()
}

// unknownParts handles a job one of whose components may or may not have
// reached its site (backends.ErrOutcomeUnknown: its batch was cut): it is
// never resubmitted blindly. The job stays Submitting, with the remote ids
// that are known, leaves the queue, and is reconciled by its attempt's tag
// at the start of the next cycle (retryUnresolved, as after a restart): a
// remote job found is adopted, and if any component is missing the found
// ones are cancelled and the job queued again. It reports whether it took
// the job. The ledger's lock held.
func (sm *submitter) unknownParts(ctx context.Context, now time.Time, j *Job, comps []Component, errs []error, rep *CycleReport) bool {
	var unknown error
	for _, err := range errs {
		if err != nil && backends.OutcomeUnknown(err) {
			unknown = err
			break
		}
	}
	if unknown == nil {
		return false
	}
	for k := range comps {
		if errs[k] != nil {
			comps[k].RemoteID = ""
			comps[k].State = backends.StateUnknown
			sm.note(j, now, "submit-unknown", comps[k].Site, errs[k].Error())
		} else if !sm.opts.NoHistory {
			sm.note(j, now, "submitted-remote", comps[k].Site, fmt.Sprintf("remote job %s (%d node(s))", comps[k].RemoteID, comps[k].Nodes))
		}
	}
	j.Comps = comps
	sm.transition(j, Submitting, now, "reconcile-pending", "", "a submission's outcome is unknown; the sites are asked for its tag "+
		RemoteTag(j.ID, j.Attempts)+" before anything is submitted again")
	sm.dequeue(j.ID)
	sm.unresolved = append(sm.unresolved, j.ID)
	_ = sm.save(ctx, j)
	rep.Errors = append(rep.Errors, fmt.Errorf("job %s: %w", j.ID, unknown))
	return true
}

// submitParts submits every component. If any submission fails, the ones that
// succeeded are cancelled and the job goes back to the queue (or fails, when
// the error cannot be cured by waiting or the attempts are used up). A
// replicated job only needs one copy to be accepted.
func (sm *submitter) submitParts(ctx context.Context, now time.Time, id, owner string, d policy.Decision, specs []*backends.JobSpec, rep *CycleReport) {
	reqs := make([]submitReq, len(specs))
	for k, p := range d.Chosen.Parts {
		reqs[k] = submitReq{p.Site, specs[k], owner}
	}
	rids, errs := sm.submitAll(ctx, reqs)
	sm.finishParts(ctx, now, id, d, rids, errs, rep)
}

// finishParts settles a job once every component's submission has an
// outcome (rids[k] or errs[k]), as submitParts says; a component whose
// outcome is unknown holds the job for reconciliation by tag (unknownParts).
func (sm *submitter) finishParts(ctx context.Context, now time.Time, id string, d policy.Decision, rids []backends.JobID, errs []error, rep *CycleReport) {
	names := sm.names
	comps := make([]Component, len(rids))
	for k, p := range d.Chosen.Parts {
		comps[k] = Component{Site: names[p.Site], Nodes: p.Nodes, RemoteID: rids[k], State: backends.StatePending, ExitCode: -1,
			Replica: d.Action == policy.Replicate}
	}
	sm.mu.Lock()
	j := sm.jobs[id]
	if sm.unknownParts(ctx, now, j, comps, errs, rep) {
		sm.mu.Unlock()
		return
	}
	var ok []Component
	var firstErr error
	for k, c := range comps {
		if errs[k] != nil {
			sm.note(j, now, "submit-failed", c.Site, errs[k].Error())
			if firstErr == nil {
				firstErr = errs[k]
			}
			continue
		}
		if !sm.opts.NoHistory {
			sm.note(j, now, "submitted-remote", c.Site, fmt.Sprintf("remote job %s (%d node(s))", c.RemoteID, c.Nodes))
		}
		ok = append(ok, c)
	}
	if firstErr == nil || (d.Action == policy.Replicate && len(ok) > 0) {
		j.Comps = ok
		for _, c := range ok {
			sm.index(id, c)
		}
		sm.goLive(j)
		sm.saveLater(ctx, j)
		if d.Action == policy.Replicate {
			rep.Replicated++
		} else {
			rep.Started++
		}
		sm.mu.Unlock()
		return
	}
	// Undo the partial dispatch.
	var undo []cancelReq
	for _, c := range ok {
		undo = append(undo, cancelReq{id, c.Site, c.RemoteID, "another component could not be submitted"})
	}
	j.Comps = nil
	if sm.refuse(j, now, comps, errs) {
		// A site said no for good: the job goes on at the others (refused.go).
		j.State = Queued
		sm.replan(j)
	} else if backends.Retryable(firstErr) && j.Attempts-j.Moves < sm.opts.MaxAttempts {
		if j.Resv != nil {
			sm.waitReserved(j)
			sm.note(j, now, "retry-later", "", fmt.Sprintf("submission into the reservation failed (%v); tried again at the next binding", firstErr))
		} else {
			sm.transition(j, Queued, now, "retry-later", "", fmt.Sprintf("submission failed (%v); stays queued", firstErr))
		}
	} else {
		why := fmt.Sprintf("submission failed: %v", firstErr)
		if len(j.Refused) == 1 {
			why = "submission failed: " + j.Refused[0].Why // with the field the site's words name (misconfig.go)
		} else if len(j.Refused) > 1 {
			why = "every allowed site refused the job: " + refusedText(j)
		}
		if !backends.Retryable(firstErr) && !errors.Is(firstErr, context.Canceled) {
			why += " (not retryable)"
		}
		sm.endAs(j, now, Failed, "failed", "", why)
		sm.dequeue(id)
		sm.dropResv(j, ResvFailed, why)
	}
	sm.saveLater(ctx, j)
	rep.Errors = append(rep.Errors, fmt.Errorf("job %s: %w", id, firstErr))
	sm.mu.Unlock()
	sm.duties.doCancels(ctx, now, undo)
}
