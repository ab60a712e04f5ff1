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
	"github.com/gridsub/gridsub/policy/reserve"
)

// Advance reservations (SPEC.md §2, DRRM). A job that asks for a window is
// not queued: Submit runs the admission test of the resource–reservation
// graph over the sites and answers at once (Reserved, or Rejected with the
// test's reason). Nothing is booked at any site then. BindReservations,
// shortly before the window opens, binds the reservation to the site the
// graph picks with the state of that moment (delaying within the slack, or
// restarting grid jobs when it must), creates the site's native reservation
// and submits the job into it. The native reservation is deleted when the
// job ends.
//
// Each site is one resource of the graph, with its node count as capacity;
// a reservation needs its nodes on one site (no co-allocation).

// capacityWait is how long admission waits for the sites' node counts.
const capacityWait = 5 * time.Second

// learnCapacity asks every site its node count before admission decides on
// it (b.mu not held): a site not known yet becomes a resource of the graph,
// one that grew or shrank since it was last asked has its new count there
// (the reservations a shrink can no longer hold fail now). A site that does
// not answer within capacityWait keeps what the graph knows of it (a
// request is not held up by a site that is down); binding applies the
// failure rule to it.
func (b *Broker) learnCapacity(ctx context.Context, now time.Time) {
	ask, cancel := context.WithTimeout(ctx, capacityWait)
	defer cancel()
	nodes, errs := b.siteNodes(ask, func(int) bool { return true })
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.sites {
		if errs[s] == nil {
			b.learned(ctx, now, s, nodes[s])
		}
	}
}

// siteNodes asks the sites that ask selects for their Info (b.mu not held):
// each one's node count, or why it could not be had.
func (b *Broker) siteNodes(ctx context.Context, ask func(s int) bool) ([]int, []error) {
	nodes := make([]int, len(b.sites))
	errs := make([]error, len(b.sites))
	b.eachSite(func(s int) {
		if !ask(s) {
			return
		}
		in, err := b.sites[s].Backend.Info(ctx)
		if err == nil && in == nil {
			err = fmt.Errorf("%w: no site info", backends.ErrBadOutput)
		}
		if err != nil {
			errs[s] = err
			return
		}
		nodes[s] = in.Nodes
	})
	return nodes, errs
}

// learned records a site's node count and makes the site a resource of the
// graph (again, after a failure). A site already in the graph whose count
// changed (nodes drained or added) gets the new count there too, and the
// jobs still waiting for the reservations a shrink dropped fail with the
// reason. It returns how many failed. b.mu held.
func (b *Broker) learned(ctx context.Context, now time.Time, s, nodes int) int {
	if nodes <= 0 || (b.capacity[s] == nodes && !b.resFailed[s]) {
		return 0
	}
	was, fresh := b.capacity[s], b.capacity[s] == 0 || b.resFailed[s]
	b.capacity[s] = nodes
	b.resFailed[s] = false
	if b.rrg == nil {
		return 0 // built on first use from every known capacity
	}
	if fresh {
		b.rrg.AddResource(reserve.Resource{Name: b.names[s], Capacity: nodes, Cost: 1})
		return 0
	}
	dropped := b.rrg.SetCapacity(b.names[s], nodes)
	if len(dropped) == 0 {
		return 0
	}
	b.log.Warn("site shrank: reservations re-admitted", "site", b.names[s], "was", was, "now", nodes, "dropped", len(dropped))
	return b.failDropped(ctx, now, dropped, fmt.Sprintf("site %s shrank from %d to %d nodes and the admission test, re-run, no longer holds the reservation", b.names[s], was, nodes))
}

// failDropped fails, with why, the jobs still waiting for the reservations
// the graph dropped, and returns how many. b.mu held.
func (b *Broker) failDropped(ctx context.Context, now time.Time, dropped []string, why string) int {
	n := 0
	for _, id := range dropped {
		j := b.jobs[id]
		if j == nil || j.State != Reserved {
			continue // running in its reservation: tracking decides its fate
		}
		b.failReserved(ctx, j, now, why)
		n++
	}
	return n
}

// graph returns the resource–reservation graph, built on first use. b.mu held.
func (b *Broker) graph() policy.ReservationBook {
	if b.rrg == nil {
		var res []reserve.Resource
		for s, n := range b.capacity {
			if n > 0 && !b.resFailed[s] {
				res = append(res, reserve.Resource{Name: b.names[s], Capacity: n, Cost: 1})
			}
		}
		b.rrg = b.admission().NewBook(res, 0)
	}
	return b.rrg
}

