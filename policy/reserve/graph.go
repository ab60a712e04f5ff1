package reserve

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Sentinel errors of Bind (and Static.Bind): the policy package's, so a
// caller of policy.ReservationBook and of this package test the same values.
// The wrapping error carries the reason in words.
var (
	// ErrUnknown: no admitted reservation has that id.
	ErrUnknown = policy.ErrResvUnknown
	// ErrBound: the reservation is already bound to a resource.
	ErrBound = policy.ErrResvBound
	// ErrTooLate: now is past the reservation's latest start (LT - Dur).
	ErrTooLate = policy.ErrResvTooLate
	// ErrNoResource: no candidate resource can take the reservation within
	// its window, not even by preempting non-reserved jobs (bound
	// reservations are never preempted).
	ErrNoResource = policy.ErrResvNoResource
)

// Resource is one schedulable resource of the resource–reservation graph
// (Capacity 0 or less means 1, Cost 0 or less means 1; a reservation is a
// candidate iff Level >= its Demand).
type Resource = policy.ResvResource

func capacityOf(r Resource) int {
	if r.Capacity < 1 {
		return 1
	}
	return r.Capacity
}

func costOf(r Resource) float64 {
	if r.Cost <= 0 {
		return 1
	}
	return r.Cost
}

// Request is one advance-reservation request q: window [ET, LT], Dur to
// hold (0 < Dur <= LT-ET), Width nodes on one resource (0 means 1), the
// capability level Demand, the resource names Allowed (nil: all).
type Request = policy.ResvRequest

// normalize checks q and fills its defaults; the error names the problem.
func normalize(q Request) (Request, error) {
	switch {
	case q.ID == "":
		return q, errors.New("invalid request: empty id")
	case !q.LT.After(q.ET):
		return q, fmt.Errorf("invalid request %s: window [%s, %s] is empty, lt must be after et",
			q.ID, q.ET.Format(time.RFC3339), q.LT.Format(time.RFC3339))
	case q.Dur <= 0:
		return q, fmt.Errorf("invalid request %s: dur %v must be positive", q.ID, q.Dur)
	case q.Dur > q.LT.Sub(q.ET):
		return q, fmt.Errorf("invalid request %s: dur %v is longer than its window %v", q.ID, q.Dur, q.LT.Sub(q.ET))
	case q.Width < 0:
		return q, fmt.Errorf("invalid request %s: width %d is negative, want 0 (=1) or more", q.ID, q.Width)
	}
	if q.Width == 0 {
		q.Width = 1
	}
	q.Allowed = slices.Clone(q.Allowed)
	return q, nil
}

// satisfies reports whether r meets q's requirements (an edge of the RRG).
func satisfies(r Resource, q Request) bool {
	if r.Level < q.Demand || capacityOf(r) < q.Width {
		return false
	}
	return len(q.Allowed) == 0 || slices.Contains(q.Allowed, r.Name)
}

// satisfier returns satisfies(·, q) for a loop over many resources: a long
// list of allowed names is looked up in a set built once.
func satisfier(q Request) func(Resource) bool {
	if len(q.Allowed) <= 4 {
		return func(r Resource) bool { return satisfies(r, q) }
	}
	set := make(map[string]bool, len(q.Allowed))
	for _, a := range q.Allowed {
		set[a] = true
	}
	return func(r Resource) bool {
		return r.Level >= q.Demand && capacityOf(r) >= q.Width && set[r.Name]
	}
}

// noCandidate explains why no live resource satisfies q.
func noCandidate(res []resource, q Request) string {
	allowed, maxLevel, maxCap := 0, -1<<31, 0
	for _, r := range res {
		if !r.alive || (len(q.Allowed) > 0 && !slices.Contains(q.Allowed, r.Name)) {
			continue
		}
		allowed++
		maxLevel = max(maxLevel, r.Level)
		if r.Level >= q.Demand {
			maxCap = max(maxCap, r.capacity())
		}
	}
	switch {
	case allowed == 0 && len(q.Allowed) > 0:
		return fmt.Sprintf("no candidate resource: none of the allowed resources %v exists", q.Allowed)
	case allowed == 0:
		return "no candidate resource: the graph has no resources"
	case maxLevel < q.Demand:
		return fmt.Sprintf("no candidate resource: needs level %d, highest level is %d", q.Demand, maxLevel)
	case q.Demand > 0:
		return fmt.Sprintf("no candidate resource: needs %d nodes at level %d, largest has %d", q.Width, q.Demand, maxCap)
	default:
		return fmt.Sprintf("no candidate resource: needs %d nodes on one resource, the largest has %d", q.Width, maxCap)
	}
}

