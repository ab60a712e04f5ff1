package leastloaded

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/simbackend/replay"
	"github.com/gridsub/gridsub/simbackend/swf"
)

// ctc reads the first n jobs of the filtered CTC-SP2 trace, shaped as paper
// 000's Workload 1 (widths capped at 32, three submit sites).
func ctc(t *testing.T, n int) []replay.Job {
	t.Helper()
	dir, ok := swf.WorkloadsDir()
	if !ok {
		t.Skip("workload traces not found: set GRIDSUB_WORKLOADS (e.g. /work/shared/workloads) to run the replay")
	}
	r, err := swf.Open(filepath.Join(dir, "CTC-SP2-1996-3.1-cln.swf.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	jobs, err := swf.ReadJobs(r, swf.StrongFilter{MaxProcs: 338}.Apply, n)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := swf.Shape(jobs, swf.ShapeOptions{N: n, WidthCap: 32, Sites: 3, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	return replay.FromShaped(sh)
}

func links(n int, secPerByte float64, lat time.Duration) [][]policy.Link {
	l := make([][]policy.Link, n)
	for i := range l {
		l[i] = make([]policy.Link, n)
		for k := range l[i] {
			if i != k {
				l[i][k] = policy.Link{SecPerByte: secPerByte, Latency: lat}
			}
		}
	}
	return l
}

// TestReplayCTC replays 2,000 jobs of a real trace on paper 000's three
// sites through the planner, with the replay's fast driver and through the
// broker and simulated sites: every job runs (none is wider than a site),
// on one site, never before its submission, and the two drivers agree
// byte for byte.
func TestReplayCTC(t *testing.T) {
	jobs := ctc(t, 2000)
	setup := replay.Setup{Sites: []replay.Site{{Name: "Beijing", Nodes: 128, H: 1}, {Name: "Shanghai", Nodes: 64, H: 1}, {Name: "Harbin", Nodes: 32, H: 1}},
		Links: links(3, 1e-6, 575*time.Millisecond), MultiSite: 1.1, Planner: New()}
	start := time.Now()
	res, err := replay.Run(context.Background(), setup, jobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	s := res.Summary
	t.Logf("%d jobs in %s: cycles %d ran %d rejected %d failed %d AWRT %.0f AWWT %.0f AU %.3f", len(jobs), took.Round(time.Millisecond),
		res.Cycles, s.Ran, s.Rejected, res.Failed, s.AWRT, s.AWWT, s.AU)
	if res.Unfinished != 0 || s.Ran != len(jobs) || s.Rejected != 0 {
		t.Fatalf("%d unfinished, %d ran, %d rejected of %d: every job fits on Beijing", res.Unfinished, s.Ran, s.Rejected, len(jobs))
	}
	if s.AU <= 0.05 || s.AU > 1 || s.AWWT < 0 || s.AWRT < s.AWWT {
		t.Fatalf("implausible metrics: %+v", s)
	}
	perSite := make([]int, 3)
	for _, r := range res.Records {
		if len(r.Parts) != 1 || r.Parts[0].Nodes != r.Width {
			t.Fatalf("job %s ran on %+v: least-loaded never splits a job", r.ID, r.Parts)
		}
		if r.Start.Before(r.Submit) || r.End.Before(r.Start) {
			t.Fatalf("job %s: submit %v start %v end %v", r.ID, r.Submit, r.Start, r.End)
		}
		perSite[r.Parts[0].Site]++
	}
	t.Logf("jobs per site: Beijing %d, Shanghai %d, Harbin %d", perSite[0], perSite[1], perSite[2])
	for i, n := range perSite {
		if n == 0 {
			t.Errorf("site %s ran no job: the least loaded site is not always the biggest", setup.Sites[i].Name)
		}
	}
	setup.Broker = true
	viaBroker, err := replay.Run(context.Background(), setup, jobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(res.Records)
	b, _ := json.Marshal(viaBroker.Records)
	if string(a) != string(b) {
		t.Fatal("the replay's direct driver and the broker path disagree on the same planner")
	}
}

// BenchmarkReplayCTC10k replays the first 10,000 CTC jobs through the
// planner (the replay's direct driver, which drives its Session).
func BenchmarkReplayCTC10k(b *testing.B) {
	dir, ok := swf.WorkloadsDir()
	if !ok {
		b.Skip("workload traces not found: set GRIDSUB_WORKLOADS")
	}
	r, err := swf.Open(filepath.Join(dir, "CTC-SP2-1996-3.1-cln.swf.gz"))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := swf.ReadJobs(r, swf.StrongFilter{MaxProcs: 338}.Apply, 10000)
	r.Close()
	if err != nil {
		b.Fatal(err)
	}
	sh, err := swf.Shape(raw, swf.ShapeOptions{N: 10000, WidthCap: 32, Sites: 3, Seed: 7})
	if err != nil {
		b.Fatal(err)
	}
	jobs := replay.FromShaped(sh)
	setup := replay.Setup{Sites: []replay.Site{{Name: "Beijing", Nodes: 128, H: 1}, {Name: "Shanghai", Nodes: 64, H: 1}, {Name: "Harbin", Nodes: 32, H: 1}},
		Links: links(3, 1e-6, 575*time.Millisecond), MultiSite: 1.1, Planner: New()}
	b.ResetTimer()
	for range b.N {
		if _, err := replay.Run(context.Background(), setup, jobs, nil); err != nil {
			b.Fatal(err)
		}
	}
}