// checkWindow validates a request's reservation window at submission.
func checkWindow(req *Request, now time.Time) error {
	w := req.Window
	switch {
	case w.Earliest.IsZero() || w.Latest.IsZero():
		return fmt.Errorf("%w: a reservation window needs both its earliest start and its latest end", ErrBadRequest)
	case w.Latest.Sub(w.Earliest) < req.Estimate:
		return fmt.Errorf("%w: the reservation window %s..%s (%s) is shorter than the walltime %s",
			ErrBadRequest, w.Earliest.Format(time.RFC3339), w.Latest.Format(time.RFC3339), w.Latest.Sub(w.Earliest), req.Estimate)
	case w.Latest.Add(-req.Estimate).Before(now):
		return fmt.Errorf("%w: the reservation window ends at %s: a %s job can no longer fit in it",
			ErrBadRequest, w.Latest.Format(time.RFC3339), req.Estimate)
	}
	return nil
}

// admit runs the admission test for a new job that asked for a window and
// sets its state: Reserved, or Rejected with the test's reason. b.mu held.
func (b *Broker) admit(j *Job, now time.Time) {
	w := j.Req.Window
	j.Resv = &Reservation{Earliest: w.Earliest, Latest: w.Latest, Name: ResvName(j.ID)}
	st := b.graph().Admit(b.resvRequest(j), now, b.gridRunning(now))
	ok, why := st.Code == policy.Success, strings.Join(st.Reasons, "; ")
	if !ok {
		j.State, j.End, j.Reason = Rejected, now, "reservation not admitted: "+why
		j.Resv.State, j.Resv.Reason = ResvFailed, why
		b.addEvent(j, now, "rejected", "", j.Reason)
		return
	}
	j.State, j.Resv.State = Reserved, ResvAdmitted
	flex := 0.0
	if span := w.Latest.Sub(w.Earliest); span > 0 {
		flex = float64(span-j.Req.Estimate) / float64(span)
	}
	b.addEvent(j, now, "admitted", "", fmt.Sprintf("advance reservation admitted: %d node(s) for %s within %s..%s (flexibility %.2f); a site is chosen when the window opens",
		j.Req.Nodes, j.Req.Estimate, w.Earliest.Format(time.RFC3339), w.Latest.Format(time.RFC3339), flex))
}

func (b *Broker) resvRequest(j *Job) reserve.Request {
	return reserve.Request{ID: j.ID, ET: j.Resv.Earliest, LT: j.Resv.Latest, Dur: j.Req.Estimate,
		Width: j.Req.Nodes, Allowed: b.shapeAllowed(j)}
}

// waitReserved puts a job back to wait for (or inside) its reservation.
// b.mu held.
func (b *Broker) waitReserved(j *Job) {
	j.State = Reserved
	if !slices.Contains(b.reserved, j.ID) {
		b.reserved = append(b.reserved, j.ID)
	}
}

// dropResv ends a job's reservation: out of the graph and, once created,
// deleted at its site (after the lock is released: releaseNative). b.mu held.
func (b *Broker) dropResv(j *Job, st ResvState, why string) {
	r := j.Resv
	if r == nil || r.State == ResvReleased || r.State == ResvFailed {
		return
	}
	if b.rrg != nil {
		b.rrg.Remove(j.ID)
	}
	if r.State == ResvBinding || r.State == ResvBound {
		id := r.Native
		if id == "" {
			id = backends.ResvID(r.Name)
		}
		b.releases = append(b.releases, release{job: j.ID, site: r.Site, id: id})
	}
	r.State = st
	if why != "" {
		r.Reason = why
	}
}

type release struct {
	job, site string
	id        backends.ResvID
}

// releaseNative deletes the native reservations of jobs that ended (b.mu
// not held).
func (b *Broker) releaseNative(ctx context.Context, now time.Time) {
	b.mu.Lock()
	rs := b.releases
	b.releases = nil
	b.mu.Unlock()
	for _, r := range rs {
		s, ok := b.siteIdx[r.site]
		if !ok {
			continue
		}
		rv, ok := backends.AsReserver(b.sites[s].Backend)
		if !ok {
			continue
		}
		err := rv.DeleteReservation(ctx, r.id)
		b.markStale(s)
		b.mu.Lock()
		if j := b.jobs[r.job]; j != nil {
			if err != nil {
				b.addEvent(j, now, "release-failed", r.site, fmt.Sprintf("deleting reservation %s: %v", r.id, err))
			} else {
				b.addEvent(j, now, "released", r.site, fmt.Sprintf("reservation %s deleted", r.id))
			}
			_ = b.persist(ctx, j)
		}
		b.mu.Unlock()
	}
}

