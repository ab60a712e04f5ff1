package fairshare

import (
	"math"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// The example of docs/users.md: alice ran 8 nodes for the last two hours,
// bob nothing; alice's job was submitted first. With equal shares her
// factor is 2^-2 and bob's 1: fair share puts bob's job first, where FCFS
// keeps hers first.
func TestFairShareExample(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	in := &policy.OrderInput{Now: now, HalfLife: time.Hour,
		Queue: []policy.QueuedJob{{ID: "a1", User: "alice", Submit: now.Add(-10 * time.Minute), Nodes: 4}, {ID: "b1", User: "bob", Submit: now.Add(-time.Minute), Nodes: 4}},
		Usage: []policy.UsageRecord{{User: "alice", Nodes: 8, Start: now.Add(-2 * time.Hour), End: now}}}
	u := Usage(in)
	want := 8 * 3600 / math.Ln2 * (1 - 0.25) // 8 nodes · ∫ over the last 2 half-lives
	if math.Abs(u["alice"]-want) > 1e-6 || u["bob"] != 0 {
		t.Fatalf("usage %v, want alice %.1f node-seconds", u, want)
	}
	f := Factors(in)
	if math.Abs(f["alice"]-0.25) > 1e-12 || f["bob"] != 1 {
		t.Fatalf("factors %v, want alice 2^-2, bob 1", f)
	}
	got, _ := FairShare{}.Order(in)
	if got[0] != 1 || got[1] != 0 {
		t.Fatalf("fairshare order %v, want bob's job first", got)
	}
	fc, _ := FCFS{}.Order(in)
	if fc[0] != 0 {
		t.Fatalf("fcfs order %v, want alice's first", fc)
	}
	// Twice bob's shares for alice: U/S = 1/(2/3) = 1.5, F = 2^-1.5 — still after bob.
	in.Shares = map[string]float64{"alice": 2}
	if f := Factors(in); math.Abs(f["alice"]-math.Exp2(-1.5)) > 1e-12 {
		t.Fatalf("with 2 shares alice's factor is %v, want 2^-1.5", f["alice"])
	}
	// Use decays: the same use ten half-lives ago barely counts against
	// a user who used as much an hour ago.
	in.Shares = nil
	in.Usage = []policy.UsageRecord{{User: "alice", Nodes: 8, Start: now.Add(-12 * time.Hour), End: now.Add(-10 * time.Hour)},
		{User: "bob", Nodes: 8, Start: now.Add(-3 * time.Hour), End: now.Add(-time.Hour)}}
	got, _ = FairShare{}.Order(in)
	if got[0] != 0 {
		t.Fatalf("after decay the order is %v, want alice's (old use) first", got)
	}
	// A running job (no End) counts until now.
	in.Usage = []policy.UsageRecord{{User: "alice", Nodes: 1, Start: now.Add(-time.Hour)}}
	if u := Usage(in); math.Abs(u["alice"]-3600/math.Ln2*0.5) > 1e-6 {
		t.Fatalf("a running job's use %v", u)
	}
}

// TestAccountedUseIsTheSameUse: a job's use summed up as an account at its
// end (the broker's durable form) weighs at now what the job's record
// does, for any now after it.
func TestAccountedUseIsTheSameUse(t *testing.T) {
	end := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	start := end.Add(-90 * time.Minute)
	h := time.Hour
	atEnd := 8 * h.Seconds() / math.Ln2 * (1 - math.Exp2(-1.5)) // 8 nodes for 1.5 half-lives, at its end
	for _, later := range []time.Duration{0, time.Minute, 3 * time.Hour, 30 * time.Hour} {
		now := end.Add(later)
		rec := Usage(&policy.OrderInput{Now: now, HalfLife: h, Usage: []policy.UsageRecord{{User: "a", Nodes: 8, Start: start, End: end}}})
		acc := Usage(&policy.OrderInput{Now: now, HalfLife: h, Accounted: []policy.AccountedUse{{User: "a", NodeSeconds: atEnd, At: end}}})
		if math.Abs(rec["a"]-acc["a"]) > 1e-9*math.Max(1, rec["a"]) {
			t.Errorf("%s after the end: the record weighs %v, the account %v", later, rec["a"], acc["a"])
		}
	}
	// An account dated after now weighs fully, never more.
	if u := Usage(&policy.OrderInput{Now: end, HalfLife: h, Accounted: []policy.AccountedUse{{User: "a", NodeSeconds: 10, At: end.Add(time.Hour)}}}); u["a"] != 10 {
		t.Errorf("an account from the future weighs %v", u["a"])
	}
}
