package reserve

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func genResources(t *rapid.T, unit bool) []Resource {
	n := rapid.IntRange(1, 6).Draw(t, "resources")
	rs := make([]Resource, n)
	for i := range rs {
		rs[i] = Resource{Name: fmt.Sprintf("r%d", i), Capacity: 1, Level: rapid.IntRange(1, 3).Draw(t, "level")}
		if !unit {
			rs[i].Capacity = rapid.IntRange(1, 4).Draw(t, "cap")
			rs[i].Cost = float64(rapid.IntRange(0, 3).Draw(t, "cost"))
		}
	}
	return rs
}

func genRequest(t *rapid.T, id string, names []string, unit bool) Request {
	et := rapid.IntRange(0, 60).Draw(t, "et")
	win := rapid.IntRange(1, 25).Draw(t, "window")
	q := Request{ID: id, ET: at(et), LT: at(et + win), Dur: sec(rapid.IntRange(1, win).Draw(t, "dur")),
		Demand: rapid.IntRange(1, 3).Draw(t, "demand")}
	if !unit {
		q.Width = rapid.IntRange(0, 3).Draw(t, "width")
	}
	if rapid.Bool().Draw(t, "restricted") {
		for _, n := range names {
			if rapid.Bool().Draw(t, "allow "+n) {
				q.Allowed = append(q.Allowed, n)
			}
		}
		if len(q.Allowed) == 0 {
			q.Allowed = []string{names[0]}
		}
	}
	return q
}

func names(rs []Resource) []string {
	var ns []string
	for _, r := range rs {
		ns = append(ns, r.Name)
	}
	return ns
}

// paperFreeDeg transcribes the paper's formula over requests in et order
// (unit capacities): deg − min(Σ_{r∈λ} sgn(Σ_{q∈α} c_qr), Σ_{q∈α} sgn(Σ_{r∈λ} c_qr)).
func paperFreeDeg(order []Request, res []Resource, k int) int {
	c := func(i, j int) int {
		if res[j].Level >= order[i].Demand && (len(order[i].Allowed) == 0 || slices.Contains(order[i].Allowed, res[j].Name)) {
			return 1
		}
		return 0
	}
	sgn := func(x int) int { return min(x, 1) }
	var alpha []int
	for i := 0; i < k; i++ {
		if !order[i].LT.Before(order[k].ET) {
			alpha = append(alpha, i)
		}
	}
	deg, t1, t2 := 0, 0, 0
	for j := range res {
		deg += c(k, j)
		if c(k, j) == 1 {
			s := 0
			for _, i := range alpha {
				s += c(i, j)
			}
			t1 += sgn(s)
		}
	}
	for _, i := range alpha {
		s := 0
		for j := range res {
			s += c(k, j) * c(i, j)
		}
		t2 += sgn(s)
	}
	return deg - min(t1, t2)
}

// paperAdmit transcribes addQNode over the same representation.
func paperAdmit(order []Request, res []Resource, q Request) ([]Request, bool) {
	k := 0
	for k < len(order) && !order[k].ET.After(q.ET) {
		k++
	}
	next := slices.Insert(slices.Clone(order), k, q)
	if paperFreeDeg(next, res, k) == 0 {
		return order, false
	}
	for m := k + 1; m < len(next) && !next[m].ET.After(q.LT); m++ {
		if paperFreeDeg(next, res, m) == 0 {
			return order, false
		}
	}
	return next, true
}

// With Capacity = Width = 1 the generalised first term is the paper's: every
// decision and every free degree equals the transcription's.
func TestPaperFormulaUnit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		res := genResources(t, true)
		g := New(res)
		var order []Request
		for i := range rapid.IntRange(1, 25).Draw(t, "requests") {
			q := genRequest(t, fmt.Sprintf("q%d", i), names(res), true)
			var want bool
			order, want = paperAdmit(order, res, q)
			if ok, why := g.Admit(q); ok != want {
				t.Fatalf("Admit(%+v) = %v (%s), paper says %v", q, ok, why, want)
			}
			for k, p := range order {
				if got, want := g.FreeDeg(p.ID), paperFreeDeg(order, res, k); got != want {
					t.Fatalf("FreeDeg(%s) = %d, paper %d", p.ID, got, want)
				}
			}
		}
	})
}

