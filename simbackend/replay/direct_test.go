package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/coalloc"
	"github.com/gridsub/gridsub/simbackend/swf"
)

// oddJobs is a synthetic workload with what CTC lacks: jobs that outrun
// their estimate (killed at the walltime), jobs that ran for no time, jobs
// wider than the grid (rejected) or than any one site, jobs from no site.
func oddJobs(seed uint64, n int) []Job {
	r := rand.New(rand.NewPCG(seed, 1))
	var out []Job
	t := time.Duration(0)
	for i := range n {
		t += time.Duration(r.IntN(400)) * time.Second
		est := time.Duration(1+r.IntN(7200)) * time.Second
		run := time.Duration(r.Int64N(int64(est)/time.Second.Nanoseconds()+1)) * time.Second
		switch r.IntN(10) {
		case 0:
			run = est + time.Duration(1+r.IntN(600))*time.Second
		case 1:
			run = 0
		}
		w := 1 + r.IntN(40)
		if r.IntN(50) == 0 {
			w = 100 + r.IntN(200)
		}
		out = append(out, Job{ID: fmt.Sprint(i), Submit: t, Width: w, Estimate: est, Runtime: run,
			Origin: r.IntN(4) - 1, Size: int64(r.IntN(100)) << 20})
	}
	return out
}

// plainPlanner hides a planner's other interfaces (policy.Incremental).
type plainPlanner struct{ policy.Planner }

// sameResults fails unless two replays gave byte-identical records and the
// same counts.
func sameResults(t *testing.T, want, got *Result) {
	t.Helper()
	b, _ := json.Marshal(want.Records)
	d, _ := json.Marshal(got.Records)
	if string(b) != string(d) {
		for i := range want.Records {
			if i >= len(got.Records) {
				break
			}
			x, _ := json.Marshal(want.Records[i])
			y, _ := json.Marshal(got.Records[i])
			if string(x) != string(y) {
				t.Fatalf("record %d differs:\nbroker %s\ndirect %s", i, x, y)
			}
		}
		t.Fatalf("records differ: broker %d, direct %d", len(want.Records), len(got.Records))
	}
	if want.Failed != got.Failed || want.Unfinished != got.Unfinished || want.Cycles != got.Cycles {
		t.Fatalf("counts differ: broker failed %d unfinished %d cycles %d; direct %d %d %d",
			want.Failed, want.Unfinished, want.Cycles, got.Failed, got.Unfinished, got.Cycles)
	}
}

// TestDirectMatchesBroker holds the direct driver to the broker path: for
// every planner, on both of paper 000's workloads and both heterogeneity
// sets, with co-allocation, transfers and jobs killed at their walltime,
// the two replays give byte-identical records and the same counts.
func TestDirectMatchesBroker(t *testing.T) {
	// Workload 2 overloads the testbed: its queue, and with it every
	// conservative pass, grows without bound, so it is replayed shorter.
	n, n2 := 1500, 600
	if testing.Short() || raceOn {
		n, n2 = 500, 250
	}
	small := paper000()
	large := []Site{{"Beijing", 128, 1.4}, {"Shanghai", 64, 1.0}, {"Harbin", 32, 0.6}}
	cases := []struct {
		sites []Site
		load  int // 0: Workload 1, 1: Workload 2, 2: oddJobs
		bw    float64
		p     float64
	}{
		{small, 0, 1e6, 1.1},
		{large, 1, 1e5, 1.2},
		{large, 2, 1e6, 1.3},
	}
	loads := [][]Job{loadCTC(t, n, false), loadCTC(t, n2, true), oddJobs(5, n)}
	for _, name := range coalloc.Names() {
		for ci, c := range cases {
			t.Run(fmt.Sprintf("%s/%d", name, ci), func(t *testing.T) {
				jobs := loads[c.load]
				// broker; direct through a Session; direct with a snapshot
				// per cycle (the planner's Incremental side hidden).
				var out [3]*Result
				for k := range out {
					pl, err := coalloc.ByName(name)
					if err != nil {
						t.Fatal(err)
					}
					if k == 2 {
						pl = plainPlanner{pl}
					}
					res, err := Run(context.Background(), Setup{Sites: c.sites, Links: links(3, c.bw, 575*time.Millisecond),
						MultiSite: c.p, Planner: pl, Seed: 3, Broker: k == 0}, jobs, nil)
					if err != nil {
						t.Fatal(err)
					}
					out[k] = res
				}
				for k := 1; k < len(out); k++ {
					sameResults(t, out[0], out[k])
				}
				multi, rejected := 0, 0
				for _, r := range out[0].Records {
					if len(r.Parts) > 1 {
						multi++
					}
					if r.Rejected {
						rejected++
					}
				}
				if c.load == 2 && (out[0].Failed == 0 || rejected == 0) {
					t.Fatalf("the odd workload killed %d jobs and rejected %d: it no longer tests those paths", out[0].Failed, rejected)
				}
				t.Logf("%d records, %d co-allocated, %d failed, %d rejected, %d cycles", len(out[0].Records), multi, out[0].Failed, rejected, out[0].Cycles)
			})
		}
	}
}