// BindReport says what one BindReservations call did.
type BindReport struct {
	Bound, Submitted, Failed, Preempted int
	Errors                              []error
}

// BindReservations binds the admitted reservations whose window opens within
// Options.BindLead of now (DRRM's late binding, SPEC.md §2), creates their
// native reservations and submits their jobs into them. A reservation whose
// site failed is dropped per the graph's failure rule, and so is one whose
// window can no longer hold it. Call it periodically (the daemon's
// reservation_binding task; the embedded broker every cycle).
func (b *Broker) BindReservations(ctx context.Context, now time.Time) (BindReport, error) {
	b.cycleMu.Lock()
	defer b.cycleMu.Unlock()
	defer b.flushEvents()
	defer b.dropEnded()
	var rep BindReport
	b.mu.Lock()
	b.reserved = slices.DeleteFunc(b.reserved, func(id string) bool { j := b.jobs[id]; return j == nil || j.State != Reserved })
	var due []string
	for _, id := range b.reserved {
		if r := b.jobs[id].Resv; r.State != ResvAdmitted || !now.Before(r.Earliest.Add(-b.opts.BindLead)) {
			due = append(due, id)
		}
	}
	b.mu.Unlock()
	if len(due) == 0 {
		return rep, nil
	}
	b.refreshResources(ctx, now, &rep)
	b.mu.Lock()
	slices.SortStableFunc(due, func(x, y string) int { return b.jobs[x].Resv.Earliest.Compare(b.jobs[y].Resv.Earliest) })
	b.mu.Unlock()
	for _, id := range due {
		b.mu.Lock()
		j := b.jobs[id]
		st, rst := j.State, j.Resv.State
		b.mu.Unlock()
		if st != Reserved {
			continue
		}
		switch rst {
		case ResvAdmitted:
			b.bindOne(ctx, j, now, &rep)
		case ResvBinding:
			b.settleBinding(ctx, j, now, &rep)
		}
		b.mu.Lock()
		ready := j.State == Reserved && j.Resv.State == ResvBound
		b.mu.Unlock()
		if ready {
			b.submitReserved(ctx, j, now, &rep)
		}
	}
	b.releaseNative(ctx, now)
	return rep, nil
}

// refreshResources asks every site how it is: a site that does not answer
// has failed for the graph (its reservations are re-admitted per the
// failure rule; the ones that no longer pass fail), one that answers again
// is a resource again.
func (b *Broker) refreshResources(ctx context.Context, now time.Time, rep *BindReport) {
	nodes, errs := b.siteNodes(ctx, func(int) bool { return true })
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.graph()
	for s := range b.sites {
		if errs[s] == nil {
			rep.Failed += b.learned(ctx, now, s, nodes[s])
			continue
		}
		if b.capacity[s] == 0 || b.resFailed[s] {
			continue
		}
		b.resFailed[s] = true
		dropped := g.FailResource(b.names[s])
		b.log.Warn("site failed: reservations re-admitted", "site", b.names[s], "err", errs[s], "dropped", len(dropped))
		rep.Failed += b.failDropped(ctx, now, dropped, fmt.Sprintf("site %s failed (%v) and the admission test, re-run without it, no longer holds the reservation", b.names[s], errs[s]))
	}
}

// failReserved fails a job still waiting for its reservation. b.mu held.
func (b *Broker) failReserved(ctx context.Context, j *Job, now time.Time, why string) {
	b.dropResv(j, ResvFailed, why)
	j.State, j.Reason, j.End = Failed, "reservation failed: "+why, now
	b.addEvent(j, now, "failed", j.Resv.Site, j.Reason)
	_ = b.persist(ctx, j)
}