// (a) after every Admit each admitted unbound reservation has freeDeg > 0;
// (b) a refused Admit leaves the graph identical.
func TestAdmitInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		res := genResources(t, rapid.Bool().Draw(t, "unit"))
		g := New(res)
		admitted := 0
		for i := range rapid.IntRange(1, 30).Draw(t, "requests") {
			before := g.dump()
			q := genRequest(t, fmt.Sprintf("q%d", i), names(res), false)
			ok, why := g.Admit(q)
			if why == "" {
				t.Fatal("no reason")
			}
			if !ok && g.dump() != before {
				t.Fatalf("refused %s (%s) changed the graph:\n%s\nto\n%s", q.ID, why, before, g.dump())
			}
			if ok {
				admitted++
			}
			for _, id := range g.Reservations() {
				if fd := g.FreeDeg(id); fd <= 0 {
					t.Fatalf("after %s: FreeDeg(%s) = %d", q.ID, id, fd)
				}
			}
		}
		if len(g.Reservations()) != admitted {
			t.Fatalf("%d reservations, %d admitted", len(g.Reservations()), admitted)
		}
	})
}

// op is one step of a random history.
type op struct {
	kind    int // 0 admit, 1 bind, 2 remove, 3 add resource
	q       Request
	pick    int // which reservation, for bind and remove
	late    int // seconds after et for bind
	running []Running
	r       Resource
}

func genOps(t *rapid.T, res []Resource) []op {
	var ops []op
	for i := range rapid.IntRange(1, 40).Draw(t, "ops") {
		o := op{kind: rapid.IntRange(0, 3).Draw(t, "kind")}
		switch o.kind {
		case 0:
			o.q = genRequest(t, fmt.Sprintf("q%d", i), names(res), false)
		case 1:
			o.pick = rapid.IntRange(0, 100).Draw(t, "pick")
			o.late = rapid.IntRange(0, 3).Draw(t, "late")
			for j, r := range res {
				for range rapid.IntRange(0, 2).Draw(t, "jobs") {
					exp := rapid.IntRange(1, 60).Draw(t, "expected")
					o.running = append(o.running, Running{Resource: r.Name, Job: fmt.Sprintf("j%d.%d.%d", i, j, len(o.running)),
						Nodes: rapid.IntRange(0, r.Capacity).Draw(t, "nodes"), Expected: sec(exp),
						Elapsed: sec(rapid.IntRange(0, exp+5).Draw(t, "elapsed"))})
				}
			}
		case 2:
			o.pick = rapid.IntRange(0, 100).Draw(t, "pick")
		case 3:
			o.r = Resource{Name: fmt.Sprintf("n%d", i), Capacity: rapid.IntRange(1, 3).Draw(t, "cap"), Level: rapid.IntRange(1, 3).Draw(t, "level")}
			res = append(res, o.r)
		}
		ops = append(ops, o)
	}
	return ops
}

// apply runs ops on g and returns a transcript of every answer.
func apply(g *Graph, ops []op, reverse bool) []string {
	var log []string
	for _, o := range ops {
		switch o.kind {
		case 0:
			ok, why := g.Admit(o.q)
			log = append(log, fmt.Sprintf("admit %s %v %s", o.q.ID, ok, why))
		case 1:
			var unbound []*resv
			for _, n := range g.order {
				if !n.bound {
					unbound = append(unbound, n)
				}
			}
			if len(unbound) == 0 {
				continue
			}
			n := unbound[o.pick%len(unbound)]
			running := o.running
			if reverse {
				running = slices.Clone(running)
				slices.Reverse(running)
			}
			b, err := g.Bind(n.q.ID, n.q.ET.Add(sec(o.late)), running)
			log = append(log, fmt.Sprintf("bind %s %+v %v", n.q.ID, b, err))
		case 2:
			ids := g.Reservations()
			if len(ids) > 0 {
				g.Remove(ids[o.pick%len(ids)])
				log = append(log, "remove "+ids[o.pick%len(ids)])
			}
		case 3:
			g.AddResource(o.r)
		}
		log = append(log, g.dump())
	}
	return log
}

