package policytest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
)

var t0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

// grid is three sites: A (8 nodes, h 1, 4 free, busy until t0+2h), B (4
// nodes, h 0.5, all free), C (2 nodes, down), linked at 1 MB/s.
func grid() *policy.Snapshot {
	link := policy.Link{SecPerByte: 1e-6, Latency: 500 * time.Millisecond}
	links := make([][]policy.Link, 3)
	for i := range links {
		links[i] = []policy.Link{link, link, link}
		links[i][i] = policy.Link{}
	}
	return &policy.Snapshot{Now: t0, MultiSite: 1.2, Links: links, Sites: []policy.Site{
		{Name: "A", Nodes: 8, Free: 4, H: 1, Busy: []policy.Hold{{Nodes: 4, Until: t0.Add(2 * time.Hour)}}},
		{Name: "B", Nodes: 4, Free: 4, H: 0.5},
		{Name: "C", Nodes: 2, Free: 2, H: 1, Down: true},
	}}
}

func same(t *testing.T, what string, a, b any) {
	t.Helper()
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("%s: not deterministic: %+v then %+v", what, a, b)
	}
}

func unchanged(t *testing.T, what string, before, after any) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("%s modified its input:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

func reasons(t *testing.T, what string, st policy.Status) {
	t.Helper()
	if len(st.Reasons) == 0 || slices.Contains(st.Reasons, "") {
		t.Fatalf("%s: %s without reasons", what, st.Code)
	}
}

// Feasibility checks f's contract.
func Feasibility(t *testing.T, f policy.Feasibility) {
	t.Helper()
	if f.Name() == "" {
		t.Fatal("empty Name")
	}
	s := grid()
	for _, tc := range []struct {
		name  string
		d     policy.Demand
		never bool
	}{
		{"fits", policy.Demand{Width: 2, Estimate: time.Hour}, false},
		{"wider than every site together", policy.Demand{Width: 100, Estimate: time.Hour}, true},
		{"no allowed site", policy.Demand{Width: 1, Estimate: time.Hour, Sites: []string{"nowhere"}}, true},
		{"deadline in the past", policy.Demand{Width: 1, Estimate: time.Hour, Deadline: t0.Add(-time.Hour)}, true},
		{"best effort", policy.Demand{Width: 1, Estimate: time.Hour, Deadline: t0.Add(-time.Hour), BestEffort: true}, false},
	} {
		d, s0, d0 := tc.d, grid(), tc.d
		v, err := f.Feasible(&d, s)
		if err != nil {
			t.Fatalf("%s: Feasible: %v", tc.name, err)
		}
		v2, _ := f.Feasible(&d, s)
		same(t, tc.name, v, v2)
		unchanged(t, tc.name+": Feasible", s0, s)
		unchanged(t, tc.name+": Feasible", d0, d)
		switch {
		case v.Status.Code != policy.Success && v.Status.Code != policy.Unresolvable:
			t.Fatalf("%s: code %s, want success or unresolvable", tc.name, v.Status.Code)
		case tc.never && v.Feasible():
			t.Fatalf("%s: feasible, but it can never run", tc.name)
		case !tc.never && !v.Feasible():
			t.Fatalf("%s: refused: %s", tc.name, v.Status)
		case !v.Feasible():
			reasons(t, tc.name, v.Status)
			if v.Cause == policy.CauseNone {
				t.Fatalf("%s: refused without a cause", tc.name)
			}
		}
		late, err := f.Late(&d, s)
		if err != nil {
			t.Fatalf("%s: Late: %v", tc.name, err)
		}
		late2, _ := f.Late(&d, s)
		same(t, tc.name+": Late", late, late2)
		if d.Deadline.IsZero() && late != "" {
			t.Fatalf("%s: late without a deadline: %s", tc.name, late)
		}
	}
}

// admissionRun is one sequence of book operations and what they gave.
type admissionRun struct {
	Admits   []policy.Status
	Bind     policy.ResvBinding
	BindErr  string
	Unknown  bool
	Lists    [][]string
	Dropped  []string
	Refusals []policy.Status
}

func runBook(t *testing.T, a policy.Admission) admissionRun {
	t.Helper()
	res := []policy.ResvResource{{Name: "r1", Capacity: 2}, {Name: "r2", Capacity: 2}}
	b := a.NewBook(res, 7)
	var out admissionRun
	for i, id := range []string{"q1", "q2", "q3"} {
		q := policy.ResvRequest{ID: id, ET: t0.Add(time.Duration(i) * time.Minute), LT: t0.Add(3 * time.Hour), Dur: time.Hour, Width: 2}
		out.Admits = append(out.Admits, b.Admit(q, t0.Add(-time.Hour), nil))
	}
	out.Lists = append(out.Lists, b.Reservations())
	before := b.Reservations()
	for _, q := range []policy.ResvRequest{
		{ID: "bad", ET: t0, LT: t0.Add(time.Hour), Dur: 2 * time.Hour},                            // longer than its window
		{ID: "q1", ET: t0, LT: t0.Add(3 * time.Hour), Dur: time.Hour},                             // already admitted
		{ID: "wide", ET: t0, LT: t0.Add(3 * time.Hour), Dur: time.Hour, Width: 99},                // no resource that big
		{ID: "where", ET: t0, LT: t0.Add(3 * time.Hour), Dur: time.Hour, Allowed: []string{"r9"}}, // no such resource
	} {
		st := b.Admit(q, t0.Add(-time.Hour), nil)
		if st.Code != policy.Unresolvable {
			t.Fatalf("Admit %s: %s, want unresolvable", q.ID, st)
		}
		reasons(t, "Admit "+q.ID, st)
		out.Refusals = append(out.Refusals, st)
		if got := b.Reservations(); !slices.Equal(got, before) {
			t.Fatalf("a refused Admit %s changed the book: %v, was %v", q.ID, got, before)
		}
	}
	if _, err := b.Bind("nope", t0, nil); !errors.Is(err, policy.ErrResvUnknown) {
		t.Fatalf("Bind of an unknown id: %v, want ErrResvUnknown", err)
	}
	out.Unknown = true
	var err error
	out.Bind, err = b.Bind(before[0], t0, nil)
	if err != nil {
		out.BindErr = err.Error()
	} else if out.Bind.Resource != "r1" && out.Bind.Resource != "r2" {
		t.Fatalf("bound to %q, no resource of the book", out.Bind.Resource)
	}
	b.Remove("nope")
	b.Remove(before[0])
	out.Lists = append(out.Lists, b.Reservations())
	if slices.Contains(b.Reservations(), before[0]) {
		t.Fatalf("%s still listed after Remove", before[0])
	}
	out.Dropped = append(out.Dropped, b.FailResource("r2")...)
	out.Dropped = append(out.Dropped, b.SetCapacity("r1", 1)...)
	b.AddResource(policy.ResvResource{Name: "r3", Capacity: 4})
	out.Lists = append(out.Lists, b.Reservations())
	for _, id := range out.Dropped {
		if slices.Contains(b.Reservations(), id) {
			t.Fatalf("dropped %s still listed", id)
		}
	}
	return out
}

// Admission checks a's contract over one sequence of book operations:
// admissions answer with reasons, refusals leave the book as it was,
// Bind of an unknown id wraps ErrResvUnknown, Remove and dropped ids take
// reservations out, and equal sequences on equal seeds answer alike.
func Admission(t *testing.T, a policy.Admission) {
	t.Helper()
	if a.Name() == "" {
		t.Fatal("empty Name")
	}
	r1 := runBook(t, a)
	for i, st := range r1.Admits {
		if st.Code != policy.Success && st.Code != policy.Unresolvable {
			t.Fatalf("admission %d: code %s", i, st.Code)
		}
		reasons(t, "admission", st)
	}
	if r1.Admits[0].Code != policy.Success {
		t.Fatalf("the first reservation on an empty book was refused: %s", r1.Admits[0])
	}
	same(t, "book", r1, runBook(t, a))
}

// Trust checks tr's contract.
func Trust(t *testing.T, tr policy.Trust) {
	t.Helper()
	if tr.Name() == "" {
		t.Fatal("empty Name")
	}
	in := &policy.TrustInput{
		Observer: policy.TrustNode{},
		Sites:    []policy.TrustNode{{Name: "A", Power: 8, Bandwidth: 1e6}, {Name: "B", Power: 8, Bandwidth: 1e6}, {Name: "C", Power: 2}},
		Outcomes: map[policy.TrustKey]policy.Outcomes{
			{To: "A"}: {Completed: 10}, {To: "B"}: {Completed: 2, Failed: 8, Unreachable: 1}, {From: "A", To: "B"}: {Failed: 3},
		},
	}
	keep := &policy.TrustInput{Observer: in.Observer, Sites: slices.Clone(in.Sites), Outcomes: map[policy.TrustKey]policy.Outcomes{}}
	for k, v := range in.Outcomes {
		keep.Outcomes[k] = v
	}
	s1, err := tr.Scores(in)
	if err != nil {
		t.Fatalf("Scores: %v", err)
	}
	s2, _ := tr.Scores(in)
	same(t, "Scores", s1, s2)
	unchanged(t, "Scores", keep, in)
	for _, n := range in.Sites {
		v, ok := s1[n.Name]
		if !ok || !(v > 0 && v <= 1) {
			t.Fatalf("score of %s = %v (present %v), want in (0, 1]", n.Name, v, ok)
		}
	}
	if s1["B"] >= s1["A"] {
		t.Fatalf("B failed where A completed, yet scores A %v, B %v", s1["A"], s1["B"])
	}
	named := &policy.TrustInput{Observer: in.Sites[0], Sites: in.Sites, Outcomes: in.Outcomes}
	n1, err := tr.Scores(named)
	if err != nil {
		t.Fatalf("Scores as site A: %v", err)
	}
	n2, _ := tr.Scores(named)
	same(t, "Scores as site A", n1, n2)
	for _, n := range in.Sites {
		if v, ok := n1[n.Name]; !ok || !(v > 0 && v <= 1) {
			t.Fatalf("A's score of %s = %v (present %v), want in (0, 1]", n.Name, v, ok)
		}
	}
	o := policy.Outcomes{Completed: 4, Failed: 2, Unreachable: 1}
	if got := tr.Decay(o, 0, time.Hour); got != o {
		t.Fatalf("Decay with no time elapsed: %+v", got)
	}
	if got := tr.Decay(o, time.Hour, 0); got != o {
		t.Fatalf("Decay with no half-life: %+v", got)
	}
	d := tr.Decay(o, time.Hour, time.Hour)
	same(t, "Decay", d, tr.Decay(o, time.Hour, time.Hour))
	if d.Completed > o.Completed || d.Failed > o.Failed || d.Unreachable > o.Unreachable || d.Completed < 0 {
		t.Fatalf("Decay grew or went negative: %+v from %+v", d, o)
	}
}

// Tiering checks tr's contract.
func Tiering(t *testing.T, tr policy.Tiering) {
	t.Helper()
	if tr.Name() == "" {
		t.Fatal("empty Name")
	}
	s := grid()
	for _, asked := range []policy.Tier{policy.TierHigh, policy.TierLow, policy.TierNone} {
		if got, why := tr.Tier(&policy.TierDemand{Asked: asked, Estimate: time.Hour, Submit: t0}, s.Sites); got != asked || why == "" {
			t.Fatalf("asked %s: got %s (%q)", asked, got, why)
		}
	}
	for _, d := range []policy.TierDemand{
		{Estimate: time.Hour, Submit: t0},
		{Estimate: time.Hour, Submit: t0, Deadline: t0.Add(90 * time.Minute)},
		{Estimate: time.Hour, Submit: t0, Deadline: t0.Add(48 * time.Hour), Sites: []string{"B"}},
	} {
		d0, s0 := d, grid()
		got, why := tr.Tier(&d, s.Sites)
		got2, why2 := tr.Tier(&d, s.Sites)
		same(t, "Tier", [2]string{string(got), why}, [2]string{string(got2), why2})
		unchanged(t, "Tier", d0, d)
		unchanged(t, "Tier", s0, s)
		if (got != policy.TierHigh && got != policy.TierLow && got != policy.TierNone) || why == "" {
			t.Fatalf("Tier %+v: %q (%q)", d, got, why)
		}
		if d.Deadline.IsZero() && got != policy.TierNone {
			t.Fatalf("no deadline, tier %s", got)
		}
	}
	job := policy.Job{ID: "j", Width: 2, Estimate: time.Hour, Submit: t0, Origin: -1, Deadline: t0.Add(5 * time.Hour)}
	dec := policy.Decision{Job: "j", Action: policy.Start, Chosen: policy.Option{Parts: []policy.Part{{Site: 0, Nodes: 2}}, Start: t0, Runtime: time.Hour}}
	for _, tc := range []struct {
		allowed []int
		rc      []float64
	}{{nil, nil}, {[]int{0, 2}, nil}, {nil, []float64{5, 1, 0}}, {[]int{0, 2}, []float64{5, 1, 0}}} {
		allowed := tc.allowed
		j := job
		j.Allowed = allowed
		in := &policy.CopyInput{Snapshot: s, Job: &j, Decision: dec, RC: tc.rc}
		f1, c1 := tr.Copies(in)
		f2, c2 := tr.Copies(in)
		same(t, "Copies", [2][]policy.Part{f1, c1}, [2][]policy.Part{f2, c2})
		unchanged(t, "Copies", grid(), s)
		if len(f1) == 0 {
			t.Fatal("Copies: no first copy")
		}
		for _, p := range append(slices.Clone(f1), c1...) {
			if p.Site < 0 || p.Site >= len(s.Sites) || p.Nodes <= 0 {
				t.Fatalf("Copies: part %+v", p)
			}
		}
		for _, p := range c1 {
			if slices.ContainsFunc(f1, func(q policy.Part) bool { return q.Site == p.Site }) {
				t.Fatalf("second copy %+v shares a site with the first %+v", c1, f1)
			}
			if s.Sites[p.Site].Down || (allowed != nil && !slices.Contains(allowed, p.Site)) {
				t.Fatalf("second copy on %s (down %v, allowed %v)", s.Sites[p.Site].Name, s.Sites[p.Site].Down, allowed)
			}
		}
		if allowed != nil && c1 != nil {
			t.Fatalf("the only other allowed site is down, yet a second copy at %+v", c1)
		}
	}
	for _, dl := range []time.Time{{}, t0.Add(3 * time.Hour), t0.Add(100 * time.Hour)} {
		j := job
		j.Deadline = dl
		in := &policy.BackupInput{Snapshot: s, Job: &j, Now: t0, Primary: dec.Chosen, Backup: []policy.Part{{Site: 1, Nodes: 2}}}
		b1 := tr.Backup(in)
		same(t, "Backup", b1, tr.Backup(in))
		if b1.Why == "" || (!b1.Passive && b1.Due.IsZero()) {
			t.Fatalf("Backup (deadline %v): %+v", dl, b1)
		}
		if dl.IsZero() && !b1.Passive {
			t.Fatalf("no deadline, yet an active backup: %+v", b1)
		}
	}
}

// Remap checks r's contract: one job waits at A (busy for 2 h) while B
// could start it now.
func Remap(t *testing.T, r policy.Remap) {
	t.Helper()
	if r.Name() == "" {
		t.Fatal("empty Name")
	}
	s := grid()
	s.Sites[0].Free = 0
	s.Sites[0].Busy = []policy.Hold{{Nodes: 8, Until: t0.Add(2 * time.Hour)}}
	waiting := []policy.Waiting{
		{Job: policy.Job{ID: "w1", Width: 2, Estimate: 30 * time.Minute, Origin: -1}, Parts: []policy.Part{{Site: 0, Nodes: 2}}, Estimates: []time.Time{{}}},
		{Job: policy.Job{ID: "w2", Width: 2, Estimate: 30 * time.Minute, Origin: -1}, Parts: []policy.Part{{Site: 0, Nodes: 2}}, Estimates: []time.Time{{}}},
		{Job: policy.Job{ID: "w3", Width: 2, Estimate: 30 * time.Minute, Origin: -1}, Parts: []policy.Part{{Site: 0, Nodes: 2}}, Estimates: []time.Time{{}}},
	}
	for _, minGain := range []time.Duration{10 * time.Minute, 1000 * time.Hour} {
		in := &policy.RemapInput{Now: t0, Snapshot: s, Waiting: waiting, Free: []int{0, 4, 0}, MinGain: minGain}
		keep := &policy.RemapInput{Now: t0, Snapshot: grid(), Waiting: slices.Clone(waiting), Free: []int{0, 4, 0}, MinGain: minGain}
		keep.Snapshot.Sites[0].Free, keep.Snapshot.Sites[0].Busy = 0, slices.Clone(s.Sites[0].Busy)
		m1, err := r.Moves(in)
		if err != nil {
			t.Fatalf("Moves: %v", err)
		}
		m2, _ := r.Moves(in)
		same(t, "Moves", m1, m2)
		unchanged(t, "Moves", keep, in)
		used := make([]int, len(in.Free))
		seen := map[string]bool{}
		for _, mv := range m1 {
			if seen[mv.Job] || !slices.ContainsFunc(waiting, func(w policy.Waiting) bool { return w.Job.ID == mv.Job }) {
				t.Fatalf("move of %s: twice, or not a waiting job", mv.Job)
			}
			seen[mv.Job] = true
			if mv.Gain < minGain {
				t.Fatalf("move of %s gains %s, less than %s", mv.Job, mv.Gain, minGain)
			}
			for _, p := range mv.To.Parts {
				used[p.Site] += p.Nodes
			}
		}
		for i := range used {
			if used[i] > in.Free[i] {
				t.Fatalf("moves take %d nodes of %s, %d free", used[i], s.Sites[i].Name, in.Free[i])
			}
		}
		if minGain > 100*time.Hour && len(m1) > 0 {
			t.Fatalf("no move can gain %s, yet %+v", minGain, m1)
		}
	}
}

// Order checks the queue-order contract: a permutation of the queue,
// the same answer for the same input (and the input left as it was), and
// the broker's order kept among jobs it cannot tell apart (one user, no
// use).
func Order(t *testing.T, o policy.Order) {
	t.Helper()
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	in := &policy.OrderInput{Now: now, HalfLife: time.Hour, Shares: map[string]float64{"b": 2}}
	for i := range 12 {
		in.Queue = append(in.Queue, policy.QueuedJob{ID: fmt.Sprintf("j%02d", i), User: []string{"a", "b", "c"}[i%3], Submit: now.Add(-time.Duration(12-i) * time.Minute), Nodes: 1 + i%4})
	}
	for i := range 6 {
		in.Usage = append(in.Usage, policy.UsageRecord{User: []string{"a", "b", "c"}[i%3], Nodes: 1 + i, Start: now.Add(-time.Duration(3+i) * time.Hour), End: now.Add(-time.Duration(i) * time.Hour)})
	}
	in.Accounted = []policy.AccountedUse{{User: "c", NodeSeconds: 7200, At: now.Add(-30 * time.Minute)}, {User: "d", NodeSeconds: 1e5, At: now.Add(-time.Hour)}}
	before := fmt.Sprintf("%+v", *in)
	p1, err := o.Order(in)
	if err != nil {
		t.Fatalf("%s: %v", o.Name(), err)
	}
	p2, _ := o.Order(in)
	same(t, o.Name()+": two orders of one input", p1, p2)
	if fmt.Sprintf("%+v", *in) != before {
		t.Fatalf("%s changed its input", o.Name())
	}
	seen := make([]bool, len(in.Queue))
	if len(p1) != len(in.Queue) {
		t.Fatalf("%s: %d positions for %d jobs", o.Name(), len(p1), len(in.Queue))
	}
	for _, k := range p1 {
		if k < 0 || k >= len(seen) || seen[k] {
			t.Fatalf("%s: %v is not a permutation", o.Name(), p1)
		}
		seen[k] = true
	}
	one := &policy.OrderInput{Now: now, Queue: []policy.QueuedJob{{ID: "x", User: "a"}, {ID: "y", User: "a"}, {ID: "z", User: "a"}}}
	p, err := o.Order(one)
	if err != nil || len(p) != 3 || p[0] != 0 || p[1] != 1 || p[2] != 2 {
		t.Fatalf("%s: one user, no use: %v %v; want the broker's order", o.Name(), p, err)
	}
}
