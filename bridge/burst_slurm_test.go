package bridge

import (
	"context"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// TestRealSlurmBurstFillsBothSites: on the real SLURM testbed (siteA 8
// nodes, siteB 4, both idle), 20 one-node jobs submitted in bursts of 5
// between cycles fill the free nodes of both sites before any job waits at
// a site: no site is sent more jobs than it had free nodes, and the 8 left
// over wait in gridsub's queue. SLURM starts a job only at its next
// scheduling pass, so right after a burst sinfo still shows the nodes
// idle: without counting its own pending jobs the broker sent 17 of 20 to
// siteA (issue #23).
func TestRealSlurmBurstFillsBothSites(t *testing.T) {
	a, bs := realRemapSite(t, "siteA"), realRemapSite(t, "siteB")
	ctx := context.Background()
	for _, s := range []*struct {
		name string
		in   func(context.Context) (*backends.SiteInfo, error)
	}{{"siteA", a.Info}, {"siteB", bs.Info}} {
		in, err := s.in(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if in.FreeNodes != in.Nodes {
			t.Skipf("%s is not idle (%d of %d nodes free): the burst needs both sites idle", s.name, in.FreeNodes, in.Nodes)
		}
	}
	b := greedyBroker(t, NewMemStore(), false, a, bs)
	var ids []string
	t.Cleanup(func() {
		for _, id := range ids {
			_ = b.Cancel(context.Background(), id, time.Now())
		}
		for range 3 {
			_, _ = b.Cycle(context.Background(), time.Now())
		}
	})
	r := req(1)
	r.Command, r.Estimate = []string{"sleep", "60"}, 2*time.Minute
	for c := 0; c < 4; c++ {
		for i := 0; i < 5; i++ {
			j, err := b.Submit(ctx, r, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		mustCycle(t, b, time.Now())
	}
	at := map[string]int{}
	queued := 0
	for _, id := range ids {
		j, _ := b.Job(id)
		switch j.State {
		case Queued:
			queued++
		case Dispatched, Running:
			for _, c := range j.Comps {
				at[c.Site] += c.Nodes
			}
		default:
			t.Fatalf("job %s: %s (%s)", id, j.State, j.Reason)
		}
	}
	t.Logf("after the burst: siteA %d, siteB %d, queued in gridsub %d", at["siteA"], at["siteB"], queued)
	if at["siteA"] != 8 || at["siteB"] != 4 || queued != 8 {
		t.Fatalf("after 20 jobs in 4 bursts: siteA got %d (8 nodes), siteB %d (4 nodes), %d wait in gridsub; want 8, 4, 8", at["siteA"], at["siteB"], queued)
	}
}
