package benefit

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// benchSnapshot is a busy grid: sites of 16–256 nodes, half of them held
// for up to 8 h, random h and uplinks; jobs of 1–32 nodes and 10 min–8 h,
// a third with deadlines (some tight), half of those with a benefit
// function, some with origins, data, allowed and preferred sites.
func benchSnapshot(jobs, sites int, seed uint64) *policy.Snapshot {
	r := rand.New(rand.NewPCG(seed, 17))
	s := &policy.Snapshot{Now: t0, MultiSite: 1.2}
	for i := 0; i < sites; i++ {
		n := 16 << r.IntN(5)
		free := n / 2
		s.Sites = append(s.Sites, policy.Site{Name: fmt.Sprintf("s%02d", i), Nodes: n, Free: free, H: 0.5 + r.Float64(),
			Busy: []policy.Hold{{Nodes: n - free, Until: t0.Add(time.Duration(r.IntN(8*3600)) * time.Second)}}})
		s.Uplinks = append(s.Uplinks, policy.Link{SecPerByte: 1e-8 * float64(1+r.IntN(100)), Latency: time.Millisecond})
	}
	for i := 0; i < jobs; i++ {
		j := policy.Job{ID: fmt.Sprintf("j%05d", i), Width: 1 << r.IntN(6), Estimate: time.Duration(600+r.IntN(8*3600)) * time.Second,
			Submit: t0.Add(-time.Duration(r.IntN(3600)) * time.Second), Origin: -1, DataSize: int64(r.IntN(1e9))}
		if r.IntN(3) == 0 {
			j.Deadline = j.Submit.Add(time.Duration(1+r.IntN(24)) * time.Hour)
			if r.IntN(2) == 0 {
				j.Worth = policy.Worth{Shape: policy.Linear, A: 100, B: 0.5 + r.Float64()/2, C: 0.01}
			}
		}
		if r.IntN(5) == 0 {
			j.Origin = r.IntN(sites)
		}
		if r.IntN(5) == 0 {
			j.Allowed = []int{r.IntN(sites), r.IntN(sites), r.IntN(sites)}
		}
		if r.IntN(5) == 0 {
			j.Preferred = []int{r.IntN(sites)}
		}
		s.Queue = append(s.Queue, j)
	}
	return s
}
