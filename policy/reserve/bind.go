package reserve

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Running is a non-reserved job occupying nodes of a resource at binding
// time (Nodes 0 means 1; Expected is et_kj, Elapsed pt_kj).
type Running = policy.ResvRunning

// Binding is deleteEdge's answer for one reservation at its start.
type Binding = policy.ResvBinding

// hold is a block of nodes a bound reservation holds over [start, end).
type hold struct {
	start, end time.Time
	nodes      int
}

// heldOver sums the nodes of every hold that meets q's window: deleteEdge
// keeps q's edge to a resource only if its capacity less this still holds q.
func heldOver(holds []hold, q Request) int {
	n := 0
	for _, h := range holds {
		if h.start.Before(q.LT) && h.end.After(q.ET) {
			n += h.nodes
		}
	}
	return n
}

// job is a running non-reserved job as place sees it.
type job struct {
	id      string
	nodes   int
	end     time.Time
	elapsed time.Duration
}

// option is what one resource offers a reservation. Its reason is kept as
// the values it names and formatted by reason() only for the option a
// caller reports: place runs for every candidate, and most are never named.
type option struct {
	ok      bool
	delayed bool // start found without preemption (cost 0)
	start   time.Time
	preempt []string
	cost    float64

	why   whyKind
	name  string        // the resource
	w, c  int           // nodes needed, the resource's capacity
	n     int           // whyHeld: nodes the holds take; whyPreempt: nodes freed
	delay time.Duration // whyLater: how much later than the window's first start
}

// whyKind says which of place's outcomes an option is, for its reason.
type whyKind int

const (
	whyNone    whyKind = iota
	whyFree            // fits at the start, no preemption
	whyLater           // fits later within the slack, no preemption
	whyHeld            // bound reservations leave no room
	whyPreempt         // fits at the start by preempting
)

// reason says why the option is what it is (empty for a zero option).
func (o option) reason() string {
	switch o.why {
	case whyFree:
		return fmt.Sprintf("%s: the %d nodes needed (of its %d) are free at the start", o.name, o.w, o.c)
	case whyLater:
		return fmt.Sprintf("%s: starts %v later, when the %d nodes needed (of its %d) are free, within the slack", o.name, o.delay, o.w, o.c)
	case whyHeld:
		return fmt.Sprintf("%s: bound reservations hold %d of %d nodes during the window, %d needed", o.name, o.n, o.c, o.w)
	case whyPreempt:
		return fmt.Sprintf("%s: no start within the slack frees %d of %d nodes; preempting %s frees %d for cost %g",
			o.name, o.w, o.c, strings.Join(o.preempt, ", "), o.n, o.cost)
	}
	return ""
}