// bitset is a set of resource indices.
type bitset []uint64

func (b *bitset) set(i int) {
	for len(*b) <= i/64 {
		*b = append(*b, 0)
	}
	(*b)[i/64] |= 1 << (i % 64)
}

func (b bitset) clear(i int) {
	if i/64 < len(b) {
		b[i/64] &^= 1 << (i % 64)
	}
}

func (b bitset) has(i int) bool { return i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0 }

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// each calls fn for every member in increasing order.
func (b bitset) each(fn func(i int)) {
	for w, word := range b {
		for word != 0 {
			fn(w*64 + bits.TrailingZeros64(word))
			word &= word - 1
		}
	}
}

type resource struct {
	Resource
	alive bool
}

func (r resource) capacity() int { return capacityOf(r.Resource) }

// resv is one reservation node of the graph.
type resv struct {
	q     Request
	edges bitset // λ(q): candidate resources
	bound bool
	res   int       // resource index, when bound
	start time.Time // hold [start, end), when bound
	end   time.Time
}

// Graph is the resource–reservation graph (RRG) <R, Q, E> of paper 001. Not
// safe for concurrent use. Deterministic: no clock, no randomness, no map
// iteration in anything it returns.
type Graph struct {
	res    []resource
	byName map[string]int
	order  []*resv // by ET; ties in admission order
	byID   map[string]*resv
	sums   []int // scratch of freeDeg, one per resource, kept all zero between calls
}

// New builds a graph over res with no reservations. A name that repeats an
// earlier one is skipped (as AddResource would).
func New(res []Resource) *Graph {
	g := &Graph{byName: map[string]int{}, byID: map[string]*resv{}}
	for _, r := range res {
		g.AddResource(r)
	}
	return g
}

// AddResource adds a resource and edges from it to every waiting (unbound)
// reservation it satisfies (paper §2.4). A name already in the graph is a
// no-op: fail the old one first to replace it, or change its node count
// with SetCapacity.
func (g *Graph) AddResource(r Resource) {
	if _, ok := g.byName[r.Name]; ok {
		return
	}
	i := len(g.res)
	g.res = append(g.res, resource{Resource: r, alive: true})
	g.sums = append(g.sums, 0)
	g.byName[r.Name] = i
	for _, n := range g.order {
		if !n.bound && satisfies(r, n.q) {
			n.edges.set(i)
		}
	}
}

// pos returns n's index in g.order.
func (g *Graph) pos(n *resv) int {
	k := sort.Search(len(g.order), func(i int) bool { return !g.order[i].q.ET.Before(n.q.ET) })
	for ; k < len(g.order); k++ {
		if g.order[k] == n {
			return k
		}
	}
	panic("reserve: reservation missing from the order") // an internal invariant, not input
}

// conflicts is the detail of one freeDeg computation.
type conflicts struct {
	deg    int // candidates
	byRes  int // first term: candidates possibly taken by earlier reservations
	byResv int // second term: earlier intersecting reservations sharing a candidate
}

func (c conflicts) free() int { return c.deg - min(c.byRes, c.byResv) }

// conflictsAt computes the terms of freeDeg for order[k]. α(q_k) is the
// earlier reservations whose window reaches q_k's et, plus any reservation
// already bound whose window intersects q_k's (it holds its resource whatever
// the order). The first term counts a candidate r as possibly taken when
// q_k's width plus the widths of those α members adjacent to r exceed r's
// capacity; with unit widths and capacities that is sgn(Σ_{q∈α} c_qr).
func (g *Graph) conflictsAt(k int) conflicts {
	q := g.order[k]
	lam := q.edges
	c := conflicts{deg: lam.count()}
	if c.deg == 0 {
		return c
	}
	add := func(a *resv) {
		shared := false
		for w, word := range lam {
			if w >= len(a.edges) {
				break
			}
			m := word & a.edges[w]
			for m != 0 {
				g.sums[w*64+bits.TrailingZeros64(m)] += a.q.Width
				m &= m - 1
				shared = true
			}
		}
		if shared {
			c.byResv++
		}
	}
	for j := 0; j < k; j++ {
		if a := g.order[j]; !a.q.LT.Before(q.q.ET) {
			add(a)
		}
	}
	for j := k + 1; j < len(g.order) && !g.order[j].q.ET.After(q.q.LT); j++ {
		if a := g.order[j]; a.bound {
			add(a)
		}
	}
	lam.each(func(r int) {
		if q.q.Width+g.sums[r] > g.res[r].capacity() {
			c.byRes++
		}
		g.sums[r] = 0
	})
	return c
}

