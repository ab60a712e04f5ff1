package reserve

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s int) time.Time      { return t0.Add(time.Duration(s) * time.Second) }
func sec(s int) time.Duration { return time.Duration(s) * time.Second }
func units(names ...string) []Resource {
	var rs []Resource
	for _, n := range names {
		rs = append(rs, Resource{Name: n, Capacity: 1, Level: 1})
	}
	return rs
}

// req builds a request over [et, lt] holding dur, allowed on the given names.
func req(id string, et, lt, dur int, allowed ...string) Request {
	return Request{ID: id, ET: at(et), LT: at(lt), Dur: sec(dur), Demand: 1, Allowed: allowed}
}

func mustAdmit(t *testing.T, g *Graph, q Request) {
	t.Helper()
	if ok, why := g.Admit(q); !ok {
		t.Fatalf("Admit(%s) refused: %s", q.ID, why)
	}
}

// The figure-1 situations of the paper with hand-computed free degrees.
func TestAdmitFreeDeg(t *testing.T) {
	g := New(units("A", "B", "C", "D"))
	mustAdmit(t, g, req("q1", 0, 10, 5, "A", "B"))           // no α: fd 2
	mustAdmit(t, g, req("q2", 1, 11, 5, "A", "C"))           // α {q1}: T1 1 (A), T2 1: fd 1
	mustAdmit(t, g, req("q3", 2, 12, 5, "A", "B", "C", "D")) // α {q1,q2}: T1 3 (A,B,C), T2 2: fd 2
	for id, want := range map[string]int{"q1": 2, "q2": 1, "q3": 2, "nope": -1} {
		if got := g.FreeDeg(id); got != want {
			t.Errorf("FreeDeg(%s) = %d, want %d", id, got, want)
		}
	}
	// q4: α {q1,q2,q3}, T1 2 (A, D via q3), T2 3: fd 0.
	ok, why := g.Admit(req("q4", 3, 13, 5, "A", "D"))
	if ok || why != "freeDeg 0: all 2 candidates taken by 3 overlapping reservations" {
		t.Errorf("q4: ok=%v %q", ok, why)
	}
	// q0 ties q1's et, goes after it; its own fd is 1 (T1 1: B), but q2
	// would then have A taken by q1 and C by q0.
	ok, why = g.Admit(req("q0", 0, 10, 5, "B", "C"))
	if ok || why != "admitting it would leave q2 without a free resource" {
		t.Errorf("q0: ok=%v %q", ok, why)
	}
	mustAdmit(t, g, req("q5", 20, 30, 5, "A")) // nothing reaches et 20
	mustAdmit(t, g, req("q6", 0, 10, 5, "D"))  // ties q1 at et 0: after q1
	if got, want := g.Reservations(), []string{"q1", "q6", "q2", "q3", "q5"}; !slices.Equal(got, want) {
		t.Errorf("Reservations = %v, want %v", got, want)
	}
}

func TestAdmitCapacity(t *testing.T) {
	g := New([]Resource{{Name: "X", Capacity: 4, Level: 2}})
	w := func(id string, et, lt, width, demand int) Request {
		q := req(id, et, lt, 5)
		q.Width, q.Demand = width, demand
		return q
	}
	mustAdmit(t, g, w("q1", 0, 10, 2, 1))
	mustAdmit(t, g, w("q2", 0, 10, 2, 2)) // 2+2 <= 4: X not taken, fd 1
	if fd := g.FreeDeg("q2"); fd != 1 {
		t.Errorf("FreeDeg(q2) = %d, want 1", fd)
	}
	cases := []struct {
		q      Request
		ok     bool
		reason string
	}{
		{w("q3", 0, 10, 1, 1), false, "freeDeg 0: all 1 candidates taken by 2 overlapping reservations"},
		{w("q4", 11, 20, 1, 1), true, "admitted: freeDeg 1 of 1 candidates"},
		{w("q5", 11, 20, 5, 1), false, "no candidate resource: needs 5 nodes at level 1, largest has 4"},
		{w("q6", 11, 20, 1, 3), false, "no candidate resource: needs level 3, highest level is 2"},
		{Request{ID: "q7", ET: at(0), LT: at(10), Dur: sec(5), Allowed: []string{"Y"}}, false, "no candidate resource: none of the allowed resources [Y] exists"},
		{Request{ID: "q8", ET: at(0), LT: at(10), Dur: sec(11)}, false, "invalid request q8: dur 11s is longer than its window 10s"},
		{Request{ID: "q9", ET: at(10), LT: at(10), Dur: sec(1)}, false, "invalid request q9: window"},
		{Request{ET: at(0), LT: at(10), Dur: sec(1)}, false, "invalid request: empty id"},
		{w("q1", 30, 40, 1, 1), false, "invalid request: id q1 is already admitted"},
	}
	for _, c := range cases {
		ok, why := g.Admit(c.q)
		if ok != c.ok || !strings.HasPrefix(why, c.reason) {
			t.Errorf("Admit(%s) = %v %q, want %v %q", c.q.ID, ok, why, c.ok, c.reason)
		}
	}
}

