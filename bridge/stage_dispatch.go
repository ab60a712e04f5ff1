package bridge

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// dispatcher is the dispatch stage: it records every decision of the plan
// on its job — rejections, predicted starts, and for a start the
// write-ahead intent of where the job is about to be submitted — and hands
// the intents to the submit stage (cs.pend). A QoS-tiered job is dispatched
// as copies (copies.go).
type dispatcher struct {
	part
	*copies // copies of QoS-tiered jobs, and the cycle's snapshot
	planner policy.Planner
	resv    *reservations // the admission graph a start is offered to (reserve_guard.go)
}

// run is the dispatch stage (see dispatcher).
func (dp *dispatcher) run(ctx context.Context, cs *cycleState) {
	cs.pend = dp.dispatch(ctx, cs.now, cs.plan, &cs.rep)
}

// dispatch acts on a plan: every decision is recorded on the job before the
// remote call, and the job's queue position is given up only once the
// outcome is known. It returns the jobs whose intents are stored, for the
// submit stage.
func (dp *dispatcher) dispatch(ctx context.Context, now time.Time, plan *policy.Plan, rep *CycleReport) []pendingSubmit {
	names := dp.names
	var intents, pend []pendingSubmit
	dp.mu.Lock()
	dp.startGroup() // rejections and reservations are written after the intents, together
	if dp.resv != nil {
		dp.resv.releaseRunBookings()
		dp.resv.restoreHeldOff()
	}
	dp.mu.Unlock()
	for _, d := range plan.Decisions {
		dp.mu.Lock()
		j, ok := dp.jobs[d.Job]
		if !ok || j.State != Queued {
			dp.mu.Unlock()
			continue
		}
		switch d.Action {
		case policy.Reject:
			why := strings.Join(d.Status.Reasons, "; ")
			if why == "" {
				why = "rejected by policy " + dp.planner.Name()
			}
			dp.endAs(j, now, Rejected, "rejected", "", why)
			dp.dequeue(j.ID)
			dp.saveLater(ctx, j)
			rep.Rejected++
			dp.mu.Unlock()
		case policy.Reserve:
			first := j.Predicted.Parts == nil
			j.Predicted, j.SiteNames = d.Chosen, names
			if first {
				if !dp.opts.NoHistory {
					dp.note(j, now, "waiting", "", fmt.Sprintf("no placement free now; reserved %s from %s (predicted end %s)",
						partsString(names, d.Chosen.Parts), d.Chosen.Start.Format(time.RFC3339), d.Chosen.End().Format(time.RFC3339)))
				}
				dp.saveLater(ctx, j)
			}
			dp.mu.Unlock()
		case policy.Start, policy.Replicate:
			if dp.refuseMisfits(j, partNames(names, d.Chosen.Parts), now) {
				// A chosen site lacks the partition or queue the job names
				// there (misconfig.go): nothing is submitted; the job is
				// planned again on the sites left, or rejected.
				if left := dp.allowedLeft(j); len(left) == 0 {
					dp.endAs(j, now, Rejected, "rejected", "", "no allowed site can take it as asked: "+refusedText(j))
					dp.dequeue(j.ID)
					rep.Rejected++
				}
				dp.saveLater(ctx, j)
				dp.mu.Unlock()
				continue
			}
			if dp.resv != nil {
				if ok, why := dp.resv.bookRun(j, &d, names, now); !ok {
					if j.Reason != why {
						j.Reason = why
						dp.note(j, now, "waiting", "", why)
						dp.saveLater(ctx, j)
					}
					dp.mu.Unlock()
					continue
				}
			}
			if dp.copiesFor(j) {
				dp.dispatchCopies(ctx, now, j, d, rep) // releases dp.mu
				continue
			}
			j.Attempts++
			j.Predicted, j.Beaten, j.SiteNames = d.Chosen, d.Beaten, names
			if strings.HasPrefix(j.Reason, notStartedPrefix) {
				j.Reason = ""
			}
			if !dp.opts.NoHistory {
				verb := "dispatching to "
				if d.Action == policy.Replicate {
					verb = "replicating to "
				}
				msg := verb + partsString(names, d.Chosen.Parts)
				if d.Backfilled {
					msg += " (backfilled)"
				}
				dp.note(j, now, "dispatch", "", fmt.Sprintf("attempt %d: %s", j.Attempts, msg))
			}
			// Write-ahead intent: the job says where it is about to be
			// submitted (and under which tag) before any site hears of it.
			j.State, j.Intent = Submitting, now
			delete(dp.restarted, j.ID) // a new intent of this process (recover.go: inFlight)
			j.Comps = make([]Component, len(d.Chosen.Parts))
			for k, p := range d.Chosen.Parts {
				j.Comps[k] = Component{Site: names[p.Site], Nodes: p.Nodes, State: backends.StateUnknown, ExitCode: -1,
					Replica: d.Action == policy.Replicate}
			}
			specs := make([]*backends.JobSpec, len(d.Chosen.Parts))
			for k, p := range d.Chosen.Parts {
				n := len(d.Chosen.Parts)
				if d.Action == policy.Replicate {
					// Each copy runs alone at its own site: its run time and
					// transfer are that site's (equation 2), not the chosen
					// (fastest) target's.
					specs[k] = dp.spec(j, 0, 1, names[p.Site], p.Nodes, dp.alone(j, p, d.Chosen))
				} else {
					specs[k] = dp.spec(j, k, n, names[p.Site], p.Nodes, d.Chosen)
				}
				specs[k].ArrayLimit = dp.arrayLimit(j)
			}
			dp.mu.Unlock()
			intents = append(intents, pendingSubmit{id: j.ID, owner: dp.identityOwner(j), d: d, specs: specs})
		}
	}
	// The intents are written together (one store commit for many, not
	// one fsync per job), before any site hears of the jobs; a job whose
	// intent could not be recorded is not acted on and stays queued.
	dp.mu.Lock()
	js := make([]*Job, len(intents))
	for i, ps := range intents {
		js[i] = dp.jobs[ps.id]
	}
	for i, err := range dp.writeCopies(ctx, js) {
		if err != nil {
			dp.log.Error("store write failed", "job", js[i].ID, "err", err)
			j := js[i]
			j.State, j.Comps, j.Attempts = Queued, nil, j.Attempts-1
			rep.Errors = append(rep.Errors, fmt.Errorf("job %s: recording the dispatch intent: %w", j.ID, err))
			continue
		}
		pend = append(pend, intents[i])
	}
	dp.flushGroup(ctx)
	dp.mu.Unlock()
	return pend
}

// alone is the prediction for job j running on part p by itself: the
// option's times recomputed with the run-time model of the current
// snapshot. The ledger's lock held, inside a cycle.
func (dp *dispatcher) alone(j *Job, p policy.Part, o policy.Option) policy.Option {
	pj := dp.policyJob(j)
	o.Parts = []policy.Part{p}
	o.Runtime = dp.snap.Runtime(&pj, o.Parts)
	o.Transfer = dp.snap.Transfer(&pj, o.Parts)
	return o
}

// partNames is the names of the sites of parts.
func partNames(names []string, parts []policy.Part) []string {
	out := make([]string, len(parts))
	for k, p := range parts {
		out[k] = names[p.Site]
	}
	return out
}