// overcommit returns a description of the first instant at which the holds
// of bound reservations exceed a resource's capacity, or "".
func overcommit(g *Graph) string {
	for i, r := range g.res {
		hs := g.holdsOn(i, nil)
		for _, h := range hs {
			u := 0
			for _, x := range hs {
				if !x.start.After(h.start) && x.end.After(h.start) {
					u += x.nodes
				}
			}
			if u > r.capacity() {
				return fmt.Sprintf("%s holds %d of %d nodes at %v", r.Name, u, r.capacity(), h.start)
			}
		}
	}
	return ""
}

// (c) Bind never over-commits a resource among bound reservations, and every
// start lies in the reservation's window; (d) the same history gives the same
// answers, whatever the order of the running jobs.
func TestBindInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		res := genResources(t, rapid.Bool().Draw(t, "unit"))
		ops := genOps(t, res)
		g := New(res)
		for i := range ops {
			apply(g, ops[i:i+1], false)
			if s := overcommit(g); s != "" {
				t.Fatalf("after op %d: %s", i, s)
			}
			for _, n := range g.order {
				if n.bound && (n.start.Before(n.q.ET) || n.end.After(n.q.LT)) {
					t.Fatalf("%s holds [%v, %v) outside its window [%v, %v]", n.q.ID, n.start, n.end, n.q.ET, n.q.LT)
				}
			}
		}
		a, b, c := apply(New(res), ops, false), apply(New(res), ops, false), apply(New(res), ops, true)
		if !slices.Equal(a, b) {
			t.Fatal("two runs of one history differ")
		}
		if !slices.Equal(a, c) {
			t.Fatalf("the order of the running jobs changed the answers:\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(c, "\n"))
		}
	})
}

// (e) after FailResource every reservation left satisfies inequality (1),
// the ones bound to the failed resource are gone, and nothing else vanished.
func TestFailResourceInvariant(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		res := genResources(t, rapid.Bool().Draw(t, "unit"))
		g := New(res)
		apply(g, genOps(t, res), false)
		victim := res[rapid.IntRange(0, len(res)-1).Draw(t, "victim")].Name
		before := g.Reservations()
		state := g.dump()
		var boundThere []string
		for _, id := range before {
			if r, _, _, ok := g.Bound(id); ok && r == victim {
				boundThere = append(boundThere, id)
			}
		}
		dropped := g.FailResource(victim)
		after := g.Reservations()
		if !slices.Equal(dropped[:min(len(boundThere), len(dropped))], boundThere) {
			t.Fatalf("dropped %v, want those bound there %v first", dropped, boundThere)
		}
		for _, id := range dropped {
			if slices.Contains(after, id) {
				t.Fatalf("%s dropped but still there", id)
			}
		}
		if len(after)+len(dropped) != len(before) {
			t.Fatalf("%d before, %d after, %d dropped", len(before), len(after), len(dropped))
		}
		for k, n := range g.order {
			if slices.Contains(g.Candidates(n.q.ID), victim) {
				t.Fatalf("%s still has an edge to %s", n.q.ID, victim)
			}
			if g.freeDeg(k) == 0 || g.starving(k) != nil {
				t.Fatalf("%s violates inequality (1) after %s failed (dropped %v):\n%s\nnow\n%s", n.q.ID, victim, dropped, state, g.dump())
			}
		}
	})
}

// place's preemption is the cheapest set that frees enough nodes: checked
// against every subset.
func TestPreemptIsCheapest(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := Resource{Name: "S", Capacity: rapid.IntRange(1, 10).Draw(t, "cap"), Cost: float64(rapid.IntRange(0, 3).Draw(t, "w"))}
		w := rapid.IntRange(1, r.Capacity).Draw(t, "width")
		var run []Running
		for i := range rapid.IntRange(0, 7).Draw(t, "jobs") {
			run = append(run, Running{Resource: "S", Job: fmt.Sprintf("j%d", i), Nodes: rapid.IntRange(1, 4).Draw(t, "nodes"),
				Expected: sec(1000), Elapsed: sec(rapid.IntRange(0, 50).Draw(t, "elapsed"))})
		}
		o := place(r, nil, w, at(0), at(10), sec(50), at(0), run)
		busy := 0
		for _, x := range run {
			busy += x.Nodes
		}
		if busy+w <= r.Capacity {
			if !o.delayed || !o.start.Equal(at(0)) {
				t.Fatalf("room at once, got %+v", o)
			}
			return
		}
		best := math.Inf(1)
		for mask := 0; mask < 1<<len(run); mask++ {
			freed, cost := 0, 0.0
			for i, x := range run {
				if mask&(1<<i) != 0 {
					freed += x.Nodes
					cost += costOf(r) * x.Elapsed.Seconds()
				}
			}
			if busy-freed+w <= r.Capacity {
				best = min(best, cost)
			}
		}
		freed := 0
		for _, id := range o.preempt {
			i := slices.IndexFunc(run, func(x Running) bool { return x.Job == id })
			freed += run[i].Nodes
		}
		if o.delayed || math.Abs(o.cost-best) > 1e-9 || busy-freed+w > r.Capacity {
			t.Fatalf("preempt %v cost %g frees %d; cheapest is %g (busy %d, width %d, cap %d)", o.preempt, o.cost, freed, best, busy, w, r.Capacity)
		}
	})
}

