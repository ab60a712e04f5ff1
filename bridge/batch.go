package bridge

import (
	"context"
	"fmt"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

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
// of one per job — after the other sites' components, which get one Submit
// each, in plan order. Each job is then settled as submitParts
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
	// Sites without batching: one Submit per component, in plan order, as
	// before batching existed.
	for pi, ps := range pend {
		for k, part := range ps.d.Chosen.Parts {
			if !batched[part.Site] {
				rids[pi][k], errs[pi][k] = b.sites[part.Site].Backend.Submit(ctx, ps.specs[k])
				b.markStale(part.Site)
			}
		}
	}
	for _, si := range order {
		if !batched[si] {
			continue
		}
		refs := bySite[si]
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
	for pi, ps := range pend {
		b.finishParts(ctx, now, ps.id, ps.d, rids[pi], errs[pi], rep)
	}
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