// gridRunning lists the running grid jobs at every site as the graph sees
// non-reserved work: what binding may wait for or restart. b.mu held.
func (b *Broker) gridRunning(now time.Time) []reserve.Running {
	var out []reserve.Running
	for _, id := range b.live {
		j := b.jobs[id]
		if j.Resv != nil || (j.State != Dispatched && j.State != Running) {
			continue
		}
		expected := j.Predicted.Runtime + j.Predicted.Transfer
		if expected <= 0 {
			expected = j.Req.Estimate
		}
		for _, c := range j.Comps {
			if c.State != backends.StateRunning || c.Start.IsZero() {
				continue
			}
			out = append(out, reserve.Running{Resource: c.Site, Job: j.ID, Nodes: c.Nodes,
				Expected: expected, Elapsed: max(now.Sub(c.Start), 0)})
		}
	}
	return out
}

// bindOne binds one admitted reservation and creates its native
// reservation.
func (b *Broker) bindOne(ctx context.Context, j *Job, now time.Time, rep *BindReport) {
	b.mu.Lock()
	if now.Add(j.Req.Estimate).After(j.Resv.Latest) {
		b.failReserved(ctx, j, now, fmt.Sprintf("its window closes at %s, too late for %s from now", j.Resv.Latest.Format(time.RFC3339), j.Req.Estimate))
		rep.Failed++
		b.mu.Unlock()
		return
	}
	at := now
	if at.Before(j.Resv.Earliest) {
		at = j.Resv.Earliest
	}
	bd, err := b.graph().Bind(j.ID, at, b.gridRunning(now))
	if err != nil {
		b.failReserved(ctx, j, now, err.Error())
		rep.Failed++
		b.mu.Unlock()
		return
	}
	s, ok := b.siteIdx[bd.Resource]
	if !ok {
		b.failReserved(ctx, j, now, fmt.Sprintf("the graph bound it to %q, which is no site of this broker", bd.Resource))
		rep.Failed++
		b.mu.Unlock()
		return
	}
	// Write-ahead intent: where the native reservation is about to be made.
	r := j.Resv
	r.State, r.Site, r.Start, r.Reason, r.Preempted, r.Cost = ResvBinding, bd.Resource, bd.Start, bd.Reason, slices.Clone(bd.Preempt), bd.Cost
	msg := fmt.Sprintf("binding to %s from %s", bd.Resource, bd.Start.Format(time.RFC3339))
	if bd.Reason != "" {
		msg += ": " + bd.Reason
	}
	b.addEvent(j, now, "binding", bd.Resource, msg)
	if err := b.persist(ctx, j); err != nil {
		r.State, r.Site = ResvAdmitted, ""
		rep.Errors = append(rep.Errors, fmt.Errorf("job %s: recording the binding intent: %w", j.ID, err))
		b.mu.Unlock()
		return
	}
	// Restart (not resume) the grid jobs in the way: cancelled at their
	// sites and queued again at their FCFS place.
	var cancels []cancelReq
	for _, pid := range bd.Preempt {
		p := b.jobs[pid]
		if p == nil || (p.State != Dispatched && p.State != Running) {
			continue
		}
		for _, c := range p.Comps {
			if !c.State.Final() {
				cancels = append(cancels, cancelReq{p.ID, c.Site, c.RemoteID, "preempted by the advance reservation of " + j.ID})
			}
		}
		b.requeueAs(p, now, "preempted", fmt.Sprintf("attempt %d restarted: its nodes at %s go to the advance reservation of %s", p.Attempts, bd.Resource, j.ID))
		rep.Preempted++
	}
	b.compactLive()
	b.mu.Unlock()
	b.doCancels(ctx, now, cancels)

	rv, ok := backends.AsReserver(b.sites[s].Backend)
	if !ok {
		b.mu.Lock()
		b.failReserved(ctx, j, now, fmt.Sprintf("site %s cannot make advance reservations", bd.Resource))
		rep.Failed++
		b.mu.Unlock()
		return
	}
	start := bd.Start
	if start.Before(now) {
		start = now
	}
	id, err := rv.CreateReservation(ctx, &backends.ReservationSpec{Name: r.Name, Start: start, Duration: ceilSecond(j.Req.Estimate), Nodes: j.Req.Nodes})
	b.markStale(s)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		if backends.Retryable(err) && !errors.Is(err, backends.ErrRejected) {
			// The site could not be asked: the intent stays, settled next time.
			rep.Errors = append(rep.Errors, fmt.Errorf("job %s: reserving at %s: %w", j.ID, bd.Resource, err))
			b.addEvent(j, now, "binding-retry", bd.Resource, fmt.Sprintf("creating the reservation: %v; asked again at the next binding", err))
			_ = b.persist(ctx, j)
			return
		}
		r.State = ResvFailed // nothing was created: nothing to delete
		b.rrg.Remove(j.ID)
		j.State, j.Reason, j.End = Failed, fmt.Sprintf("reservation failed: site %s refused it: %v", bd.Resource, err), now
		b.addEvent(j, now, "failed", bd.Resource, j.Reason)
		_ = b.persist(ctx, j)
		rep.Failed++
		return
	}
	r.State, r.Native = ResvBound, id
	b.addEvent(j, now, "bound", bd.Resource, fmt.Sprintf("reservation %s at %s: %d node(s) from %s for %s", id, bd.Resource, j.Req.Nodes, start.Format(time.RFC3339), ceilSecond(j.Req.Estimate)))
	_ = b.persist(ctx, j)
	rep.Bound++
}

