package bridge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// BenchmarkRemapPass is one remapping pass's decision (planMoves) over n
// jobs waiting at their sites and 50 sites, each with 20 running jobs in
// its busy profile: the jobs wait at the 25 full sites, and each is
// compared with the 25 sites that have room (the gain threshold is set so
// that none moves: every job is weighed, none leaves the pass early).
func BenchmarkRemapPass(b *testing.B) {
	for _, n := range []int{500, 1000, 2000} {
		b.Run(fmt.Sprintf("jobs=%d/sites=50", n), func(b *testing.B) {
			now := t0
			clock := func() time.Time { return now }
			var sites []backends.Backend
			for s := 0; s < 50; s++ {
				q := newQueueSite(fmt.Sprintf("S%02d", s), 60+8*(s%2), clock) // odd sites: 8 nodes free
				for k := 0; k < 20; k++ {
					q.foreign = append(q.foreign, backends.Allocation{Nodes: 3, Until: t0.Add(time.Duration(10+s+k) * time.Minute)})
				}
				sites = append(sites, q)
			}
			spread := func(s *policy.Snapshot, j policy.Job) *policy.Decision {
				var id int
				fmt.Sscanf(j.ID, "g%d", &id)
				return &policy.Decision{Job: j.ID, Action: policy.Start, Chosen: policy.Option{Parts: []policy.Part{{Site: 2 * (id % 25), Nodes: j.Width}}}}
			}
			br := remapBroker(&testing.T{}, &RemapOptions{MinGain: 1000 * time.Hour}, DiscardStoreForBench(), spread, sites...)
			for i := 0; i < n; i++ {
				r := req(1 + i%8)
				r.Estimate = time.Hour
				if _, err := br.Submit(context.Background(), r, now); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := br.Cycle(context.Background(), now); err != nil {
				b.Fatal(err)
			}
			now = t0.Add(time.Minute)
			var rep CycleReport
			if _, err := br.stages.snapshot.snapshot(context.Background(), now, &rep); err != nil {
				b.Fatal(err)
			}
			free := make([]int, 50)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for s := range free {
					free[s] = br.stages.snapshot.snap.Sites[s].Free
				}
				br.mu.Lock()
				moves := br.rm.planMoves(now, free)
				br.mu.Unlock()
				if len(moves) != 0 {
					b.Fatal("no move expected")
				}
			}
			b.StopTimer()
			br.mu.Lock()
			defer br.mu.Unlock()
			for _, id := range br.live {
				if !br.rm.movable(br.jobs[id], now, br.rm.remapOptions()) {
					b.Fatalf("job %s is not weighed", id)
				}
			}
		})
	}
}

// DiscardStoreForBench keeps nothing (the store's cost is not the pass's).
func DiscardStoreForBench() Store { return &DiscardStore{} }
