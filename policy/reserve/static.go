package reserve

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// StaticMode is the SRRM scheduling strategy of paper 001's baselines.
type StaticMode int

// Static modes.
const (
	StaticRandom  StaticMode = iota + 1 // r_schedule: a random candidate with room
	StaticMinCost                       // m_schedule: the candidate with the least predicted preemption cost
)

func (m StaticMode) String() string {
	switch m {
	case StaticRandom:
		return "SRRM_r"
	case StaticMinCost:
		return "SRRM_m"
	}
	return fmt.Sprintf("StaticMode(%d)", int(m))
}

// booking is one reservation SRRM has bound at admission.
type booking struct {
	q          Request
	res        int
	start, end time.Time
}

// Static is the static resource reservation mechanism (SRRM), the paper's
// baseline: a request is bound to one resource as soon as it is admitted.
// Every resource keeps a reservation queue of booked holds; a request is
// admitted iff some candidate resource has room for it somewhere in its window
// beside the holds already booked there, and it is booked at the earliest
// such start. Which candidate (among those with room) is the mode's choice.
// At its start (Bind) the reservation may still wait within its slack on that
// resource, or preempts non-reserved jobs there: the same rule as the dynamic
// Graph.Bind, limited to the resource fixed at admission. Not safe for
// concurrent use; deterministic for a given seed.
type Static struct {
	mode  StaticMode
	rng   *rand.Rand
	res   []Resource
	dead  []bool       // per resource: failed (FailResource), takes no bookings
	books [][]*booking // per resource
	byID  map[string]*booking
}

// NewStatic builds an SRRM over res. seed drives r_schedule's choices (a PCG
// source); m_schedule ignores it. A mode other than StaticRandom or
// StaticMinCost is taken as StaticMinCost.
func NewStatic(res []Resource, mode StaticMode, seed uint64) *Static {
	if mode != StaticRandom {
		mode = StaticMinCost
	}
	s := &Static{mode: mode, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), byID: map[string]*booking{}}
	seen := map[string]bool{}
	for _, r := range res {
		if !seen[r.Name] {
			seen[r.Name] = true
			s.res = append(s.res, r)
			s.dead = append(s.dead, false)
			s.books = append(s.books, nil)
		}
	}
	return s
}

func (s *Static) holds(i int, skip *booking) []hold {
	var hs []hold
	for _, b := range s.books[i] {
		if b != skip {
			hs = append(hs, hold{b.start, b.end, b.q.Width})
		}
	}
	return hs
}

// Admit runs SRRM's admission for q at now and books it at once. The
// candidates are the resources that satisfy q (as for the RRG) and have room
// for it in their reservation queue within the window; r_schedule picks one
// at random, m_schedule the one with the least predicted preemption cost: the
// cost Graph.Bind's rule would give at its booked start if the jobs running
// now (running) were the ones still running then (those due to end before it
// are gone), ties to the smaller delay, then the lower index. The Binding
// returned is the booking: its resource and booked start, with the predicted
// preemption (a forecast; Bind at the start decides). ok false means refused,
// with the reason.
func (s *Static) Admit(q Request, now time.Time, running []Running) (Binding, bool, string) {
	q, err := normalize(q)
	if err != nil {
		return Binding{}, false, err.Error()
	}
	if _, dup := s.byID[q.ID]; dup {
		return Binding{}, false, fmt.Sprintf("invalid request: id %s is already admitted", q.ID)
	}
	s0, latest := q.ET, q.LT.Add(-q.Dur)
	if now.After(s0) {
		s0 = now
	}
	var idx []int
	var starts []time.Time
	var full []string
	ok4 := satisfier(q)
	for i, r := range s.res {
		if s.dead[i] || !ok4(r) {
			continue
		}
		o := place(r, s.holds(i, nil), q.Width, s0, latest, q.Dur, now, nil)
		if !o.delayed {
			full = append(full, r.Name)
			continue
		}
		idx, starts = append(idx, i), append(starts, o.start)
	}
	if len(idx) == 0 {
		if len(full) == 0 {
			rs := make([]resource, len(s.res))
			for i, r := range s.res {
				rs[i] = resource{r, !s.dead[i]}
			}
			return Binding{}, false, noCandidate(rs, q)
		}
		return Binding{}, false, fmt.Sprintf("no room: the reservation queues of %s are full over the window", strings.Join(full, ", "))
	}
	predict := func(j int, running []Running) option {
		return place(s.res[idx[j]], s.holds(idx[j], nil), q.Width, starts[j], latest, q.Dur, now, running)
	}
	var c int
	var p option
	if s.mode == StaticRandom {
		// r_schedule does not look at the forecast: only the chosen one's is needed.
		c = s.rng.IntN(len(idx))
		p = predict(c, running)
	} else {
		on := byResource(running)
		preds := make([]option, len(idx))
		for j := range idx {
			preds[j] = predict(j, on[s.res[idx[j]].Name])
		}
		c = choose(preds)
		p = preds[c]
	}
	i := idx[c]
	b := &booking{q: q, res: i, start: starts[c], end: starts[c].Add(q.Dur)}
	s.books[i] = append(s.books[i], b)
	s.byID[q.ID] = b
	why := fmt.Sprintf("%s: booked from %s (%s of %d with room); predicted %s", s.res[i].Name, b.start.Format(time.RFC3339), s.mode, len(idx), p.reason())
	return Binding{Resource: s.res[i].Name, Start: b.start, Preempt: p.preempt, Cost: p.cost, Reason: why}, true, why
}