// settleBinding resolves a binding intent a crash (or an unreachable site)
// left open: the reservation is looked up by its tagged name.
func (b *Broker) settleBinding(ctx context.Context, j *Job, now time.Time, rep *BindReport) {
	b.mu.Lock()
	r := j.Resv
	site, name := r.Site, r.Name
	b.mu.Unlock()
	s, ok := b.siteIdx[site]
	var rv backends.Reserver
	if ok {
		rv, ok = backends.AsReserver(b.sites[s].Backend)
	}
	if !ok {
		b.mu.Lock()
		b.failReserved(ctx, j, now, fmt.Sprintf("site %q cannot make advance reservations", site))
		rep.Failed++
		b.mu.Unlock()
		return
	}
	got, err := rv.ShowReservation(ctx, backends.ResvID(name))
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err == nil:
		r.State, r.Native = ResvBound, got.ID
		b.addEvent(j, now, "bound", site, fmt.Sprintf("reservation %s found at %s after a restart", got.ID, site))
		rep.Bound++
	case errors.Is(err, backends.ErrRejected):
		// Never created: bind again (the graph still holds it admitted
		// after a restart; in a running broker it is bound there, so it is
		// re-admitted first).
		r.State, r.Site = ResvAdmitted, ""
		b.rrg.Remove(j.ID)
		if st := b.rrg.Admit(b.resvRequest(j), now, b.gridRunning(now)); st.Code != policy.Success {
			why := strings.Join(st.Reasons, "; ")
			b.failReserved(ctx, j, now, "re-admission after a binding that never reached the site: "+why)
			rep.Failed++
			return
		}
		b.addEvent(j, now, "binding-retry", site, "the reservation never reached the site; bound again at the next binding")
	default:
		rep.Errors = append(rep.Errors, fmt.Errorf("job %s: looking up reservation %s at %s: %w", j.ID, name, site, err))
		return
	}
	_ = b.persist(ctx, j)
}

// submitReserved submits a job into its bound reservation, with the same
// write-ahead intent as any dispatch.
func (b *Broker) submitReserved(ctx context.Context, j *Job, now time.Time, rep *BindReport) {
	b.mu.Lock()
	r := j.Resv
	s := b.siteIdx[r.Site]
	j.Attempts++
	opt := policy.Option{Parts: []policy.Part{{Site: s, Nodes: j.Req.Nodes}}, Start: r.Start, Runtime: j.Req.Estimate}
	j.Predicted, j.SiteNames = opt, b.names
	b.addEvent(j, now, "dispatch", "", fmt.Sprintf("attempt %d: submitting into reservation %s at %s", j.Attempts, r.Native, r.Site))
	j.State = Submitting
	j.Comps = []Component{{Site: r.Site, Nodes: j.Req.Nodes, State: backends.StateUnknown, ExitCode: -1}}
	if err := b.persist(ctx, j); err != nil {
		j.State, j.Comps, j.Attempts = Reserved, nil, j.Attempts-1
		rep.Errors = append(rep.Errors, fmt.Errorf("job %s: recording the dispatch intent: %w", j.ID, err))
		b.mu.Unlock()
		return
	}
	sp := b.spec(j, 0, 1, r.Site, j.Req.Nodes, opt)
	sp.Reservation = string(r.Native)
	b.mu.Unlock()
	var crep CycleReport
	b.submitParts(ctx, now, j.ID, policy.Decision{Job: j.ID, Action: policy.Start, Chosen: opt}, []*backends.JobSpec{sp}, &crep)
	rep.Submitted += crep.Started
	rep.Errors = append(rep.Errors, crep.Errors...)
}