func TestBindUnit(t *testing.T) {
	res := []Resource{{Name: "A", Capacity: 1, Level: 1}, {Name: "B", Capacity: 1, Level: 1, Cost: 2}}
	run := func(r, j string, exp, el int) Running {
		return Running{Resource: r, Job: j, Expected: sec(exp), Elapsed: sec(el)}
	}
	cases := []struct {
		name    string
		running []Running
		want    Binding
	}{
		{"free", nil, Binding{Resource: "A", Start: at(100)}},
		{"B waits 8 within slack 10", []Running{run("A", "a1", 30, 10), run("B", "b1", 20, 12)},
			Binding{Resource: "B", Start: at(108)}},
		{"equal waits: lower index", []Running{run("A", "a1", 30, 25), run("B", "b1", 20, 15)},
			Binding{Resource: "A", Start: at(105)}},
		{"waiting is exactly the slack", []Running{run("A", "a1", 30, 10), run("B", "b1", 20, 10)},
			Binding{Resource: "B", Start: at(110)}},
		{"nobody can wait: least w*elapsed", []Running{run("A", "a1", 30, 10), run("B", "b1", 40, 15)},
			Binding{Resource: "A", Start: at(100), Preempt: []string{"a1"}, Cost: 10}},
		{"w_B doubles B's cost", []Running{run("A", "a1", 60, 25), run("B", "b1", 40, 15)},
			Binding{Resource: "A", Start: at(100), Preempt: []string{"a1"}, Cost: 25}},
		{"past its expected time counts as ending now", []Running{run("A", "a1", 30, 45), run("B", "b1", 40, 15)},
			Binding{Resource: "A", Start: at(100)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := New(res)
			mustAdmit(t, g, req("q", 100, 150, 40)) // slack 10
			b, err := g.Bind("q", at(100), c.running)
			if err != nil {
				t.Fatal(err)
			}
			if b.Resource != c.want.Resource || !b.Start.Equal(c.want.Start) || !slices.Equal(b.Preempt, c.want.Preempt) || b.Cost != c.want.Cost {
				t.Errorf("Bind = %+v, want %+v", b, c.want)
			}
			if b.Reason == "" {
				t.Error("no reason")
			}
			if r, s, e, ok := g.Bound("q"); !ok || r != b.Resource || !s.Equal(b.Start) || !e.Equal(b.Start.Add(sec(40))) {
				t.Errorf("Bound = %s %v %v %v", r, s, e, ok)
			}
		})
	}
}

