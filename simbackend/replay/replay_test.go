package replay

import (
	"context"
	"encoding/json"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/coalloc"
	"github.com/gridsub/gridsub/simbackend/swf"
)

// paper000 is the three-site testbed of paper 000 with small heterogeneity.
func paper000() []Site {
	return []Site{{"Beijing", 128, 1}, {"Shanghai", 64, 1}, {"Harbin", 32, 1}}
}

func links(n int, bw float64, lat time.Duration) [][]policy.Link {
	l := make([][]policy.Link, n)
	for i := range l {
		l[i] = make([]policy.Link, n)
		for k := range l[i] {
			if i != k {
				l[i][k] = policy.Link{SecPerByte: 1 / bw, Latency: lat}
			}
		}
	}
	return l
}

func loadCTC(tb testing.TB, n int, wide bool) []Job {
	tb.Helper()
	dir, ok := swf.WorkloadsDir()
	if !ok {
		tb.Skip("workload traces not found: set GRIDSUB_WORKLOADS or put ../shared/workloads beside the repository")
	}
	r, err := swf.Open(filepath.Join(dir, "CTC-SP2-1996-3.1-cln.swf.gz"))
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	jobs, err := swf.ReadJobs(r, swf.StrongFilter{MaxProcs: 338}.Apply, n)
	if err != nil {
		tb.Fatal(err)
	}
	sh, err := swf.Shape(jobs, swf.ShapeOptions{N: n, WidthCap: 32, Sites: 3, Seed: 7, Wide90: wide})
	if err != nil {
		tb.Fatal(err)
	}
	return FromShaped(sh)
}

// feedCTC reads the filtered CTC trace (the first n jobs; 0: all) as
// Workload 1 into a Feed, as loadCTC does into a slice.
func feedCTC(tb testing.TB, n int) Feed {
	tb.Helper()
	dir, ok := swf.WorkloadsDir()
	if !ok {
		tb.Skip("workload traces not found: set GRIDSUB_WORKLOADS or put ../shared/workloads beside the repository")
	}
	f, err := ReadFeed(context.Background(), filepath.Join(dir, "CTC-SP2-1996-3.1-cln.swf.gz"), swf.StrongFilter{MaxProcs: 338}.Apply,
		swf.ShapeOptions{N: n, WidthCap: 32, Sites: 3, Seed: 7})
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// TestReplayPaper000Workload1 replays the first 2,000 CTC jobs of Workload 1
// through the broker and checks the outcome is complete and sane.
func TestReplayPaper000Workload1(t *testing.T) {
	jobs := loadCTC(t, 2000, false)
	pl, err := coalloc.ByName("greedy-easy")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Setup{Sites: paper000(), Links: links(3, 1e6, 575*time.Millisecond), MultiSite: 1.1, Planner: pl}, jobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	t.Logf("cycles %d ran %d rejected %d failed %d AWRT %.0f AWWT %.0f AU %.3f bsld %.2f", res.Cycles, s.Ran, s.Rejected, res.Failed, s.AWRT, s.AWWT, s.AU, s.MeanBSLD)
	if res.Unfinished != 0 || s.Ran+s.Rejected != len(jobs) {
		t.Fatalf("%d unfinished, %d ran + %d rejected of %d", res.Unfinished, s.Ran, s.Rejected, len(jobs))
	}
	if s.Rejected != 0 {
		t.Fatalf("no job of width <= 32 may be rejected on 224 nodes, got %d", s.Rejected)
	}
	if s.AU <= 0.05 || s.AU > 1 || s.AWWT < 0 || s.AWRT < s.AWWT {
		t.Fatalf("implausible metrics: %+v", s)
	}
	for _, r := range res.Records {
		if r.Start.Before(r.Submit) || r.End.Before(r.Start) {
			t.Fatalf("job %s: submit %v start %v end %v", r.ID, r.Submit, r.Start, r.End)
		}
	}
}

// BenchmarkReplayCTC10k replays the first 10,000 jobs of CTC (Workload 1) on
// paper 000's testbed with greedy selection and EASY backfilling.
func BenchmarkReplayCTC10k(b *testing.B) {
	jobs := loadCTC(b, 10000, false)
	pl, _ := coalloc.ByName("greedy-easy")
	b.ResetTimer()
	for range b.N {
		if _, err := Run(context.Background(), Setup{Sites: paper000(), Links: links(3, 1e6, 575*time.Millisecond), MultiSite: 1.1, Planner: pl}, jobs, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReplayDeterministic runs the same workload twice, with co-allocation
// and large heterogeneity so every stage has choices to make, and requires
// byte-identical records.
func TestReplayDeterministic(t *testing.T) {
	jobs := loadCTC(t, 600, true)
	sites := []Site{{"Beijing", 128, 1.4}, {"Shanghai", 64, 1.0}, {"Harbin", 32, 0.6}}
	var out [2]string
	for i := range out {
		pl, err := coalloc.ByName("optimal-easy")
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), Setup{Sites: sites, Links: links(3, 1e5, 575*time.Millisecond), MultiSite: 1.2, Planner: pl, Seed: 3}, jobs, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res.Records)
		out[i] = string(b)
		multi := 0
		for _, r := range res.Records {
			if len(r.Parts) > 1 {
				multi++
			}
		}
		if multi == 0 {
			t.Fatal("no job was co-allocated: the test would not exercise the multi-site path")
		}
	}
	if out[0] != out[1] {
		t.Fatal("two replays of the same workload differ")
	}
}

// BenchmarkReplayCTCFull replays the whole filtered CTC-SP2 trace (77,199
// jobs, widths capped at 32 as in paper 000's workloads) on paper 000's
// three-site testbed, reading the trace included, once per planner.
func BenchmarkReplayCTCFull(b *testing.B) {
	for _, name := range []string{"greedy-easy", "optimal-easy", "greedy-conservative"} {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				// Read while replayed: the trace is read, filtered and
				// shaped on one core while the replay runs on the other.
				f := feedCTC(b, 0)
				pl, err := coalloc.ByName(name)
				if err != nil {
					b.Fatal(err)
				}
				res, err := RunFeed(context.Background(), Setup{Sites: paper000(), Links: links(3, 1e6, 575*time.Millisecond), MultiSite: 1.1, Planner: pl}, f, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(len(res.Records)), "jobs")
				b.ReportMetric(res.Summary.AU, "AU")
			}
			b.ReportMetric(float64(peakRSS())/(1<<20), "peak-RSS-MB")
		})
	}
}

// peakRSS is the process's peak resident memory so far, in bytes (run one
// benchmark per process to read it as that benchmark's peak).
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss << 10 // kilobytes on Linux
}