// Binding every admitted reservation in et order at its et never fails and
// never strands anyone: the free degrees that admission guaranteed hold up.
func TestBindInOrderNeverFails(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		res := genResources(t, rapid.Bool().Draw(t, "unit"))
		g := New(res)
		for i := range rapid.IntRange(1, 30).Draw(t, "requests") {
			g.Admit(genRequest(t, fmt.Sprintf("q%d", i), names(res), false))
		}
		for _, id := range g.Reservations() {
			n := g.byID[id]
			var run []Running
			for _, r := range res {
				if rapid.Bool().Draw(t, "busy") {
					exp := rapid.IntRange(1, 60).Draw(t, "expected")
					run = append(run, Running{Resource: r.Name, Job: "j" + r.Name, Nodes: rapid.IntRange(1, r.Capacity).Draw(t, "nodes"),
						Expected: sec(exp), Elapsed: sec(rapid.IntRange(0, exp).Draw(t, "elapsed"))})
				}
			}
			b, err := g.Bind(id, n.q.ET, run)
			if err != nil {
				t.Fatalf("Bind(%s) in et order: %v", id, err)
			}
			if strings.Contains(b.Reason, "without a free resource") {
				t.Fatalf("Bind(%s) in et order: %s", id, b.Reason)
			}
		}
	})
}

// (f) after SetCapacity every reservation left satisfies inequality (1), no
// bound reservation is dropped, a growth drops nothing, and no waiting
// reservation keeps a resource it no longer fits as a candidate.
func TestSetCapacityInvariant(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		res := genResources(t, rapid.Bool().Draw(t, "unit"))
		g := New(res)
		apply(g, genOps(t, res), false)
		k := rapid.IntRange(0, len(res)-1).Draw(t, "resource")
		name, old := res[k].Name, capacityOf(res[k])
		capacity := rapid.IntRange(1, 2*old+1).Draw(t, "capacity")
		before := g.Reservations()
		state := g.dump()
		var bound []string
		for _, id := range before {
			if _, _, _, ok := g.Bound(id); ok {
				bound = append(bound, id)
			}
		}
		dropped := g.SetCapacity(name, capacity)
		after := g.Reservations()
		if capacity >= old && len(dropped) > 0 {
			t.Fatalf("growing %s from %d to %d dropped %v", name, old, capacity, dropped)
		}
		if len(after)+len(dropped) != len(before) {
			t.Fatalf("%d before, %d after, %d dropped", len(before), len(after), len(dropped))
		}
		for k, n := range g.order {
			if !n.bound {
				r := g.res[g.byName[name]].Resource
				fits := satisfies(r, n.q) // room beside bound holds aside
				if has := slices.Contains(g.Candidates(n.q.ID), name); has && !fits {
					t.Fatalf("%s: does not fit %s at %d nodes, but it is a candidate: %v", n.q.ID, name, capacity, g.Candidates(n.q.ID))
				}
			}
			if g.freeDeg(k) == 0 || g.starving(k) != nil {
				t.Fatalf("%s violates inequality (1) after %s went %d -> %d (dropped %v):\n%s\nnow\n%s", n.q.ID, name, old, capacity, dropped, state, g.dump())
			}
		}
		for _, id := range dropped {
			if slices.Contains(bound, id) {
				t.Fatalf("bound %s dropped", id)
			}
		}
	})
}