func TestBindCapacity(t *testing.T) {
	run := func(j string, nodes, exp, el int) Running {
		return Running{Resource: "S", Job: j, Nodes: nodes, Expected: sec(exp), Elapsed: sec(el)}
	}
	cases := []struct {
		name    string
		running []Running
		want    Binding
	}{
		// 7 of 8 busy, 5 wanted: j2 frees 2 at +5 (3 free), j3 2 more at +8.
		{"waits until enough nodes are free", []Running{run("j1", 3, 60, 10), run("j2", 2, 9, 4), run("j3", 2, 13, 5)},
			Binding{Resource: "S", Start: at(108)}},
		// nobody ends within the slack: free 4 nodes at least cost:
		// {j1,j2} 14, {j1,j3} 15, {j2,j3} 9.
		{"cheapest set that frees enough", []Running{run("j1", 3, 60, 10), run("j2", 2, 54, 4), run("j3", 2, 55, 5)},
			Binding{Resource: "S", Start: at(100), Preempt: []string{"j2", "j3"}, Cost: 9}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := New([]Resource{{Name: "S", Capacity: 8, Level: 1}})
			q := req("q", 100, 150, 40)
			q.Width = 5
			mustAdmit(t, g, q)
			b, err := g.Bind("q", at(100), c.running)
			if err != nil {
				t.Fatal(err)
			}
			if b.Resource != c.want.Resource || !b.Start.Equal(c.want.Start) || !slices.Equal(b.Preempt, c.want.Preempt) || b.Cost != c.want.Cost {
				t.Errorf("Bind = %+v, want %+v", b, c.want)
			}
		})
	}
}

func TestPlaceHolds(t *testing.T) {
	r := Resource{Name: "A", Capacity: 1}
	holds := []hold{{at(0), at(20), 1}}
	if o := place(r, holds, 1, at(5), at(30), sec(10), at(5), nil); !o.delayed || !o.start.Equal(at(20)) {
		t.Errorf("waits for the hold: %+v", o)
	}
	o := place(r, holds, 1, at(5), at(15), sec(10), at(5), []Running{{Resource: "A", Job: "j", Expected: sec(100)}})
	if o.ok || !strings.Contains(o.reason(), "bound reservations hold 1 of 1 nodes") {
		t.Errorf("a hold is never preempted: %+v", o)
	}
	// a hold starting inside the run counts too
	o = place(Resource{Name: "A", Capacity: 2}, []hold{{at(12), at(30), 2}}, 1, at(5), at(40), sec(10), at(5), nil)
	if !o.delayed || !o.start.Equal(at(30)) {
		t.Errorf("a later hold inside the run: %+v", o)
	}
}

func TestBindErrors(t *testing.T) {
	g := New(units("A"))
	mustAdmit(t, g, req("q", 100, 150, 40))
	if _, err := g.Bind("zz", at(100), nil); !errors.Is(err, ErrUnknown) {
		t.Errorf("unknown: %v", err)
	}
	if _, err := g.Bind("q", at(111), nil); !errors.Is(err, ErrTooLate) {
		t.Errorf("late: %v", err)
	}
	b, err := g.Bind("q", at(104), nil) // late but within the slack: starts now
	if err != nil || !b.Start.Equal(at(104)) {
		t.Errorf("late within slack: %+v %v", b, err)
	}
	if _, err := g.Bind("q", at(104), nil); !errors.Is(err, ErrBound) {
		t.Errorf("twice: %v", err)
	}
}

func TestBindNoResource(t *testing.T) {
	// Admission keeps this from happening through the API; a graph whose
	// reservation window was stretched behind its back over a bound hold
	// shows the error: the hold is never preempted.
	g := New([]Resource{{Name: "S", Capacity: 1, Level: 1}})
	mustAdmit(t, g, req("x", 0, 100, 100))
	if _, err := g.Bind("x", at(0), nil); err != nil {
		t.Fatal(err)
	}
	mustAdmit(t, g, req("y", 200, 300, 50))
	g.order[1].q.ET, g.order[1].q.LT = at(0), at(90)
	_, err := g.Bind("y", at(0), []Running{{Resource: "S", Job: "j", Expected: sec(500)}})
	if !errors.Is(err, ErrNoResource) || !strings.Contains(err.Error(), "bound reservations hold 1 of 1 nodes") {
		t.Errorf("err = %v", err)
	}
}

