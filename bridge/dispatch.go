package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// dispatch acts on a plan: every decision is recorded on the job before the
// remote call, and the job's queue position is given up only once the
// outcome is known. The submissions go out after the plan's last decision
// is recorded, batched per site where a site can (submitPending).
func (b *Broker) dispatch(ctx context.Context, now time.Time, plan *policy.Plan, rep *CycleReport) {
	names := b.names
	var intents, pend []pendingSubmit
	defer func() { b.sub.submitPending(ctx, now, pend, rep) }()
	b.mu.Lock()
	b.startGroup() // rejections and reservations are written after the intents, together
	b.mu.Unlock()
	for _, d := range plan.Decisions {
		b.mu.Lock()
		j, ok := b.jobs[d.Job]
		if !ok || j.State != Queued {
			b.mu.Unlock()
			continue
		}
		switch d.Action {
		case policy.Reject:
			j.State, j.Reason, j.End = Rejected, strings.Join(d.Status.Reasons, "; "), now
			if j.Reason == "" {
				j.Reason = "rejected by policy " + b.opts.Planner.Name()
			}
			b.addEvent(j, now, "rejected", "", j.Reason)
			b.dequeue(j.ID)
			b.persistLater(ctx, j)
			rep.Rejected++
			b.mu.Unlock()
		case policy.Reserve:
			first := j.Predicted.Parts == nil
			j.Predicted, j.SiteNames = d.Chosen, names
			if first {
				if !b.opts.NoHistory {
					b.addEvent(j, now, "waiting", "", fmt.Sprintf("no placement free now; reserved %s from %s (predicted end %s)",
						partsString(names, d.Chosen.Parts), d.Chosen.Start.Format(time.RFC3339), d.Chosen.End().Format(time.RFC3339)))
				}
				b.persistLater(ctx, j)
			}
			b.mu.Unlock()
		case policy.Start, policy.Replicate:
			if b.copies.copiesFor(j) {
				b.copies.dispatchCopies(ctx, now, j, d, rep) // copies.go; releases b.mu
				continue
			}
			j.Attempts++
			j.Predicted, j.Beaten, j.SiteNames = d.Chosen, d.Beaten, names
			if !b.opts.NoHistory {
				verb := "dispatching to "
				if d.Action == policy.Replicate {
					verb = "replicating to "
				}
				msg := verb + partsString(names, d.Chosen.Parts)
				if d.Backfilled {
					msg += " (backfilled)"
				}
				b.addEvent(j, now, "dispatch", "", fmt.Sprintf("attempt %d: %s", j.Attempts, msg))
			}
			// Write-ahead intent: the job says where it is about to be
			// submitted (and under which tag) before any site hears of it.
			j.State, j.Intent = Submitting, now
			delete(b.restarted, j.ID) // a new intent of this process (recover.go: inFlight)
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
					specs[k] = b.spec(j, 0, 1, names[p.Site], p.Nodes, b.alone(j, p, d.Chosen))
				} else {
					specs[k] = b.spec(j, k, n, names[p.Site], p.Nodes, d.Chosen)
				}
			}
			b.mu.Unlock()
			intents = append(intents, pendingSubmit{id: j.ID, d: d, specs: specs})
		}
	}
	// The intents are written together (one store commit for many, not
	// one fsync per job), before any site hears of the jobs; a job whose
	// intent could not be recorded is not acted on and stays queued.
	b.mu.Lock()
	js := make([]*Job, len(intents))
	for i, ps := range intents {
		js[i] = b.jobs[ps.id]
	}
	for i, err := range b.writeCopies(ctx, js) {
		if err != nil {
			b.log.Error("store write failed", "job", js[i].ID, "err", err)
			j := js[i]
			j.State, j.Comps, j.Attempts = Queued, nil, j.Attempts-1
			rep.Errors = append(rep.Errors, fmt.Errorf("job %s: recording the dispatch intent: %w", j.ID, err))
			continue
		}
		pend = append(pend, intents[i])
	}
	b.flushGroup(ctx)
	b.mu.Unlock()
}

// alone is the prediction for job j running on part p by itself: the
// option's times recomputed with the run-time model of the current
// snapshot. b.mu held, inside a cycle.
func (b *Broker) alone(j *Job, p policy.Part, o policy.Option) policy.Option {
	pj := b.policyJob(j)
	o.Parts = []policy.Part{p}
	o.Runtime = b.snap.Runtime(&pj, o.Parts)
	o.Transfer = b.snap.Transfer(&pj, o.Parts)
	return o
}