// freeDeg of order[k]; a bound reservation holds its resource and counts 1.
func (g *Graph) freeDeg(k int) int {
	if g.order[k].bound {
		return 1
	}
	return g.conflictsAt(k).free()
}

// starving returns the first unbound reservation of β(order[k]) whose freeDeg
// is 0, or nil: inequality (1) holds for order[k] iff its own freeDeg > 0 and
// starving returns nil.
func (g *Graph) starving(k int) *resv {
	lt := g.order[k].q.LT
	for m := k + 1; m < len(g.order) && !g.order[m].q.ET.After(lt); m++ {
		if !g.order[m].bound && g.freeDeg(m) == 0 {
			return g.order[m]
		}
	}
	return nil
}

// Admit runs addQNode: it inserts q in et order and accepts it iff inequality
// (1) holds, freeDeg(q) · Π_{q_m∈β(q)} freeDeg(q_m) > 0. A refused q leaves the
// graph unchanged. The reason says why in words, on acceptance too.
func (g *Graph) Admit(q Request) (ok bool, reason string) {
	q, err := normalize(q)
	if err != nil {
		return false, err.Error()
	}
	if _, dup := g.byID[q.ID]; dup {
		return false, fmt.Sprintf("invalid request: id %s is already admitted", q.ID)
	}
	n := &resv{q: q}
	ok4 := satisfier(q)
	for i, r := range g.res {
		if r.alive && ok4(r.Resource) {
			n.edges.set(i)
		}
	}
	if n.edges.count() == 0 {
		return false, noCandidate(g.res, q)
	}
	k := sort.Search(len(g.order), func(i int) bool { return g.order[i].q.ET.After(q.ET) })
	g.order = slices.Insert(g.order, k, n)
	c := g.conflictsAt(k)
	if c.free() == 0 {
		g.order = slices.Delete(g.order, k, k+1)
		return false, fmt.Sprintf("freeDeg 0: all %d candidates taken by %d overlapping reservations", c.deg, c.byResv)
	}
	if m := g.starving(k); m != nil {
		g.order = slices.Delete(g.order, k, k+1)
		return false, fmt.Sprintf("admitting it would leave %s without a free resource", m.q.ID)
	}
	g.byID[q.ID] = n
	return true, fmt.Sprintf("admitted: freeDeg %d of %d candidates", c.free(), c.deg)
}

// FreeDeg returns the free degree of reservation id: deg minus its maximum
// conflicts. A bound reservation holds its resource and counts 1. An unknown
// id gives -1.
func (g *Graph) FreeDeg(id string) int {
	n, ok := g.byID[id]
	if !ok {
		return -1
	}
	return g.freeDeg(g.pos(n))
}

// Candidates returns the names of reservation id's candidate resources (its
// edges) in resource order; nil for an unknown id.
func (g *Graph) Candidates(id string) []string {
	n, ok := g.byID[id]
	if !ok {
		return nil
	}
	var out []string
	n.edges.each(func(i int) { out = append(out, g.res[i].Name) })
	return out
}

// Bound tells whether reservation id is bound, and if so where and when its
// hold [start, end) lies.
func (g *Graph) Bound(id string) (resource string, start, end time.Time, ok bool) {
	n, found := g.byID[id]
	if !found || !n.bound {
		return "", time.Time{}, time.Time{}, false
	}
	return g.res[n.res].Name, n.start, n.end, true
}

// Remove deletes reservation id (finished or cancelled) with its edges. An
// unknown id is a no-op.
func (g *Graph) Remove(id string) {
	n, ok := g.byID[id]
	if !ok {
		return
	}
	k := g.pos(n)
	g.order = slices.Delete(g.order, k, k+1)
	delete(g.byID, id)
}

