package coalloc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// benchGrid is n sites of 16–256 nodes, h in [0.5, 1.5], each partly busy
// with 4–16 holds ending in the next 12 hours, and a 32-wide job (the
// paper's widest) from site 0 with 50 MB to move.
func benchGrid(n int, seed uint64) (*policy.Snapshot, policy.Job) {
	r := rand.New(rand.NewPCG(seed, 2))
	s := &policy.Snapshot{Now: t0, MultiSite: 1.2}
	for i := 0; i < n; i++ {
		nodes := 16 + r.IntN(241)
		site := policy.Site{Name: fmt.Sprintf("s%d", i), Nodes: nodes, Free: nodes, H: 0.5 + r.Float64()}
		for k := 4 + r.IntN(13); k > 0 && site.Free > 0; k-- {
			h := 1 + r.IntN(max(1, site.Free/2))
			site.Free -= h
			site.Busy = append(site.Busy, policy.Hold{Nodes: h, Until: t0.Add(time.Duration(r.IntN(12*3600)) * time.Second)})
		}
		s.Sites = append(s.Sites, site)
	}
	s.Links = links(n, 1e-7, 600*time.Millisecond)
	j := policy.Job{ID: "bench", Width: 32, Estimate: time.Hour, Origin: 0, DataSize: 50e6}
	return s, j
}

// BenchmarkSelect is one resource selection (Algorithm 2 or 3) for one job.
func BenchmarkSelect(b *testing.B) {
	cases := []struct {
		sel   Selector
		sites []int
	}{
		{Greedy{}, []int{3, 10, 100, 1000}},
		{&Optimal{MaxSites: 16}, []int{3, 10, 16}},
		{SingleSite{}, []int{3, 1000}},
	}
	for _, c := range cases {
		for _, n := range c.sites {
			b.Run(fmt.Sprintf("%s/sites=%d", c.sel.Name(), n), func(b *testing.B) {
				s, j := benchGrid(n, 1)
				s.Queue = []policy.Job{j}
				st := NewState(s)
				sites, d, p := admit(s, &j, false, "bench", nil)
				if d != nil || p != nil {
					b.Fatal(d, p)
				}
				b.ReportAllocs()
				for b.Loop() {
					k := newCollector(3)
					if err := c.sel.Select(st, &j, sites, k); err != nil {
						b.Fatal(err)
					}
					if k.Best() == nil {
						b.Fatal("no placement")
					}
				}
			})
		}
	}
}

// benchQueue is the paper's testbed with all but free nodes per site busy
// (holds ending over the next 6 hours) and a queue of n jobs of width 1–32
// and 5 min–6 h estimates, so that most jobs are reserved or backfilled.
func benchQueue(n int, seed uint64, free ...int) *policy.Snapshot {
	r := rand.New(rand.NewPCG(seed, 3))
	s := testbed(1.2)
	s.Links = links(3, 1e-7, 600*time.Millisecond)
	for i := range s.Sites {
		site := &s.Sites[i]
		keep := 0
		if len(free) > 0 {
			keep = free[i]
		}
		for site.Free > keep {
			h := min(site.Free-keep, 1+r.IntN(16))
			busy(s, i, h, time.Duration(60+r.IntN(6*3600))*time.Second)
		}
	}
	for k := 0; k < n; k++ {
		s.Queue = append(s.Queue, policy.Job{
			ID: fmt.Sprintf("q%d", k), Width: 1 + r.IntN(32), Origin: r.IntN(3), DataSize: int64(r.IntN(100e6)),
			Estimate: time.Duration(300+r.IntN(6*3600)) * time.Second, Submit: t0,
		})
	}
	return s
}

// BenchmarkPlan is one whole Plan call on the 3-site testbed, for each
// backfilling rule: a 100- or 500-job queue, with every node busy ("busy")
// or with 24, 12 and 6 nodes free at Beijing, Shanghai and Harbin
// ("some-free", so EASY and conservative find jobs to backfill).
func BenchmarkPlan(b *testing.B) {
	for _, name := range []string{"greedy-none", "greedy-easy", "greedy-conservative", "optimal-easy", "optimal-conservative", "single-site-easy", "sabin"} {
		for _, c := range []struct {
			q    int
			free []int
		}{{100, nil}, {500, nil}, {100, []int{24, 12, 6}}, {500, []int{24, 12, 6}}} {
			q := c.q
			label := "busy"
			if c.free != nil {
				label = "some-free"
			}
			b.Run(fmt.Sprintf("%s/queue=%d/%s", name, q, label), func(b *testing.B) {
				s := benchQueue(q, 1, c.free...)
				pl, err := ByName(name)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := pl.Plan(context.Background(), s); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
