package bridge

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/benefit"
	"github.com/gridsub/gridsub/policy/coalloc"
)

// unreachablePlanners are the real planners the unreachable tests run: the
// live default (coalloc) and the benefit planner, which both rejected a job
// as too wide when its sites were only down.
func unreachablePlanners(t *testing.T) []policy.Planner {
	t.Helper()
	g, err := coalloc.ByName("greedy-local-easy")
	if err != nil {
		t.Fatal(err)
	}
	bp, err := benefit.ByName(benefit.Benefit)
	if err != nil {
		t.Fatal(err)
	}
	return []policy.Planner{g, bp}
}

func countEvents(j *Job, kind string) int {
	n := 0
	for _, e := range j.Events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// Two sites, both unreachable from the start (never seen: their size is
// unknown): a 2-node job waits with the reason, once, through several
// cycles, and runs when one site answers again.
func TestAllSitesUnreachableJobWaits(t *testing.T) {
	for _, pl := range unreachablePlanners(t) {
		t.Run(pl.Name(), func(t *testing.T) {
			a, bs := &flaky{fakeSite: newFake("A", 4)}, &flaky{fakeSite: newFake("B", 4)}
			a.down.Store(true)
			bs.down.Store(true)
			b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a, H: 1}, {Name: "B", Backend: bs, H: 1}}, Planner: pl})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			j, err := b.Submit(ctx, req(2), t0)
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k < 3; k++ {
				mustCycle(t, b, t0.Add(time.Duration(k)*time.Second))
				got, _ := b.Job(j.ID)
				if got.State != Queued || got.Reason != "waiting: every eligible site is unreachable (A, B)" {
					t.Fatalf("cycle %d: state %s, reason %q; want queued, waiting for an unreachable site", k, got.State, got.Reason)
				}
				if n := countEvents(got, "waiting"); n != 1 {
					t.Fatalf("cycle %d: %d waiting events (%s); want one", k, n, kinds(got))
				}
			}
			bs.down.Store(false)
			mustCycle(t, b, t0.Add(time.Minute))
			got, _ := b.Job(j.ID)
			if got.State == Queued || got.State == Rejected || got.Sites() != "B:2" || got.Reason != "" {
				t.Fatalf("after B came back: state %s, sites %q, reason %q; want it running on B", got.State, got.Sites(), got.Reason)
			}
		})
	}
}

// A job too wide for the sites that are up, not for the grid: B (8 nodes,
// seen before) is down and A has 4; a 6-node job waits (the planner
// explains why), and runs once B is back.
func TestDownSiteKeepsItsSize(t *testing.T) {
	for _, pl := range unreachablePlanners(t) {
		t.Run(pl.Name(), func(t *testing.T) {
			a, bs := &flaky{fakeSite: newFake("A", 4)}, &flaky{fakeSite: newFake("B", 8)}
			b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a, H: 1}, {Name: "B", Backend: bs, H: 1}}, Planner: pl})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			first, err := b.Submit(ctx, req(1), t0)
			if err != nil {
				t.Fatal(err)
			}
			mustCycle(t, b, t0) // both seen
			if got, _ := b.Job(first.ID); got.State == Queued || got.State == Rejected {
				t.Fatalf("first job: %s %q", got.State, got.Reason)
			}
			bs.down.Store(true)
			r := req(6)
			r.NoSplit = true
			j, err := b.Submit(ctx, r, t0.Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			mustCycle(t, b, t0.Add(2*time.Second))
			got, _ := b.Job(j.ID)
			if got.State != Queued || strings.HasPrefix(got.Reason, unreachableReason) {
				t.Fatalf("with B down: state %s, reason %q; want queued by the planner (A is up), not rejected", got.State, got.Reason)
			}
			bs.down.Store(false)
			mustCycle(t, b, t0.Add(time.Minute))
			got, _ = b.Job(j.ID)
			if got.Sites() != "B:6" {
				t.Fatalf("after B came back: state %s, sites %q, reason %q", got.State, got.Sites(), got.Reason)
			}
		})
	}
}