func TestBindRemovesEdges(t *testing.T) {
	g := New(units("A", "B"))
	mustAdmit(t, g, req("q1", 0, 20, 10))
	mustAdmit(t, g, req("q2", 5, 25, 10))
	mustAdmit(t, g, req("q3", 30, 40, 10))
	if fd := g.FreeDeg("q2"); fd != 1 { // 2 - min(T1 2, T2 1)
		t.Fatalf("FreeDeg(q2) = %d, want 1", fd)
	}
	b, err := g.Bind("q1", at(0), nil)
	if err != nil || b.Resource != "A" {
		t.Fatalf("Bind = %+v %v", b, err)
	}
	if got := g.Candidates("q1"); !slices.Equal(got, []string{"A"}) {
		t.Errorf("q1's candidates %v, want [A]", got)
	}
	if got := g.Candidates("q2"); !slices.Equal(got, []string{"B"}) {
		t.Errorf("q2's candidates %v, want [B]: A's hold [0,10) meets its window", got)
	}
	if got := g.Candidates("q3"); !slices.Equal(got, []string{"A", "B"}) {
		t.Errorf("q3's candidates %v, want [A B]: not in β(q1)", got)
	}
	if fd := g.FreeDeg("q2"); fd != 1 {
		t.Errorf("FreeDeg(q2) after binding = %d, want 1", fd)
	}
	g.AddResource(Resource{Name: "C", Capacity: 1, Level: 1})
	g.AddResource(Resource{Name: "A", Capacity: 9, Level: 9}) // duplicate: no-op
	if got := g.Candidates("q1"); !slices.Equal(got, []string{"A"}) {
		t.Errorf("a bound reservation gets no new edge: %v", got)
	}
	if got := g.Candidates("q2"); !slices.Equal(got, []string{"B", "C"}) {
		t.Errorf("q2's candidates %v, want [B C]", got)
	}
	g.Remove("q1")
	g.Remove("q1")
	if got := g.Reservations(); !slices.Equal(got, []string{"q2", "q3"}) {
		t.Errorf("after Remove: %v", got)
	}
}

func TestFailResource(t *testing.T) {
	g := New(units("A", "B"))
	mustAdmit(t, g, req("q1", 0, 10, 5))
	mustAdmit(t, g, req("q2", 1, 11, 5)) // 2 - min(2, 1) = 1
	mustAdmit(t, g, req("q3", 20, 30, 5, "B"))
	// A fails: q1 (fd 1) and q2 (fd 0) both break (1); q1 is dropped as the
	// earliest; then q2 has B to itself and is kept. q3 never was in η(A).
	if got := g.FailResource("A"); !slices.Equal(got, []string{"q1"}) {
		t.Errorf("dropped %v, want [q1]", got)
	}
	if got := g.Reservations(); !slices.Equal(got, []string{"q2", "q3"}) {
		t.Errorf("left %v", got)
	}
	if got := g.FailResource("A"); got != nil {
		t.Errorf("second failure of A dropped %v", got)
	}
	g.AddResource(Resource{Name: "A", Capacity: 1, Level: 1}) // back under a new index
	if got := g.Candidates("q2"); !slices.Equal(got, []string{"B", "A"}) {
		t.Errorf("q2's candidates %v, want [B A]", got)
	}

	// The reservation bound to the failed resource goes first.
	g = New(units("A", "B"))
	mustAdmit(t, g, req("q1", 0, 10, 5))
	mustAdmit(t, g, req("q2", 1, 11, 5))
	mustAdmit(t, g, req("q4", 12, 20, 5, "A"))
	if _, err := g.Bind("q1", at(0), nil); err != nil {
		t.Fatal(err)
	}
	if got := g.FailResource("A"); !slices.Equal(got, []string{"q1", "q4"}) {
		t.Errorf("dropped %v, want [q1 q4]", got)
	}
	if fd := g.FreeDeg("q2"); fd != 1 {
		t.Errorf("FreeDeg(q2) = %d", fd)
	}
}