// Bind decides reservation id's start on its booked resource at now (normally
// its booked start): wait within the slack (start window [max(booked start,
// now), LT-Dur], beside the other bookings) when that avoids preemption, else
// preempt the cheapest set of running jobs at the start. Errors wrap ErrUnknown,
// ErrTooLate or ErrNoResource.
func (s *Static) Bind(id string, now time.Time, running []Running) (Binding, error) {
	b, ok := s.byID[id]
	if !ok {
		return Binding{}, fmt.Errorf("bind %s: %w", id, ErrUnknown)
	}
	s0, latest := b.start, b.q.LT.Add(-b.q.Dur)
	if now.After(s0) {
		s0 = now
	}
	if s0.After(latest) {
		return Binding{}, fmt.Errorf("bind %s at %s: %w: latest start was %s", id, now.Format(time.RFC3339), ErrTooLate, latest.Format(time.RFC3339))
	}
	o := place(s.res[b.res], s.holds(b.res, b), b.q.Width, s0, latest, b.q.Dur, now, running)
	if !o.ok {
		return Binding{}, fmt.Errorf("bind %s: %w: %s", id, ErrNoResource, o.reason())
	}
	b.start, b.end = o.start, o.start.Add(b.q.Dur)
	return Binding{Resource: s.res[b.res].Name, Start: o.start, Preempt: o.preempt, Cost: o.cost, Reason: o.reason()}, nil
}

// Remove deletes reservation id's booking (finished or cancelled); unknown ids
// are a no-op.
func (s *Static) Remove(id string) {
	b, ok := s.byID[id]
	if !ok {
		return
	}
	s.books[b.res] = slices.DeleteFunc(s.books[b.res], func(x *booking) bool { return x == b })
	delete(s.byID, id)
}

// FailResource applies SRRM's failure rule (paper 001 §3.4): a reservation is
// bound to its resource at admission, so when that resource fails every
// reservation booked on it and not yet removed (running, or waiting for its
// start) fails with it; nothing is moved elsewhere. The resource takes no
// more bookings. It returns the failed ids in booking order; an unknown or
// already failed name returns nil. Compare Graph.FailResource, which moves
// the unbound reservations when the rest of the graph can still hold them.
func (s *Static) FailResource(name string) (dropped []string) {
	i := slices.IndexFunc(s.res, func(r Resource) bool { return r.Name == name })
	if i < 0 || s.dead[i] {
		return nil
	}
	s.dead[i] = true
	for _, b := range s.books[i] {
		dropped = append(dropped, b.q.ID)
		delete(s.byID, b.q.ID)
	}
	s.books[i] = nil
	return dropped
}

// AddResource adds a resource that takes bookings from now on, or revives a
// failed one of that name (with r's capacity, level and cost). A live name
// is a no-op, as for Graph.AddResource.
func (s *Static) AddResource(r Resource) {
	i := slices.IndexFunc(s.res, func(x Resource) bool { return x.Name == r.Name })
	switch {
	case i < 0:
		s.res = append(s.res, r)
		s.dead = append(s.dead, false)
		s.books = append(s.books, nil)
	case s.dead[i]:
		s.res[i], s.dead[i] = r, false
	}
}

// SetCapacity changes the node count of resource name. A shrink keeps the
// bookings there, in booking order, while they still fit beside the ones
// kept before them, and drops the others (nothing is moved elsewhere: SRRM
// binds at admission). It returns the dropped ids; an unknown or failed
// name, or an unchanged capacity, returns nil.
func (s *Static) SetCapacity(name string, capacity int) (dropped []string) {
	i := slices.IndexFunc(s.res, func(x Resource) bool { return x.Name == name })
	if i < 0 || s.dead[i] {
		return nil
	}
	old := capacityOf(s.res[i])
	s.res[i].Capacity = capacity
	c := capacityOf(s.res[i])
	if c >= old {
		return nil
	}
	var kept []*booking
	for _, b := range s.books[i] {
		if peak(kept, b)+b.q.Width <= c {
			kept = append(kept, b)
			continue
		}
		dropped = append(dropped, b.q.ID)
		delete(s.byID, b.q.ID)
	}
	s.books[i] = kept
	return dropped
}

// peak is the most nodes the bookings hold at once over b's hold.
func peak(books []*booking, b *booking) int {
	most := 0
	for _, x := range books {
		if !x.start.Before(b.end) || !x.end.After(b.start) {
			continue
		}
		at := x.start
		if at.Before(b.start) {
			at = b.start
		}
		n := 0
		for _, y := range books {
			if !y.start.After(at) && y.end.After(at) {
				n += y.q.Width
			}
		}
		most = max(most, n)
	}
	return most
}

// Reservations returns the booked ids by booked start (ties: booking order
// on one resource, then resource order).
func (s *Static) Reservations() []string {
	var all []*booking
	for _, bs := range s.books {
		all = append(all, bs...)
	}
	slices.SortStableFunc(all, func(x, y *booking) int { return x.start.Compare(y.start) })
	out := make([]string, len(all))
	for i, b := range all {
		out[i] = b.q.ID
	}
	return out
}