// place computes what resource r offers a reservation of width w and duration
// dur that may start in [s0, latest], given the holds of bound reservations
// on r and the jobs running on r at now (each ends at now + max(0,
// Expected-Elapsed); a job past its expected time counts as ending now).
//
// Without preemption: the earliest start s in [s0, latest] at which, over [s,
// s+dur), the running jobs not yet ended plus the holds plus w never exceed
// r's capacity. With preemption (only when there is no such s): start at s0,
// keep the holds, and preempt the cheapest set of jobs running at s0 such that
// the kept ones, counted as busy over the whole [s0, s0+dur), fit beside w and
// the largest sum of holds over that interval; the cost is w_r · Σ elapsed
// seconds of the preempted jobs at s0 (Elapsed + s0-now), an exact minimum by
// a covering knapsack over nodes.
func place(r Resource, holds []hold, w int, s0, latest time.Time, dur time.Duration, now time.Time, running []Running) option {
	c := capacityOf(r)
	var jobs []job
	for _, x := range running {
		if x.Resource != r.Name {
			continue
		}
		n := x.Nodes
		if n < 1 {
			n = 1
		}
		jobs = append(jobs, job{id: x.Job, nodes: n, end: now.Add(max(0, x.Expected-x.Elapsed)), elapsed: max(0, x.Elapsed)})
	}
	slices.SortStableFunc(jobs, func(a, b job) int { return strings.Compare(a.id, b.id) })

	holdsAt := func(t time.Time) int {
		u := 0
		for _, h := range holds {
			if !h.start.After(t) && h.end.After(t) {
				u += h.nodes
			}
		}
		return u
	}
	jobsAt := func(t time.Time) int {
		u := 0
		for _, j := range jobs {
			if j.end.After(t) {
				u += j.nodes
			}
		}
		return u
	}
	// usage is piecewise constant: jobs only end, holds change at their
	// bounds, so checking s and every hold start inside (s, s+dur) suffices.
	peak := func(s time.Time, withJobs bool) int {
		e := s.Add(dur)
		at := func(t time.Time) int {
			if withJobs {
				return holdsAt(t) + jobsAt(t)
			}
			return holdsAt(t)
		}
		p := at(s)
		for _, h := range holds {
			if h.start.After(s) && h.start.Before(e) {
				p = max(p, at(h.start))
			}
		}
		return p
	}

	starts := []time.Time{s0}
	for _, j := range jobs {
		starts = append(starts, j.end)
	}
	for _, h := range holds {
		starts = append(starts, h.end)
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	for _, s := range starts {
		if s.Before(s0) || s.After(latest) {
			continue
		}
		if peak(s, true)+w <= c {
			o := option{ok: true, delayed: true, start: s, why: whyFree, name: r.Name, w: w, c: c}
			if d := s.Sub(s0); d > 0 {
				o.why, o.delay = whyLater, d
			}
			return o
		}
	}

	hp := peak(s0, false)
	if hp+w > c {
		return option{why: whyHeld, name: r.Name, w: w, c: c, n: hp}
	}
	var live []job
	total := 0
	for _, j := range jobs {
		if j.end.After(s0) {
			live = append(live, j)
			total += j.nodes
		}
	}
	need := total - (c - w - hp) // > 0, or a start without preemption would have fit
	unit := costOf(r)
	inf := math.Inf(1)
	dp := make([]float64, need+1)
	for x := 1; x <= need; x++ {
		dp[x] = inf
	}
	take := make([][]bool, len(live))
	for i, j := range live {
		take[i] = make([]bool, need+1)
		cost := unit * (j.elapsed + s0.Sub(now)).Seconds() // elapsed when preempted, at s0
		for x := need; x >= 1; x-- {
			if v := dp[max(0, x-j.nodes)] + cost; v < dp[x] {
				dp[x], take[i][x] = v, true
			}
		}
	}
	o := option{ok: true, start: s0, cost: dp[need]}
	for i, x := len(live)-1, need; i >= 0 && x > 0; i-- {
		if take[i][x] {
			o.preempt = append(o.preempt, live[i].id)
			x = max(0, x-live[i].nodes)
		}
	}
	slices.Reverse(o.preempt)
	o.why, o.name, o.w, o.c, o.n = whyPreempt, r.Name, w, c, need
	return o
}

// byResource groups running by resource, each group in running's order:
// place reads only its resource's jobs, and callers that offer a
// reservation to many resources group them once.
func byResource(running []Running) map[string][]Running {
	out := make(map[string][]Running, len(running))
	for _, x := range running {
		out[x.Resource] = append(out[x.Resource], x)
	}
	return out
}

// holdsOn returns the holds of the reservations bound to resource i, except
// skip.
func (g *Graph) holdsOn(i int, skip *resv) []hold {
	var hs []hold
	for _, n := range g.order {
		if n.bound && n.res == i && n != skip {
			hs = append(hs, hold{n.start, n.end, n.q.Width})
		}
	}
	return hs
}

// rank orders the usable options of candidate resources (given in index
// order): first those that need no preemption, by smallest start (delay),
// ties to the lower index; then the others by least preemption cost, ties to
// the lower index. Unusable options are left out.
func rank(opts []option) []int {
	var out []int
	for i, o := range opts {
		if o.ok {
			out = append(out, i)
		}
	}
	slices.SortStableFunc(out, func(a, b int) int {
		x, y := opts[a], opts[b]
		switch {
		case x.delayed != y.delayed:
			if x.delayed {
				return -1
			}
			return 1
		case x.delayed:
			return x.start.Compare(y.start)
		case x.cost < y.cost:
			return -1
		case x.cost > y.cost:
			return 1
		}
		return 0
	})
	return out
}

// choose returns the best option of rank, or -1 when none is usable.
func choose(opts []option) int {
	if r := rank(opts); len(r) > 0 {
		return r[0]
	}
	return -1
}

// commit binds n (at order index k) to resource ri from start, with the edge
// removals of deleteEdge, and returns how to undo it.
func (g *Graph) commit(n *resv, k, ri int, start time.Time) (undo func()) {
	old := *n
	n.bound, n.res, n.start, n.end = true, ri, start, start.Add(n.q.Dur)
	n.edges = nil
	n.edges.set(ri)
	capacity := g.res[ri].capacity()
	holds := g.holdsOn(ri, nil)
	var cleared []*resv
	for m := k + 1; m < len(g.order) && !g.order[m].q.ET.After(n.q.LT); m++ {
		qm := g.order[m]
		if qm.bound || !qm.edges.has(ri) {
			continue
		}
		if capacity-heldOver(holds, qm.q) < qm.q.Width {
			qm.edges.clear(ri)
			cleared = append(cleared, qm)
		}
	}
	return func() {
		*n = old
		for _, qm := range cleared {
			qm.edges.set(ri)
		}
	}
}

// stranded returns an unbound reservation whose window meets n's and whose
// freeDeg is 0, or nil.
func (g *Graph) stranded(n *resv) *resv {
	for k, m := range g.order {
		if m.q.ET.After(n.q.LT) {
			break
		}
		if m != n && !m.bound && !m.q.LT.Before(n.q.ET) && g.freeDeg(k) == 0 {
			return m
		}
	}
	return nil
}

// Bind runs deleteEdge for reservation id at now (normally now == its ET).
// Every candidate resource is offered the reservation over the start window
// [max(ET, now), LT-Dur] (see place): the resource that can take it with the
// smallest delay and no preemption wins, ties to the lower index (the paper
// takes the first candidate whose slack covers the delay; with unit widths the
// delay at a resource is its running job's remaining time); when none can,
// the one with the least preemption cost wins, ties to the lower index. q is
// then bound there: it holds Width nodes over [Start, Start+Dur) and is never
// preempted; its other edges go, and so does the edge from that resource to
// each unbound reservation of β(q) for which the resource's capacity minus the
// widths of the reservations bound to it whose holds meet that reservation's
// window is less than its width (with unit capacities: every edge from the
// resource to β(q) whose window the hold meets, the paper's rule).
//
// Bound reservations hold their resource whatever the et order, so binding q
// before an unbound reservation that precedes it (a caller binding out of et
// order) could leave that one without a free resource. Bind therefore takes
// the best candidate, in the order above, after which every unbound
// reservation whose window meets q's keeps freeDeg > 0; only if none does it
// takes the best one anyway (q is due now) and says whom it strands in the
// Reason. Binding in et order, as the paper does, never strands anyone.
func (g *Graph) Bind(id string, now time.Time, running []Running) (Binding, error) {
	n, ok := g.byID[id]
	if !ok {
		return Binding{}, fmt.Errorf("bind %s: %w", id, ErrUnknown)
	}
	if n.bound {
		return Binding{}, fmt.Errorf("bind %s: %w to %s from %s", id, ErrBound, g.res[n.res].Name, n.start.Format(time.RFC3339))
	}
	s0 := n.q.ET
	if now.After(s0) {
		s0 = now
	}
	latest := n.q.LT.Add(-n.q.Dur)
	if s0.After(latest) {
		return Binding{}, fmt.Errorf("bind %s at %s: %w: latest start was %s", id, now.Format(time.RFC3339), ErrTooLate, latest.Format(time.RFC3339))
	}
	holds := make([][]hold, len(g.res))
	for _, m := range g.order {
		if m.bound && n.edges.has(m.res) {
			holds[m.res] = append(holds[m.res], hold{m.start, m.end, m.q.Width})
		}
	}
	var idx []int
	var opts []option
	on := byResource(running)
	n.edges.each(func(i int) {
		idx = append(idx, i)
		opts = append(opts, place(g.res[i].Resource, holds[i], n.q.Width, s0, latest, n.q.Dur, now, on[g.res[i].Name]))
	})
	ranked := rank(opts)
	if len(ranked) == 0 {
		var whys []string
		for _, o := range opts {
			whys = append(whys, o.reason())
		}
		if len(whys) == 0 {
			whys = []string{"it has no candidate resource left"}
		}
		return Binding{}, fmt.Errorf("bind %s: %w: %s", id, ErrNoResource, strings.Join(whys, "; "))
	}
	k := g.pos(n)
	b, note := -1, ""
	var victim *resv
	for _, c := range ranked {
		undo := g.commit(n, k, idx[c], opts[c].start)
		m := g.stranded(n)
		if m == nil {
			b = c
			break
		}
		if victim == nil {
			victim = m
		}
		undo()
	}
	if b < 0 {
		b = ranked[0]
		g.commit(n, k, idx[b], opts[b].start)
		note = fmt.Sprintf("; every candidate leaves %s without a free resource", victim.q.ID)
	} else if b != ranked[0] {
		note = fmt.Sprintf("; %s would have left %s without a free resource", g.res[idx[ranked[0]]].Name, victim.q.ID)
	}
	o, r := opts[b], g.res[idx[b]]
	why := o.reason()
	if len(idx) > 1 {
		if o.delayed {
			why += fmt.Sprintf(" (smallest delay of %d candidates)", len(idx))
		} else {
			why += fmt.Sprintf(" (cheapest of %d candidates, none could wait within the slack)", len(idx))
		}
	}
	return Binding{Resource: r.Name, Start: o.start, Preempt: o.preempt, Cost: o.cost, Reason: why + note}, nil
}
