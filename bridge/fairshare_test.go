package bridge

import (
	"context"
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