// TestRunFeedMatchesRun: a workload replayed while it is read gives the
// records of the same workload read first, on the direct driver and on the
// broker path (Sabin's replicas take it there), and a trace that cannot be
// read is an error, not a short replay.
func TestRunFeedMatchesRun(t *testing.T) {
	n := 9000 // more than two batches
	if testing.Short() || raceOn {
		n = 5000
	}
	jobs := loadCTC(t, n, false)
	for _, name := range []string{"greedy-easy", "sabin"} {
		var out [2]*Result
		for k := range out {
			pl, err := coalloc.ByName(name)
			if err != nil {
				t.Fatal(err)
			}
			setup := Setup{Sites: paper000(), Links: links(3, 1e6, 575*time.Millisecond), MultiSite: 1.1, Planner: pl}
			if k == 0 {
				out[k], err = Run(context.Background(), setup, jobs, nil)
			} else {
				out[k], err = RunFeed(context.Background(), setup, feedCTC(t, n), nil)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if len(out[1].Records) != n {
			t.Fatalf("%s: %d records from the feed, want %d", name, len(out[1].Records), n)
		}
		sameResults(t, out[0], out[1])
	}
	bad := filepath.Join(t.TempDir(), "bad.swf")
	if err := os.WriteFile(bad, []byte("1 0 0 10 4 -1 -1 4 20 -1 1 1 1 1 1 1 -1 -1\n2 5 0 10 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := ReadFeed(context.Background(), bad, nil, swf.ShapeOptions{Sites: 3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	pl, _ := coalloc.ByName("greedy-easy")
	if _, err := RunFeed(context.Background(), Setup{Sites: paper000(), Planner: pl}, f, nil); err == nil || !strings.Contains(err.Error(), "bad.swf") {
		t.Fatalf("a trace broken at line 2 replayed with err = %v; want an error naming the file", err)
	}
	if _, err := ReadFeed(context.Background(), filepath.Join(t.TempDir(), "missing.swf"), nil, swf.ShapeOptions{Sites: 3}); err == nil {
		t.Fatal("a missing trace gave a feed")
	}
}

// failingPlanner fails its nth Plan.
type failingPlanner struct {
	policy.Planner
	n int
}

func (f *failingPlanner) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	if f.n--; f.n == 0 {
		return nil, errors.New("planner broke")
	}
	return f.Planner.Plan(ctx, s)
}

// TestRunFeedStopsItsReader: a replay that fails halfway through a feed
// stops the reader (which closes the feed) rather than leaving it blocked
// on a batch nobody takes.
func TestRunFeedStopsItsReader(t *testing.T) {
	before := runtime.NumGoroutine()
	f := feedCTC(t, 0)
	pl, _ := coalloc.ByName("greedy-easy")
	_, err := RunFeed(context.Background(), Setup{Sites: paper000(), Planner: &failingPlanner{pl, 50}}, f, nil)
	if err == nil || !strings.Contains(err.Error(), "planner broke") {
		t.Fatalf("err = %v, want the planner's", err)
	}
	// Nobody reads the feed any more: only a stopped reader ends.
	for end := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d goroutines 10 s after the replay failed, %d before it: the reader is still blocked", runtime.NumGoroutine(), before)
		}
	}
}
