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

// PreemptedReason begins the reason of a job that ran and was put back in
// the queue to make room for an advance reservation; the reserving job's id
// follows. It is cleared when the job is dispatched again.
const PreemptedReason = "requeued: preempted by reservation "

// reservations runs the advance reservations: the resource–reservation
// graph, admission, binding, the native reservations. Guarded by the
// ledger's lock.
type reservations struct {
	part
	*duties    // the cancel stage, for the grid jobs a binding preempts
	*submitter // the submit stage, for a job bound to its reservation

	rrg       admissionsBook      // admitted reservations over the sites (policies.go); built on first use
	resFailed []bool              // site taken out of the graph after it failed
	releases  []release           // native reservations to delete
	runBooked map[string]int      // grid jobs started with a booking in the graph: parts booked (reserve_guard.go)
	heldOff   map[string][]string // queued jobs kept off sites the graph refused them, while reservations are pending
}

// capacityWait is how long admission waits for the sites' node counts.
const capacityWait = 5 * time.Second

// learnCapacity asks every site its node count before admission decides on
// it (the ledger's lock not held): a site not known yet becomes a resource of the graph,
// one that grew or shrank since it was last asked has its new count there
// (the reservations a shrink can no longer hold fail now). A site that does
// not answer within capacityWait keeps what the graph knows of it (a
// request is not held up by a site that is down); binding applies the
// failure rule to it.
func (rsv *reservations) learnCapacity(ctx context.Context, now time.Time) {
	ask, cancel := context.WithTimeout(ctx, capacityWait)
	defer cancel()
	nodes, errs := rsv.siteNodes(ask, func(int) bool { return true })
	rsv.mu.Lock()
	defer rsv.mu.Unlock()
	for s := range rsv.sites {
		if errs[s] == nil {
			rsv.learned(ctx, now, s, nodes[s])
		}
	}
}

// learned records a site's node count and makes the site a resource of the
// graph (again, after a failure). A site already in the graph whose count
// changed (nodes drained or added) gets the new count there too, and the
// jobs still waiting for the reservations a shrink dropped fail with the
// reason. It returns how many failed. The ledger's lock held.
func (rsv *reservations) learned(ctx context.Context, now time.Time, s, nodes int) int {
	if nodes <= 0 || (rsv.capacity[s] == nodes && !rsv.resFailed[s]) {
		return 0
	}
	was, fresh := rsv.capacity[s], rsv.capacity[s] == 0 || rsv.resFailed[s]
	rsv.capacity[s] = nodes
	rsv.resFailed[s] = false
	if rsv.rrg == nil {
		return 0 // built on first use from every known capacity
	}
	if fresh {
		rsv.rrg.AddResource(reserve.Resource{Name: rsv.names[s], Capacity: nodes, Cost: 1})
		return 0
	}
	dropped := rsv.rrg.SetCapacity(rsv.names[s], nodes)
	if len(dropped) == 0 {
		return 0
	}
	rsv.log.Warn("site shrank: reservations re-admitted", "site", rsv.names[s], "was", was, "now", nodes, "dropped", len(dropped))
	return rsv.failDropped(ctx, now, dropped, fmt.Sprintf("site %s shrank from %d to %d nodes and the admission test, re-run, no longer holds the reservation", rsv.names[s], was, nodes))
}

// failDropped fails, with why, the jobs still waiting for the reservations
// the graph dropped, and returns how many. The ledger's lock held.
func (rsv *reservations) failDropped(ctx context.Context, now time.Time, dropped []string, why string) int {
	n := 0
	for _, id := range dropped {
		j := rsv.jobs[id]
		if j == nil || j.State != Reserved {
			continue // running in its reservation: tracking decides its fate
		}
		rsv.failReserved(ctx, j, now, why)
		n++
	}
	return n
}

