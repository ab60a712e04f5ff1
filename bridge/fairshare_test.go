package bridge

import (
	"context"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/fairshare"
)

// TestFairShareChangesTheOrder: alice has just used the site for an
// hour, bob not at all; alice's next job was submitted before bob's and
// only one fits. FCFS starts hers; fair share starts his.
func TestFairShareChangesTheOrder(t *testing.T) {
	for _, tc := range []struct {
		order policy.Order
		first string
	}{{fairshare.FCFS{}, "alice"}, {fairshare.FairShare{}, "bob"}} {
		t.Run(tc.order.Name(), func(t *testing.T) {
			a := newFake("A", 4)
			b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a, H: 1}}, Planner: scriptPlanner{allowedFit},
				Policies: Policies{Order: tc.order}, FairShareHalfLife: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			r := ownedReq("alice")
			r.Nodes, r.Estimate = 4, 2*time.Hour
			used, err := b.Submit(ctx, r, t0)
			if err != nil {
				t.Fatal(err)
			}
			mustCycle(t, b, t0)
			a.set(used.ID, backends.StateRunning, 0)
			mustCycle(t, b, t0.Add(time.Second))
			a.set(used.ID, backends.StateCompleted, 0)
			mustCycle(t, b, t0.Add(time.Hour))
			if j, _ := b.Job(used.ID); j.State != Completed {
				t.Fatalf("alice's first job: %s", j.State)
			}
			ra, rb := ownedReq("alice"), ownedReq("bob")
			ra.Nodes, rb.Nodes = 4, 4
			ja, _ := b.Submit(ctx, ra, t0.Add(time.Hour+time.Second))
			jb, _ := b.Submit(ctx, rb, t0.Add(time.Hour+2*time.Second))
			mustCycle(t, b, t0.Add(time.Hour+3*time.Second))
			sa, _ := b.Job(ja.ID)
			sb, _ := b.Job(jb.ID)
			got := map[bool]string{true: "alice", false: "bob"}[sa.State == Dispatched]
			if (sa.State == Dispatched) == (sb.State == Dispatched) {
				t.Fatalf("alice %s, bob %s: want exactly one started", sa.State, sb.State)
			}
			if got != tc.first {
				t.Fatalf("%s started %s's job first, want %s's", tc.order.Name(), got, tc.first)
			}
		})
	}
}

// recordingOrder is fair share that keeps the last input it was asked
// about and its answer.
type recordingOrder struct {
	in   *policy.OrderInput
	perm []int
}

func (*recordingOrder) Name() string { return "fairshare" }
func (r *recordingOrder) Order(in *policy.OrderInput) ([]int, error) {
	p, err := fairshare.FairShare{}.Order(in)
	c := *in
	r.in, r.perm = &c, p
	return p, err
}

