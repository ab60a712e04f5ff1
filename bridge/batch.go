package bridge

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// MaxSiteSubmits bounds how many real sites a cycle submits to at once.
const MaxSiteSubmits = 16

// pendingSubmit is a job whose dispatch intent is recorded and whose
// components are still to be submitted.
type pendingSubmit struct {
	id    string
	d     policy.Decision
	specs []*backends.JobSpec
}

// submitPending submits a cycle's dispatched jobs: a site with the batch
// capability (backends.BatchSubmitter) and two or more of the cycle's
// components gets them all in one SubmitBatch — one remote command instead
// of one per job; the other sites' components get one Submit each, in plan
// order. Real sites are submitted to concurrently (at most MaxSiteSubmits
// at a time), simulated ones in order. Each job is then settled as submitParts
// does, from its own components' outcomes only: one job's refusal does not
// touch another's.
func (b *Broker) submitPending(ctx context.Context, now time.Time, pend []pendingSubmit, rep *CycleReport) {
	var data relays
	defer data.close()
	pend = b.stagePending(ctx, now, &data, pend, rep) // sitedata.go: inputs that lie at a site
	if len(pend) == 0 {
		return
	}
	type ref struct{ p, k int }
	rids := make([][]backends.JobID, len(pend))
	errs := make([][]error, len(pend))
	bySite := map[int][]ref{}
	var order []int
	for pi, ps := range pend {
		rids[pi] = make([]backends.JobID, len(ps.specs))
		errs[pi] = make([]error, len(ps.specs))
		for k, part := range ps.d.Chosen.Parts {
			if _, seen := bySite[part.Site]; !seen {
				order = append(order, part.Site)
			}
			bySite[part.Site] = append(bySite[part.Site], ref{pi, k})
		}
	}
	batched := map[int]bool{}
	for si, refs := range bySite {
		_, ok := backends.AsBatchSubmitter(b.sites[si].Backend)
		batched[si] = ok && len(refs) > 1
	}
	// submitAt submits site si's components: one SubmitBatch when it is
	// batched, else one Submit each in plan order.
	submitAt := func(si int) {
		refs := bySite[si]
		if !batched[si] {
			for _, r := range refs {
				rids[r.p][r.k], errs[r.p][r.k] = b.sites[si].Backend.Submit(ctx, pend[r.p].specs[r.k])
				b.markStale(si)
			}
			return
		}
		bs, _ := backends.AsBatchSubmitter(b.sites[si].Backend)
		specs := make([]*backends.JobSpec, len(refs))
		for i, r := range refs {
			specs[i] = pend[r.p].specs[r.k]
		}
		t0 := time.Now()
		res := bs.SubmitBatch(ctx, specs)
		b.markStale(si)
		failed := 0
		for _, r := range res {
			if r.Err != nil {
				failed++
			}
		}
		b.log.Info("batched submission", "site", b.names[si], "jobs", len(specs), "failed", failed,
			"took", time.Since(t0).Round(time.Millisecond))
		for i, r := range refs {
			if len(res) != len(refs) {
				// A broken contract: nothing can be trusted, and any of
				// them may be at the site.
				errs[r.p][r.k] = fmt.Errorf("%w: %w: %s: SubmitBatch returned %d results for %d jobs",
					backends.ErrUnavailable, backends.ErrOutcomeUnknown, b.names[si], len(res), len(refs))
				continue
			}
			rids[r.p][r.k], errs[r.p][r.k] = res[i].ID, res[i].Err
		}
	}
	// Simulated sites one after the other in plan order (they answer at
	// once, and order keeps replays deterministic); real sites
	// concurrently, at most MaxSiteSubmits at a time: a cycle with jobs
	// for 50 sites costs about the slowest site's submission, not the sum
	// of all (each site's components stay in plan order, each slot of
	// rids/errs is written by its own site only).
	for pi, ps := range pend {
		for k, part := range ps.d.Chosen.Parts {
			if si := part.Site; b.sites[si].Simulated && !batched[si] {
				rids[pi][k], errs[pi][k] = b.sites[si].Backend.Submit(ctx, ps.specs[k])
				b.markStale(si)
			}
		}
	}
	sem := make(chan struct{}, MaxSiteSubmits)
	var wg sync.WaitGroup
	for _, si := range order {
		if b.sites[si].Simulated {
			if batched[si] {
				submitAt(si)
			}
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			submitAt(si)
		})
	}
	wg.Wait()
	// The jobs' settled states are written together at the end (one
	// commit for many; their intents are already stored).
	b.mu.Lock()
	b.startGroup()
	b.mu.Unlock()
	for pi, ps := range pend {
		b.finishParts(ctx, now, ps.id, ps.d, rids[pi], errs[pi], rep)
	}
	b.mu.Lock()
	b.flushGroup(ctx)
	b.mu.Unlock()
}

// unknownParts handles a job one of whose components may or may not have
// reached its site (backends.ErrOutcomeUnknown: its batch was cut): it is
// never resubmitted blindly. The job stays Submitting, with the remote ids
// that are known, leaves the queue, and is reconciled by its attempt's tag
// at the start of the next cycle (retryUnresolved, as after a restart): a
// remote job found is adopted, and if any component is missing the found
// ones are cancelled and the job queued again. It reports whether it took
// the job. b.mu held.
func (b *Broker) unknownParts(ctx context.Context, now time.Time, j *Job, comps []Component, errs []error, rep *CycleReport) bool {
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
			b.addEvent(j, now, "submit-unknown", comps[k].Site, errs[k].Error())
		} else if !b.opts.NoHistory {
			b.addEvent(j, now, "submitted-remote", comps[k].Site, fmt.Sprintf("remote job %s (%d node(s))", comps[k].RemoteID, comps[k].Nodes))
		}
	}
	j.Comps, j.State = comps, Submitting
	b.addEvent(j, now, "reconcile-pending", "", "a submission's outcome is unknown; the sites are asked for its tag "+
		RemoteTag(j.ID, j.Attempts)+" before anything is submitted again")
	b.dequeue(j.ID)
	b.unresolved = append(b.unresolved, j.ID)
	_ = b.persist(ctx, j)
	rep.Errors = append(rep.Errors, fmt.Errorf("job %s: %w", j.ID, unknown))
	return true
}
