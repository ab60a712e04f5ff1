package simbackend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/simbackend/swf"
)

// Reference aggregates of the pyss EASY schedule of CTC-SP2 (workloads README).
const refMeanBSLD = 49.5713

func workloadFile(tb testing.TB, name string) string {
	tb.Helper()
	dir, ok := swf.WorkloadsDir()
	if !ok {
		tb.Skipf("workload traces not found (set GRIDSUB_WORKLOADS or put them in ../shared/workloads; looked in %q)", dir)
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("trace %s not found: %v", p, err)
	}
	return p
}

func replayCTC(tb testing.TB) *ReplayResult {
	tb.Helper()
	f, err := os.Open(workloadFile(tb, "CTC-SP2-1996-3.1-cln.swf.gz"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	res, err := ReplayEASY(context.Background(), f, 338, ReplayOptions{
		EASY:   EASYOptions{ReferenceCompatible: true},
		Filter: swf.StrongFilter{MaxProcs: 338}.Apply,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

// referenceStarts reads the pyss output: job id -> start (submit + wait).
func referenceStarts(tb testing.TB) map[int64]int64 {
	tb.Helper()
	r, err := swf.Open(workloadFile(tb, filepath.Join("reference", "CTC-SP2.pyss-easy-backfill.swf.gz")))
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	m := make(map[int64]int64, 77199)
	for {
		j, err := r.Next()
		if err == io.EOF {
			return m
		}
		if err != nil {
			tb.Fatal(err)
		}
		m[j.ID] = j.Submit + j.Wait
	}
}

func TestCTCEasyMatchesReference(t *testing.T) {
	res := replayCTC(t)
	f, err := os.Open(workloadFile(t, filepath.Join("reference", "CTC-SP2.pyss-easy-backfill.swf.gz")))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := MatchReference(res, f)
	if err != nil {
		t.Fatal(err)
	}
	if res.Kept != 77199 || m.Missing != 0 {
		t.Fatalf("kept %d jobs (want 77199), %d missing from the reference", res.Kept, m.Missing)
	}
	bsld := res.Summary.MeanBSLD
	dev := math.Abs(bsld-refMeanBSLD) / refMeanBSLD
	t.Logf("start times identical for %d of %d jobs (%.3f %%); mean bsld %.4f (reference %.4f, off by %.4f %%); mean wait %.1f s, mean response %.1f s",
		m.Same, m.Jobs, m.Percent, bsld, refMeanBSLD, 100*dev, res.Summary.MeanWait, res.Summary.MeanResponse)
	if m.FirstDiff >= 0 {
		t.Logf("first job that differs: %d", m.FirstDiff)
	}
	if m.Percent < 99.9 {
		t.Errorf("only %.3f %% of start times match the reference (want >= 99.9 %%)", m.Percent)
	}
	if dev > 0.005 {
		t.Errorf("mean bsld %.4f deviates %.3f %% from the reference %.4f (want <= 0.5 %%)", bsld, 100*dev, refMeanBSLD)
	}
	// Reference aggregates from the workloads README.
	if math.Abs(res.Summary.MeanWait-14272.6) > 0.1 || math.Abs(res.Summary.MeanResponse-25526.8) > 0.1 {
		t.Errorf("mean wait %.2f / response %.2f, reference 14272.6 / 25526.8", res.Summary.MeanWait, res.Summary.MeanResponse)
	}
}

func TestMatchReferenceCountsDifferences(t *testing.T) {
	res := &ReplayResult{Jobs: []ReplayJob{{ID: 1, Submit: 0, Start: 5}, {ID: 2, Submit: 3, Start: 9}, {ID: 7, Submit: 4, Start: 4}}}
	ref := "; reference\n1 0 5 10 1 -1 -1 1 10 -1 -1 1 -1 -1 -1 -1 -1 -1\n2 3 5 10 1 -1 -1 1 10 -1 -1 1 -1 -1 -1 -1 -1 -1\n"
	m, err := MatchReference(res, strings.NewReader(ref))
	if err != nil {
		t.Fatal(err)
	}
	if m.Jobs != 3 || m.Same != 1 || m.Missing != 1 || m.FirstDiff != 2 || math.Abs(m.Percent-100.0/3) > 1e-9 {
		t.Fatalf("%+v", m)
	}
}

func BenchmarkCTCEasyReference(b *testing.B) {
	data, err := os.ReadFile(workloadFile(b, "CTC-SP2-1996-3.1-cln.swf.gz"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := ReplayEASY(context.Background(), bytesReader(data), 338, ReplayOptions{
			EASY:   EASYOptions{ReferenceCompatible: true},
			Filter: swf.StrongFilter{MaxProcs: 338}.Apply,
		})
		if err != nil || res.Kept != 77199 {
			b.Fatal(err)
		}
	}
}

func bytesReader(b []byte) io.Reader { return &sliceReader{b: b} }

type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// BenchmarkCTCReadFilter is the reading share of BenchmarkCTCEasyReference:
// gunzip, parse and filter the trace without scheduling it.
func BenchmarkCTCReadFilter(b *testing.B) {
	data, err := os.ReadFile(workloadFile(b, "CTC-SP2-1996-3.1-cln.swf.gz"))
	if err != nil {
		b.Fatal(err)
	}
	f := swf.StrongFilter{MaxProcs: 338}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, err := swf.NewReader(bytesReader(data))
		if err != nil {
			b.Fatal(err)
		}
		kept := 0
		for {
			j, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if f.Apply(&j) {
				kept++
			}
		}
		if kept != 77199 {
			b.Fatalf("kept %d", kept)
		}
	}
}

// TestCTCEasyDefaultMode replays CTC in gridsub's default EASY mode (ends
// before submissions at the same instant, a pass on every submission) and
// reports how far it is from the reference: the two modes are meant to
// differ only in those same-instant details.
func TestCTCEasyDefaultMode(t *testing.T) {
	if testing.Short() {
		t.Skip("a second full CTC replay")
	}
	f, err := os.Open(workloadFile(t, "CTC-SP2-1996-3.1-cln.swf.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := ReplayEASY(context.Background(), f, 338, ReplayOptions{Filter: swf.StrongFilter{MaxProcs: 338}.Apply})
	if err != nil {
		t.Fatal(err)
	}
	ref := referenceStarts(t)
	match := 0
	for _, j := range res.Jobs {
		if ref[j.ID] == j.Start {
			match++
		}
	}
	pct := 100 * float64(match) / float64(len(res.Jobs))
	t.Logf("default mode: %.3f %% of start times as in the reference, mean bsld %.4f (reference %.4f), mean wait %.1f s",
		pct, res.Summary.MeanBSLD, refMeanBSLD, res.Summary.MeanWait)
	if match == len(res.Jobs) {
		t.Error("default mode reproduces the reference exactly: the options make no difference")
	}
	if math.Abs(res.Summary.MeanBSLD-refMeanBSLD)/refMeanBSLD > 0.25 {
		t.Errorf("default mode mean bsld %.2f is far from the reference %.2f: more than same-instant details differ", res.Summary.MeanBSLD, refMeanBSLD)
	}
}

// TestCTCReplayMemory bounds the heap the CTC replay needs (HeapSys is the
// heap memory obtained from the OS, an upper bound of the peak).
func TestCTCReplayMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("a second full CTC replay")
	}
	replayCTC(t)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("HeapSys %.1f MB, TotalAlloc %.1f MB", float64(ms.HeapSys)/1e6, float64(ms.TotalAlloc)/1e6)
	if ms.HeapSys > 150e6 {
		t.Errorf("heap of %d MB exceeds 150 MB", ms.HeapSys/1e6)
	}
}

// TestReplayOtherTraces replays the other PWA traces that carry runtime
// estimates through the same path (filter at the header's MaxProcs, EASY in
// reference mode) and checks every job's schedule is well-formed. There is
// no reference schedule for them here; the aggregates are logged.
func TestReplayOtherTraces(t *testing.T) {
	if testing.Short() {
		t.Skip("replays ~650,000 jobs")
	}
	for _, name := range []string{"KTH-SP2-1996-2.1-cln", "SDSC-SP2-1998-4.2-cln", "HPC2N-2002-2.2-cln", "LANL-CM5-1994-4.1-cln", "SDSC-BLUE-2000-4.2-cln"} {
		t.Run(name, func(t *testing.T) {
			path := workloadFile(t, name+".swf.gz")
			hr, err := swf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			procs, err := hr.Header.Int("MaxProcs")
			hr.Close()
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			res, err := ReplayEASY(context.Background(), f, int(procs), ReplayOptions{
				EASY:   EASYOptions{ReferenceCompatible: true},
				Filter: swf.StrongFilter{MaxProcs: procs}.Apply,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Kept < res.Read/2 {
				t.Fatalf("kept only %d of %d jobs", res.Kept, res.Read)
			}
			for _, j := range res.Jobs {
				if j.Start < j.Submit || j.End-j.Start != min(j.Run, j.Estimate) || j.Width > int(procs) {
					t.Fatalf("job %+v is malformed", j)
				}
			}
			s := res.Summary
			t.Logf("%d procs, %d of %d jobs: mean wait %.0f s, mean bsld %.2f, AU %.3f", procs, res.Kept, res.Read, s.MeanWait, s.MeanBSLD, s.AU)
		})
	}
}

// TestSiteReplaysCTCReference drives a reference-mode Site through the
// Backend API (JobSpecs, time.Time, engine events) with the filtered CTC
// trace: the site must give the same schedule as ReplayEASY, which shows the
// Site and the oracle share one scheduler.
func TestSiteReplaysCTCReference(t *testing.T) {
	if testing.Short() {
		t.Skip("submits 77,199 jobs through the Backend API")
	}
	want := replayCTC(t)
	r, err := swf.Open(workloadFile(t, "CTC-SP2-1996-3.1-cln.swf.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	jobs, err := swf.ReadJobs(r, swf.StrongFilter{MaxProcs: 338}.Apply, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(epoch0, 1)
	site, err := NewSite(e, SiteConfig{Name: "ctc", Nodes: 338, EASY: EASYOptions{ReferenceCompatible: true}})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]backends.JobID, len(jobs))
	for i, j := range jobs {
		sp := &backends.JobSpec{GridID: fmt.Sprint(j.ID), Command: []string{"x"}, Nodes: int(j.Width()),
			Walltime: time.Duration(j.ReqTime) * time.Second, Sim: backends.SimHints{Runtime: time.Duration(j.Run) * time.Second}}
		e.At(at(int(j.Submit)), func() {
			id, err := site.Submit(bg, sp)
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = id
		})
	}
	e.Run()
	sts, err := site.Status(bg, ids)
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for i, s := range sts {
		if s.State != backends.StateCompleted {
			t.Fatalf("job %s: %s", s.GridID, s.State)
		}
		if int64(s.Start.Sub(epoch0)/time.Second) == want.Jobs[i].Start {
			same++
		}
	}
	t.Logf("site schedule equals the replay for %d of %d jobs", same, len(sts))
	if same != len(sts) {
		t.Fatalf("the Site and ReplayEASY disagree on %d jobs", len(sts)-same)
	}
}

func TestReplayEASYErrors(t *testing.T) {
	line := func(id, submit, run, procs, req int) string {
		return fmt.Sprintf("%d %d -1 %d %d -1 -1 %d %d -1 1 1 -1 -1 -1 -1 -1 -1\n", id, submit, run, procs, procs, req)
	}
	var many strings.Builder
	for i := 1; i <= 5000; i++ {
		many.WriteString(line(i, i, 3, 1, 20))
	}
	for name, tc := range map[string]struct {
		trace string
		want  string
	}{
		"too wide":       {line(1, 0, 10, 2, 20) + line(2, 1, 10, 9, 20), "line 2: job 2 asks for 9 processors; the site has 1..4"},
		"no estimate":    {line(1, 0, 10, 2, -1), "line 1: job 1 has no runtime estimate"},
		"unsorted":       {line(1, 5, 10, 2, 20) + line(2, 4, 10, 2, 20), "line 2: job 2 submitted at 4, before the previous job"},
		"malformed late": {many.String() + "5001 1 2 3\n", "line 5001: malformed SWF: 4 fields, want exactly 18"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReplayEASY(bg, strings.NewReader(tc.trace), 4, ReplayOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := ReplayEASY(bg, strings.NewReader(""), 0, ReplayOptions{}); err == nil {
		t.Fatal("procs 0 accepted")
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := ReplayEASY(ctx, strings.NewReader(many.String()), 4, ReplayOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
	res, err := ReplayEASY(bg, strings.NewReader(many.String()), 4, ReplayOptions{})
	if err != nil || res.Kept != 5000 || res.Read != 5000 || res.Jobs[4999].End != 5003 {
		t.Fatalf("5000 one-node jobs: %v, %+v", err, res.Jobs[len(res.Jobs)-1])
	}
}
