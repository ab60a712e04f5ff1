package bridge

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

func ownedReq(owner string) Request {
	r := req(1)
	r.Owner = owner
	return r
}

// TestUserLimits: max_queued refuses the submission over it with the
// numbers; max_running and max_running_per_site keep the jobs over them
// queued with the reason (in status and explain) until one ends.
func TestUserLimits(t *testing.T) {
	a, c := newFake("A", 10), newFake("B", 10)
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a, H: 1}, {Name: "B", Backend: c, H: 1}},
		Planner: scriptPlanner{allowedFit}, Owner: "daemon",
		Users: map[string]UserLimits{"alice": {MaxQueued: 3, MaxRunning: 2}, DefaultUser: {MaxRunningPerSite: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var alice, bob []string
	for range 3 {
		j, err := b.Submit(ctx, ownedReq("alice"), t0)
		if err != nil {
			t.Fatal(err)
		}
		alice = append(alice, j.ID)
	}
	_, err = b.Submit(ctx, ownedReq("alice"), t0)
	if !errors.Is(err, ErrOverLimit) || !strings.Contains(err.Error(), "alice has 3 job(s) waiting") || !strings.Contains(err.Error(), "max_queued is 3") {
		t.Fatalf("alice's 4th submission: %v; want ErrOverLimit naming max_queued 3", err)
	}
	// An array counts its elements.
	arr := ownedReq("carol")
	arr.Array = "1-5"
	if _, err := b.Submit(ctx, arr, t0); err != nil {
		t.Fatalf("carol's array (no max_queued): %v", err)
	}
	for range 3 {
		j, err := b.Submit(ctx, ownedReq("bob"), t0) // the default entry: one at each site
		if err != nil {
			t.Fatal(err)
		}
		bob = append(bob, j.ID)
	}
	mustCycle(t, b, t0)
	// The planner put all of bob's at A: one started, the others were
	// dropped from the plan; in the next cycle A is full for him and the
	// planner sees B only.
	if j, _ := b.Job(bob[1]); j.State != Queued || !strings.Contains(j.Reason, "would have 2 job(s) at A") {
		t.Fatalf("bob's second after the first cycle: %s %q", j.State, j.Reason)
	}
	mustCycle(t, b, t0.Add(time.Second))
	state := func(id string) *Job {
		j, err := b.Job(id)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	if s0, s1, s2 := state(alice[0]).State, state(alice[1]).State, state(alice[2]); s0 != Dispatched || s1 != Dispatched || s2.State != Queued ||
		!strings.Contains(s2.Reason, "max_running is 2") {
		t.Fatalf("alice's jobs: %s %s %s %q; want two dispatched, the third queued for max_running", s0, s1, s2.State, s2.Reason)
	}
	b0, b1, b2 := state(bob[0]), state(bob[1]), state(bob[2])
	if b0.State != Dispatched || b1.State != Dispatched || b0.Sites() == b1.Sites() || b2.State != Queued || !strings.Contains(b2.Reason, "max_running_per_site") {
		t.Fatalf("bob's jobs: %s@%s %s@%s %s %q; want one at A, one at B, the third queued for max_running_per_site", b0.State, b0.Sites(), b1.State, b1.Sites(), b2.State, b2.Reason)
	}
	e, err := b.ExplainJob(ctx, alice[2], t0)
	if err != nil || e.Action != "wait" || len(e.Reasons) == 0 || !strings.Contains(e.Reasons[0], "max_running is 2") {
		t.Fatalf("explain alice's third: %+v %v", e, err)
	}
	if !slices.ContainsFunc(state(alice[2]).Events, func(ev Event) bool { return ev.Kind == "waiting" && strings.Contains(ev.Msg, "max_running") }) {
		t.Error("no waiting event says why alice's third job waits")
	}
	// One of alice's ends: her third starts, its reason cleared.
	site := a
	if state(alice[0]).Sites() != "A:1" {
		site = c
	}
	site.set(alice[0], backends.StateCompleted, 0)
	mustCycle(t, b, t0.Add(time.Minute))
	mustCycle(t, b, t0.Add(2*time.Minute))
	if j := state(alice[2]); j.State != Dispatched || j.Reason != "" {
		t.Fatalf("alice's third after one ended: %s %q", j.State, j.Reason)
	}
	// Jobs without an owner are the daemon's: the default entry bounds them.
	d1, _ := b.Submit(ctx, req(1), t0)
	d2, _ := b.Submit(ctx, req(1), t0)
	d3, _ := b.Submit(ctx, req(1), t0)
	mustCycle(t, b, t0.Add(3*time.Minute))
	mustCycle(t, b, t0.Add(4*time.Minute))
	n := 0
	for _, id := range []string{d1.ID, d2.ID, d3.ID} {
		if state(id).State == Dispatched {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d of the daemon user's 3 jobs dispatched; want 2 (max_running_per_site 1, two sites)", n)
	}
}