// graph returns the resource–reservation graph, built on first use. The ledger's lock held.
func (rsv *reservations) graph() policy.ReservationBook {
	if rsv.rrg == nil {
		var res []reserve.Resource
		for s, n := range rsv.capacity {
			if n > 0 && !rsv.resFailed[s] {
				res = append(res, reserve.Resource{Name: rsv.names[s], Capacity: n, Cost: 1})
			}
		}
		rsv.rrg = rsv.opts.admission().NewBook(res, 0)
	}
	return rsv.rrg
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
// sets its state: Reserved, or Rejected with the test's reason. The ledger's lock held.
func (rsv *reservations) admit(j *Job, now time.Time) {
	w := j.Req.Window
	j.Resv = &Reservation{Earliest: w.Earliest, Latest: w.Latest, Name: ResvName(j.ID)}
	st := rsv.graph().Admit(rsv.resvRequest(j), now, rsv.gridRunning(now))
	ok, why := st.Code == policy.Success, strings.Join(st.Reasons, "; ")
	if !ok {
		j.Resv.State, j.Resv.Reason = ResvFailed, why
		rsv.endAs(j, now, Rejected, "rejected", "", "reservation not admitted: "+why)
		return
	}
	j.State, j.Resv.State = Reserved, ResvAdmitted
	flex := 0.0
	if span := w.Latest.Sub(w.Earliest); span > 0 {
		flex = float64(span-j.Req.Estimate) / float64(span)
	}
	rsv.note(j, now, "admitted", "", fmt.Sprintf("advance reservation admitted: %d node(s) for %s within %s..%s (flexibility %.2f); a site is chosen when the window opens",
		j.Req.Nodes, j.Req.Estimate, w.Earliest.Format(time.RFC3339), w.Latest.Format(time.RFC3339), flex))
}

func (rsv *reservations) resvRequest(j *Job) reserve.Request {
	return reserve.Request{ID: j.ID, ET: j.Resv.Earliest, LT: j.Resv.Latest, Dur: j.Req.Estimate,
		Width: j.Req.Nodes, Allowed: rsv.shapeAllowed(j)}
}

// dropResv ends a job's reservation: out of the graph and, once created,
// deleted at its site (after the lock is released: releaseNative). The ledger's lock held.
func (rsv *reservations) dropResv(j *Job, st ResvState, why string) {
	r := j.Resv
	if r == nil || r.State == ResvReleased || r.State == ResvFailed {
		return
	}
	if rsv.rrg != nil {
		rsv.rrg.Remove(j.ID)
	}
	if r.State == ResvBinding || r.State == ResvBound {
		id := r.Native
		if id == "" {
			id = backends.ResvID(r.Name)
		}
		rsv.releases = append(rsv.releases, release{job: j.ID, site: r.Site, id: id})
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

// releaseNative deletes the native reservations of jobs that ended (the ledger's lock
// not held).
func (rsv *reservations) releaseNative(ctx context.Context, now time.Time) {
	rsv.mu.Lock()
	rs := rsv.releases
	rsv.releases = nil
	rsv.mu.Unlock()
	for _, r := range rs {
		s, ok := rsv.siteIdx[r.site]
		if !ok {
			continue
		}
		rv, ok := backends.AsReserver(rsv.sites[s].Backend)
		if !ok {
			continue
		}
		err := rv.DeleteReservation(ctx, r.id)
		rsv.markStale(s)
		rsv.mu.Lock()
		if j := rsv.jobs[r.job]; j != nil {
			kind, msg := "released", fmt.Sprintf("reservation %s deleted", r.id)
			if err != nil {
				kind, msg = "release-failed", fmt.Sprintf("deleting reservation %s: %v", r.id, err)
			}
			rsv.record(ctx, j, now, kind, r.site, msg)
		}
		rsv.mu.Unlock()
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
	b.resv.refreshResources(ctx, now, &rep)
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
			b.resv.bindOne(ctx, j, now, &rep)
		case ResvBinding:
			b.mu.Lock()
			waiting := j.Resv.Waiting
			b.mu.Unlock()
			if waiting {
				b.resv.createNative(ctx, j, now, &rep)
			} else {
				b.resv.settleBinding(ctx, j, now, &rep)
			}
		}
		b.mu.Lock()
		ready := j.State == Reserved && j.Resv.State == ResvBound
		b.mu.Unlock()
		if ready {
			b.resv.submitReserved(ctx, j, now, &rep)
		}
	}
	b.resv.releaseNative(ctx, now)
	return rep, nil
}

// refreshResources asks every site how it is: a site that does not answer
// has failed for the graph (its reservations are re-admitted per the
// failure rule; the ones that no longer pass fail), one that answers again
// is a resource again.
func (rsv *reservations) refreshResources(ctx context.Context, now time.Time, rep *BindReport) {
	nodes, errs := rsv.siteNodes(ctx, func(int) bool { return true })
	rsv.mu.Lock()
	defer rsv.mu.Unlock()
	g := rsv.graph()
	for s := range rsv.sites {
		if errs[s] == nil {
			rep.Failed += rsv.learned(ctx, now, s, nodes[s])
			continue
		}
		if rsv.capacity[s] == 0 || rsv.resFailed[s] {
			continue
		}
		rsv.resFailed[s] = true
		dropped := g.FailResource(rsv.names[s])
		rsv.log.Warn("site failed: reservations re-admitted", "site", rsv.names[s], "err", errs[s], "dropped", len(dropped))
		rep.Failed += rsv.failDropped(ctx, now, dropped, fmt.Sprintf("site %s failed (%v) and the admission test, re-run without it, no longer holds the reservation", rsv.names[s], errs[s]))
	}
}

// failReserved fails a job still waiting for its reservation. The ledger's lock held.
func (rsv *reservations) failReserved(ctx context.Context, j *Job, now time.Time, why string) {
	rsv.dropResv(j, ResvFailed, why)
	rsv.endAs(j, now, Failed, "failed", j.Resv.Site, "reservation failed: "+why)
	_ = rsv.save(ctx, j)
}

// gridRunning lists the running grid jobs at every site as the graph sees
// non-reserved work: what binding may wait for or restart. The ledger's lock held.
func (rsv *reservations) gridRunning(now time.Time) []reserve.Running {
	var out []reserve.Running
	for _, id := range rsv.live {
		j := rsv.jobs[id]
		if j.Resv != nil || (j.State != Dispatched && j.State != Running) || rsv.runBooked[id] > 0 {
			continue // a booked job's nodes are held by its booking (reserve_guard.go)
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
func (rsv *reservations) bindOne(ctx context.Context, j *Job, now time.Time, rep *BindReport) {
	rsv.mu.Lock()
	if now.Add(j.Req.Estimate).After(j.Resv.Latest) {
		rsv.failReserved(ctx, j, now, fmt.Sprintf("its window closes at %s, too late for %s from now", j.Resv.Latest.Format(time.RFC3339), j.Req.Estimate))
		rep.Failed++
		rsv.mu.Unlock()
		return
	}
	at := now
	if at.Before(j.Resv.Earliest) {
		at = j.Resv.Earliest
	}
	bd, err := rsv.graph().Bind(j.ID, at, rsv.gridRunning(now))
	if err != nil {
		rsv.failReserved(ctx, j, now, err.Error())
		rep.Failed++
		rsv.mu.Unlock()
		return
	}
	_, ok := rsv.siteIdx[bd.Resource]
	if !ok {
		rsv.failReserved(ctx, j, now, fmt.Sprintf("the graph bound it to %q, which is no site of this broker", bd.Resource))
		rep.Failed++
		rsv.mu.Unlock()
		return
	}
	// Write-ahead intent: where the native reservation is about to be made.
	r := j.Resv
	r.State, r.Site, r.Start, r.Reason, r.Preempted, r.Cost = ResvBinding, bd.Resource, bd.Start, bd.Reason, slices.Clone(bd.Preempt), bd.Cost
	msg := fmt.Sprintf("binding to %s from %s", bd.Resource, bd.Start.Format(time.RFC3339))
	if bd.Reason != "" {
		msg += ": " + bd.Reason
	}
	if err := rsv.commit(ctx, j, now, "binding", bd.Resource, msg); err != nil {
		r.State, r.Site = ResvAdmitted, ""
		rep.Errors = append(rep.Errors, fmt.Errorf("job %s: recording the binding intent: %w", j.ID, err))
		rsv.mu.Unlock()
		return
	}
	// Restart (not resume) the grid jobs in the way: cancelled at their
	// sites and queued again at their FCFS place.
	var cancels []cancelReq
	for _, pid := range bd.Preempt {
		p := rsv.jobs[pid]
		if p == nil || (p.State != Dispatched && p.State != Running) {
			continue
		}
		for _, c := range p.Comps {
			if !c.State.Final() {
				cancels = append(cancels, cancelReq{p.ID, c.Site, c.RemoteID, "preempted by the advance reservation of " + j.ID})
			}
		}
		p.Reason = fmt.Sprintf("%s%s (its nodes at %s went to the reservation; attempt %d starts again from its place in the queue)",
			PreemptedReason, j.ID, bd.Resource, p.Attempts+1)
		rsv.requeueAs(p, now, "preempted", fmt.Sprintf("attempt %d restarted: its nodes at %s go to the advance reservation of %s", p.Attempts, bd.Resource, j.ID))
		rep.Preempted++
	}
	rsv.compactLive()
	if len(cancels) > 0 {
		// The preempted jobs leave their nodes only once the site has
		// ended them: the reservation is created when the site shows the
		// nodes free (reserve_wait.go), not now, when a batch system
		// still counts them busy and refuses it.
		r.Waiting = true
		rsv.record(ctx, j, now, "binding-wait", bd.Resource, fmt.Sprintf("%d job(s) preempted at %s; the reservation is created once the site shows %d node(s) free", len(bd.Preempt), bd.Resource, j.Req.Nodes))
	}
	rsv.mu.Unlock()
	rsv.duties.doCancels(ctx, now, cancels)
	if len(cancels) == 0 {
		rsv.create(ctx, j, now, rep)
	}
}

// settleBinding resolves a binding intent a crash (or an unreachable site)
// left open: the reservation is looked up by its tagged name.
func (rsv *reservations) settleBinding(ctx context.Context, j *Job, now time.Time, rep *BindReport) {
	rsv.mu.Lock()
	r := j.Resv
	site, name := r.Site, r.Name
	rsv.mu.Unlock()
	s, ok := rsv.siteIdx[site]
	var rv backends.Reserver
	if ok {
		rv, ok = backends.AsReserver(rsv.sites[s].Backend)
	}
	if !ok {
		rsv.mu.Lock()
		rsv.failReserved(ctx, j, now, fmt.Sprintf("site %q cannot make advance reservations", site))
		rep.Failed++
		rsv.mu.Unlock()
		return
	}
	got, err := rv.ShowReservation(ctx, backends.ResvID(name))
	rsv.mu.Lock()
	defer rsv.mu.Unlock()
	switch {
	case err == nil:
		r.State, r.Native = ResvBound, got.ID
		rsv.record(ctx, j, now, "bound", site, fmt.Sprintf("reservation %s found at %s after a restart", got.ID, site))
		rep.Bound++
	case errors.Is(err, backends.ErrRejected):
		// Never created: bind again (the graph still holds it admitted
		// after a restart; in a running broker it is bound there, so it is
		// re-admitted first).
		r.State, r.Site = ResvAdmitted, ""
		rsv.rrg.Remove(j.ID)
		if st := rsv.rrg.Admit(rsv.resvRequest(j), now, rsv.gridRunning(now)); st.Code != policy.Success {
			why := strings.Join(st.Reasons, "; ")
			rsv.failReserved(ctx, j, now, "re-admission after a binding that never reached the site: "+why)
			rep.Failed++
			return
		}
		rsv.record(ctx, j, now, "binding-retry", site, "the reservation never reached the site; bound again at the next binding")
	default:
		rep.Errors = append(rep.Errors, fmt.Errorf("job %s: looking up reservation %s at %s: %w", j.ID, name, site, err))
	}
}

// submitReserved submits a job into its bound reservation, with the same
// write-ahead intent as any dispatch.
func (rsv *reservations) submitReserved(ctx context.Context, j *Job, now time.Time, rep *BindReport) {
	rsv.mu.Lock()
	r := j.Resv
	s := rsv.siteIdx[r.Site]
	j.Attempts++
	opt := policy.Option{Parts: []policy.Part{{Site: s, Nodes: j.Req.Nodes}}, Start: r.Start, Runtime: j.Req.Estimate}
	j.Predicted, j.SiteNames = opt, rsv.names
	rsv.note(j, now, "dispatch", "", fmt.Sprintf("attempt %d: submitting into reservation %s at %s", j.Attempts, r.Native, r.Site))
	j.State = Submitting
	j.Comps = []Component{{Site: r.Site, Nodes: j.Req.Nodes, State: backends.StateUnknown, ExitCode: -1}}
	if err := rsv.save(ctx, j); err != nil {
		j.State, j.Comps, j.Attempts = Reserved, nil, j.Attempts-1
		rep.Errors = append(rep.Errors, fmt.Errorf("job %s: recording the dispatch intent: %w", j.ID, err))
		rsv.mu.Unlock()
		return
	}
	sp := rsv.spec(j, 0, 1, r.Site, j.Req.Nodes, opt)
	sp.Reservation = string(r.Native)
	rsv.mu.Unlock()
	var crep CycleReport
	rsv.submitParts(ctx, now, j.ID, rsv.identityOwner(j), policy.Decision{Job: j.ID, Action: policy.Start, Chosen: opt}, []*backends.JobSpec{sp}, &crep)
	rep.Submitted += crep.Started
	rep.Errors = append(rep.Errors, crep.Errors...)
}