// Reservations returns the admitted ids in et order (ties: admission order).
func (g *Graph) Reservations() []string {
	out := make([]string, len(g.order))
	for i, n := range g.order {
		out[i] = n.q.ID
	}
	return out
}

// FailResource applies the paper's figure-2 rule for a failed resource r_m:
// S = η(r_m); delete r_m and its edges; delete the reservations bound to r_m;
// then while S is not empty: keep (remove from S) every reservation of S that
// satisfies inequality (1), and drop the one of S with the smallest index
// (earliest). It returns the dropped ids in the order they went (bound ones
// first). An unknown name returns nil.
func (g *Graph) FailResource(name string) (dropped []string) {
	i, ok := g.byName[name]
	if !ok {
		return nil
	}
	var s []*resv
	for _, n := range g.order {
		if n.edges.has(i) {
			s = append(s, n)
		}
	}
	g.res[i].alive = false
	delete(g.byName, name)
	for _, n := range g.order {
		n.edges.clear(i)
	}
	drop := func(n *resv) {
		g.Remove(n.q.ID)
		dropped = append(dropped, n.q.ID)
	}
	s = slices.DeleteFunc(s, func(n *resv) bool {
		if n.bound && n.res == i {
			drop(n)
			return true
		}
		return false
	})
	return append(dropped, g.readmit(s)...)
}

// readmit is the loop of the figure-2 rule over s (reservations in ET
// order): keep (remove from s) every reservation that satisfies inequality
// (1), drop the earliest of the others, until s is empty. It returns the
// dropped ids in the order they went.
func (g *Graph) readmit(s []*resv) (dropped []string) {
	for len(s) > 0 {
		keep := make([]bool, len(s))
		for j, n := range s {
			k := g.pos(n)
			keep[j] = g.freeDeg(k) > 0 && g.starving(k) == nil
		}
		j := 0
		s = slices.DeleteFunc(s, func(*resv) bool { j++; return keep[j-1] })
		if len(s) > 0 {
			g.Remove(s[0].q.ID)
			dropped = append(dropped, s[0].q.ID)
			s = s[1:]
		}
	}
	return dropped
}

// SetCapacity changes the node count of resource name: a site that grew or
// shrank (nodes drained or added). A shrink removes the edges of waiting
// reservations that no longer satisfy the resource or find no room on it
// beside the reservations bound there over their window (as deleteEdge
// does), then re-runs
// admission, by the failure rule, on the waiting reservations that had it as
// a candidate: those that still satisfy inequality (1) stay, the earliest of
// the others is dropped until all do. Reservations bound to it stay: the
// site's own reservation holds their nodes. It returns the dropped ids; an
// unknown name or an unchanged capacity returns nil.
//
// A growth drops nothing and adds no edge: the admitted reservations keep
// their candidates (more nodes on them only leaves more room), and later
// requests are admitted against the new count. Adding edges would not be
// safe: a reservation with one more candidate counts against every other
// reservation of that candidate, and inequality (1) can break for one of
// them.
func (g *Graph) SetCapacity(name string, capacity int) (dropped []string) {
	i, ok := g.byName[name]
	if !ok {
		return nil
	}
	old := g.res[i].capacity()
	g.res[i].Capacity = capacity
	now := g.res[i].capacity()
	if now == old {
		return nil
	}
	holds := g.holdsOn(i, nil)
	fits := func(q Request) bool {
		return satisfies(g.res[i].Resource, q) && now-heldOver(holds, q) >= q.Width
	}
	var s []*resv
	for _, n := range g.order {
		if n.bound {
			continue
		}
		if now < old && n.edges.has(i) {
			s = append(s, n)
			if !fits(n.q) {
				n.edges.clear(i)
			}
		}
	}
	return g.readmit(s)
}

// dump renders the whole graph state, for tests of "unchanged".
func (g *Graph) dump() string {
	var b strings.Builder
	for i, r := range g.res {
		fmt.Fprintf(&b, "r%d %+v\n", i, r)
	}
	for _, n := range g.order {
		fmt.Fprintf(&b, "%s %v bound=%v res=%d %v %v fd=%d\n", n.q.ID, []uint64(n.edges), n.bound, n.res, n.start, n.end, g.FreeDeg(n.q.ID))
	}
	return b.String()
}