// submitParts submits every component. If any submission fails, the ones that
// succeeded are cancelled and the job goes back to the queue (or fails, when
// the error cannot be cured by waiting or the attempts are used up). A
// replicated job only needs one copy to be accepted.
func (sm *submitter) submitParts(ctx context.Context, now time.Time, id string, d policy.Decision, specs []*backends.JobSpec, rep *CycleReport) {
	reqs := make([]submitReq, len(specs))
	for k, p := range d.Chosen.Parts {
		reqs[k] = submitReq{p.Site, specs[k]}
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
			sm.addEvent(j, now, "submit-failed", c.Site, errs[k].Error())
			if firstErr == nil {
				firstErr = errs[k]
			}
			continue
		}
		if !sm.opts.NoHistory {
			sm.addEvent(j, now, "submitted-remote", c.Site, fmt.Sprintf("remote job %s (%d node(s))", c.RemoteID, c.Nodes))
		}
		ok = append(ok, c)
	}
	if firstErr == nil || (d.Action == policy.Replicate && len(ok) > 0) {
		j.Comps, j.State = ok, Dispatched
		for _, c := range ok {
			sm.where[compKey{sm.siteIdx[c.Site], c.RemoteID}] = id
		}
		sm.dequeue(id)
		sm.live = append(sm.live, id)
		sm.persistLater(ctx, j)
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
			sm.addEvent(j, now, "retry-later", "", fmt.Sprintf("submission into the reservation failed (%v); tried again at the next binding", firstErr))
		} else {
			j.State = Queued
			sm.addEvent(j, now, "retry-later", "", fmt.Sprintf("submission failed (%v); stays queued", firstErr))
		}
	} else {
		why := fmt.Sprintf("submission failed: %v", firstErr)
		if len(j.Refused) > 1 {
			why = "every allowed site refused the job: " + refusedText(j)
		}
		if !backends.Retryable(firstErr) && !errors.Is(firstErr, context.Canceled) {
			why += " (not retryable)"
		}
		j.State, j.Reason, j.End = Failed, why, now
		sm.addEvent(j, now, "failed", "", why)
		sm.dequeue(id)
		sm.dropResv(j, ResvFailed, why)
	}
	sm.persistLater(ctx, j)
	rep.Errors = append(rep.Errors, fmt.Errorf("job %s: %w", id, firstErr))
	sm.mu.Unlock()
	sm.duties.doCancels(ctx, now, undo)
}

// dequeue removes a job from the global queue. b.mu held.
func (l *ledger) dequeue(id string) {
	if i := slices.Index(l.queue, id); i >= 0 {
		l.queue = slices.Delete(l.queue, i, i+1)
		l.pq = slices.Delete(l.pq, i, i+1)
	}
}

// Cancel cancels a job: a queued job leaves the queue, a dispatched or
// running job is cancelled at every site.
func (b *Broker) Cancel(ctx context.Context, id string, now time.Time) error {
	b.cycleMu.Lock()
	defer b.cycleMu.Unlock()
	defer b.flushEvents()
	defer b.dropEnded()
	b.mu.Lock()
	j, ok := b.jobs[id]
	if !ok {
		b.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if j.State.Final() {
		b.mu.Unlock()
		return fmt.Errorf("%w: %s is %s", ErrFinal, id, j.State)
	}
	var cs []cancelReq
	for _, c := range j.Comps {
		if !c.State.Final() && c.RemoteID != "" { // a passive backup was never submitted
			cs = append(cs, cancelReq{id, c.Site, c.RemoteID, "cancelled by the user"})
		}
	}
	j.State, j.End, j.Reason, j.Waiting = Cancelled, now, "cancelled by the user", ""
	b.addEvent(j, now, "cancelled", "", "cancelled by the user")
	if j.Group != nil {
		cs = append(cs, b.grp.cancelKids(ctx, j, now)...) // group.go
	}
	b.dequeue(id)
	b.resv.dropResv(j, ResvReleased, "cancelled by the user")
	b.compactLive()
	err := b.persist(ctx, j)
	b.mu.Unlock()
	b.duties.doCancels(ctx, now, cs)
	b.resv.releaseNative(ctx, now)
	return err
}

func partsString(names []string, parts []policy.Part) string {
	var sb strings.Builder
	for i, p := range parts {
		if i > 0 {
			sb.WriteByte('+')
		}
		fmt.Fprintf(&sb, "%s:%d", names[p.Site], p.Nodes)
	}
	return sb.String()
}

// PartsString formats a placement as "Beijing:32+Shanghai:16".
func PartsString(names []string, parts []policy.Part) string { return partsString(names, parts) }