// Binding c out of et order onto S (the lower index, free) would leave b, due
// as early, with S's two nodes taken by a and c; Bind takes T instead.
func TestBindStrandsNobody(t *testing.T) {
	g := New([]Resource{{Name: "S", Capacity: 2, Level: 1}, {Name: "T", Capacity: 1, Level: 1}})
	mustAdmit(t, g, req("a", 0, 10, 5, "S"))
	mustAdmit(t, g, req("b", 0, 10, 5, "S"))
	mustAdmit(t, g, req("c", 0, 10, 5))
	b, err := g.Bind("c", at(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Resource != "T" || !strings.Contains(b.Reason, "S would have left b without a free resource") {
		t.Errorf("Bind(c) = %+v", b)
	}
	for _, id := range []string{"a", "b"} {
		if fd := g.FreeDeg(id); fd != 1 {
			t.Errorf("FreeDeg(%s) = %d, want 1", id, fd)
		}
	}
	// In et order nobody is stranded: a, b to S, then c to T.
	g = New([]Resource{{Name: "S", Capacity: 2, Level: 1}, {Name: "T", Capacity: 1, Level: 1}})
	mustAdmit(t, g, req("a", 0, 10, 5, "S"))
	mustAdmit(t, g, req("b", 0, 10, 5, "S"))
	mustAdmit(t, g, req("c", 0, 10, 5))
	var got []string
	for _, id := range g.Reservations() {
		b, err := g.Bind(id, at(0), nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b.Resource)
	}
	if !slices.Equal(got, []string{"S", "S", "T"}) {
		t.Errorf("bound to %v", got)
	}
}

// A site that shrinks re-runs admission on its waiting reservations by the
// failure rule; one that grows admits wider requests from then on; a
// reservation bound to it stays either way.
func TestSetCapacity(t *testing.T) {
	wide := func(id string, et, lt, width int, allowed ...string) Request {
		q := req(id, et, lt, 5, allowed...)
		q.Width = width
		return q
	}
	g := New([]Resource{{Name: "A", Capacity: 4, Level: 1}, {Name: "B", Capacity: 4, Level: 1}})
	mustAdmit(t, g, wide("q1", 0, 10, 4))
	mustAdmit(t, g, wide("q2", 1, 11, 4)) // A and B: one each
	mustAdmit(t, g, wide("q3", 20, 30, 2, "A"))
	if got := g.SetCapacity("A", 4); got != nil {
		t.Errorf("unchanged capacity dropped %v", got)
	}
	if got := g.SetCapacity("nosuch", 2); got != nil {
		t.Errorf("unknown resource dropped %v", got)
	}
	// A shrinks to 2: q1 and q2 (4 wide) lose A and share B: q1, the
	// earliest, goes; q3 (2 wide) still fits A.
	if got := g.SetCapacity("A", 2); !slices.Equal(got, []string{"q1"}) {
		t.Errorf("shrink dropped %v, want [q1]", got)
	}
	if got := g.Candidates("q2"); !slices.Equal(got, []string{"B"}) {
		t.Errorf("q2's candidates after the shrink %v, want [B]", got)
	}
	if got := g.Reservations(); !slices.Equal(got, []string{"q2", "q3"}) {
		t.Errorf("left %v, want [q2 q3]", got)
	}
	// A 4-wide request for A alone is refused at 2 nodes and admitted once A
	// has grown back; q2 keeps the candidates it was left with.
	if ok, _ := g.Admit(wide("q4", 40, 50, 4, "A")); ok {
		t.Error("a 4-wide request was admitted on a 2-node A")
	}
	if got := g.SetCapacity("A", 8); got != nil {
		t.Errorf("growth dropped %v", got)
	}
	mustAdmit(t, g, wide("q4", 40, 50, 4, "A"))
	if got := g.Candidates("q2"); !slices.Equal(got, []string{"B"}) {
		t.Errorf("q2's candidates after the growth %v, want [B]", got)
	}
	// Bound to B, q2 stays when B shrinks below its width.
	if _, err := g.Bind("q2", at(1), nil); err != nil {
		t.Fatal(err)
	}
	r, _, _, _ := g.Bound("q2")
	if got := g.SetCapacity(r, 1); slices.Contains(got, "q2") {
		t.Errorf("a shrink dropped the bound q2: %v", got)
	}
	if _, _, _, ok := g.Bound("q2"); !ok {
		t.Error("q2 is no longer bound")
	}
}