// TestFairShareSurvivesARestart: alice ran 3 nodes for an hour and bob 1
// node for half an hour; both ended. A broker restarted on the same store
// (Recover) orders a new queue — alice's job submitted before bob's —
// exactly as the broker that saw the use does: the same factors, bob's job
// first, and the use the formula of docs/users.md gives. Before the use
// was durable the restarted broker saw none and started alice's.
func TestFairShareSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	const h = time.Hour
	st := NewMemStore()
	a := newFake("A", 4)
	before := &recordingOrder{}
	b1, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a, H: 1}}, Planner: scriptPlanner{allowedFit}, Store: st,
		Policies: Policies{Order: before}, FairShareHalfLife: h})
	if err != nil {
		t.Fatal(err)
	}
	ra, rb := ownedReq("alice"), ownedReq("bob")
	ra.Nodes, rb.Nodes = 3, 1
	ja, _ := b1.Submit(ctx, ra, t0)
	jb, _ := b1.Submit(ctx, rb, t0)
	mustCycle(t, b1, t0)
	a.set(ja.ID, backends.StateRunning, 0)
	a.set(jb.ID, backends.StateRunning, 0)
	mustCycle(t, b1, t0.Add(time.Second))
	a.set(jb.ID, backends.StateCompleted, 0)
	mustCycle(t, b1, t0.Add(time.Second+30*time.Minute))
	a.set(ja.ID, backends.StateCompleted, 0)
	mustCycle(t, b1, t0.Add(time.Second+time.Hour))
	for _, id := range []string{ja.ID, jb.ID} {
		if j, _ := b1.Job(id); j.State != Completed {
			t.Fatalf("%s: %s", id, j.State)
		}
	}
	// The restart: a new broker on a copy of the store as it is now; the
	// first goes on as if nothing happened. Both see the same queue.
	st2 := NewMemStore()
	st.mu.Lock()
	for id, j := range st.jobs {
		st2.jobs[id], st2.ord[id] = j.Clone(), st.ord[id]
	}
	st2.use = maps.Clone(st.use)
	st.mu.Unlock()
	a2 := newFake("A", 4)
	after := &recordingOrder{}
	b2, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a2, H: 1}}, Planner: scriptPlanner{allowedFit}, Store: st2,
		Policies: Policies{Order: after}, FairShareHalfLife: h})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b2.Recover(ctx, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(3 * time.Hour)
	started := map[string]string{}
	for name, b := range map[string]*Broker{"before": b1, "after": b2} {
		ra, rb := ownedReq("alice"), ownedReq("bob")
		ra.Nodes, rb.Nodes = 4, 4
		j1, err := b.Submit(ctx, ra, now.Add(-2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		j2, err := b.Submit(ctx, rb, now.Add(-time.Second))
		if err != nil {
			t.Fatal(err)
		}
		mustCycle(t, b, now)
		s1, _ := b.Job(j1.ID)
		s2, _ := b.Job(j2.ID)
		switch {
		case s1.State == Dispatched && s2.State == Queued:
			started[name] = "alice"
		case s2.State == Dispatched && s1.State == Queued:
			started[name] = "bob"
		default:
			t.Fatalf("%s: alice's %s, bob's %s: want exactly one started", name, s1.State, s2.State)
		}
	}
	if started["before"] != "bob" || started["after"] != "bob" {
		t.Fatalf("started first: %v; want bob's job before and after the restart", started)
	}
	if before.in == nil || after.in == nil {
		t.Fatal("the order policy was not asked")
	}
	fb, fa := fairshare.Factors(before.in), fairshare.Factors(after.in)
	ub, ua := fairshare.Usage(before.in), fairshare.Usage(after.in)
	// docs/users.md: use(u) = n · h/ln2 · (2^(-(now - end)/h) - 2^(-(now - start)/h)).
	use := func(n int, start, end time.Time) float64 {
		hs := h.Seconds()
		return float64(n) * hs / math.Ln2 * (math.Exp2(-now.Sub(end).Seconds()/hs) - math.Exp2(-now.Sub(start).Seconds()/hs))
	}
	start := t0.Add(time.Second)
	want := map[string]float64{"alice": use(3, start, start.Add(time.Hour)), "bob": use(1, start, start.Add(30*time.Minute))}
	for _, u := range []string{"alice", "bob"} {
		for name, got := range map[string]map[string]float64{"before": ub, "after": ua} {
			if math.Abs(got[u]-want[u]) > 1e-6*want[u] {
				t.Errorf("%s the restart %s's use is %.3f node-seconds, the formula gives %.3f", name, u, got[u], want[u])
			}
		}
		if math.Abs(fb[u]-fa[u]) > 1e-12 {
			t.Errorf("%s's factor %.15f before the restart, %.15f after", u, fb[u], fa[u])
		}
	}
	if !slices.Equal(before.perm, after.perm) {
		t.Errorf("order %v before the restart, %v after", before.perm, after.perm)
	}
	if len(after.in.Usage) != 0 || len(after.in.Accounted) != 2 {
		t.Errorf("after the restart the order saw running jobs %+v and accounts %+v; want the two accounts only", after.in.Usage, after.in.Accounted)
	}
}

// TestFairShareChargesArrayElementsOnly: an array's elements are each
// charged for their own run, and its parent — which "runs" from its first
// element's start to its last one's end — is not charged on top of them,
// in the ledger's account and in the store's.
func TestFairShareChargesArrayElementsOnly(t *testing.T) {
	a := newFake("A", 100)
	st := NewMemStore()
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a, H: 1}}, Planner: scriptPlanner{firstFit}, Store: st,
		Policies: Policies{Order: fairshare.FairShare{}}, FairShareHalfLife: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r := ownedReq("alice")
	r.Nodes, r.Array = 2, "1-6%2"
	p, err := b.Submit(context.Background(), r, t0)
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	for i := 0; i < 40 && mustJob(t, b, p.ID).State == Running; i++ {
		now = now.Add(time.Minute)
		mustCycle(t, b, now)
		a.runAll(backends.StateRunning, 0)
		now = now.Add(10 * time.Minute)
		mustCycle(t, b, now)
		a.runAll(backends.StateCompleted, 0)
	}
	if p = mustJob(t, b, p.ID); p.State != Completed || p.Start.IsZero() {
		t.Fatalf("parent %s, started %v", p.State, p.Start)
	}
	var want UserUse
	for i := 1; i <= 6; i++ {
		e := mustJob(t, b, ElementID(p.ID, i))
		if e.State != Completed || !e.End.After(e.Start) {
			t.Fatalf("element %d: %s from %v to %v", i, e.State, e.Start, e.End)
		}
		want = want.Add(Charge{User: "alice", NodeSeconds: ChargeOf(2, e.Start, e.End, time.Hour), At: e.End, HalfLife: time.Hour})
	}
	stored, _ := st.Usage(context.Background())
	b.mu.Lock()
	got := b.used["alice"]
	b.mu.Unlock()
	for name, u := range map[string]UserUse{"ledger": got, "store": stored["alice"]} {
		if math.Abs(u.NodeSeconds-want.NodeSeconds) > 1e-6 || !u.At.Equal(want.At) {
			t.Errorf("the %s's account: %+v, want the six elements' %+v", name, u, want)
		}
	}
}
