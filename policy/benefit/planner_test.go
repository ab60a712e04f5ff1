package benefit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func twoSites() *policy.Snapshot {
	return &policy.Snapshot{Now: t0, Sites: []policy.Site{
		{Name: "fast", Nodes: 1, Free: 1, H: 1},
		{Name: "slow", Nodes: 1, Free: 1, H: 1.5},
	}}
}

func plan(t *testing.T, name string, s *policy.Snapshot) map[string]policy.Decision {
	t.Helper()
	p, err := ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := p.Plan(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]policy.Decision{}
	for _, d := range pl.Decisions {
		if _, dup := out[d.Job]; dup {
			t.Fatalf("%s: two decisions for %s", name, d.Job)
		}
		out[d.Job] = d
	}
	return out
}

func where(d policy.Decision) string {
	if d.Action == policy.Reject {
		return "reject"
	}
	return fmt.Sprintf("%s@%d", d.Action, d.Chosen.Parts[0].Site)
}

// A job the deadline presses takes the fast site from one that has time:
// Min-min gives the fast site to the first of two equal jobs and abandons
// the other, the benefit heuristic saves both.
func TestDeadlinePressureBenefitVsMinMin(t *testing.T) {
	s := twoSites()
	s.Queue = []policy.Job{
		{ID: "relaxed", Width: 1, Estimate: 10 * time.Minute, Submit: t0, Origin: -1},
		{ID: "pressed", Width: 1, Estimate: 10 * time.Minute, Submit: t0, Origin: -1, Deadline: t0.Add(14 * time.Minute)},
	}
	mm := plan(t, MinMin, s)
	if where(mm["relaxed"]) != "start@0" || where(mm["pressed"]) != "reject" {
		t.Fatalf("min-min: relaxed %s, pressed %s; want start@0 and reject", where(mm["relaxed"]), where(mm["pressed"]))
	}
	if r := mm["pressed"].Status.String(); !strings.Contains(r, "deadline") || !strings.Contains(r, "cannot be met") || !strings.Contains(r, "1m0s late") {
		t.Fatalf("rejection reason %q does not say which deadline is missed by how much", r)
	}
	b := plan(t, Benefit, s)
	if where(b["pressed"]) != "start@0" || where(b["relaxed"]) != "start@1" {
		t.Fatalf("benefit: pressed %s, relaxed %s; want start@0 and start@1", where(b["pressed"]), where(b["relaxed"]))
	}
	// Best-effort: the job is kept (mapped), not dropped.
	s.Queue[1].BestEffort = true
	mm = plan(t, MinMin, s)
	if where(mm["pressed"]) == "reject" {
		t.Fatalf("a best-effort job was rejected: %v", mm["pressed"].Status)
	}
}

// An "urgent" step function makes a job go first even far from its
// deadline: its benefit sufferage is positive while its second-best site
// would end after b·D.
func TestUrgentStepGoesFirst(t *testing.T) {
	s := twoSites()
	s.Queue = []policy.Job{
		{ID: "plain", Width: 1, Estimate: 10 * time.Minute, Submit: t0, Origin: -1},
		{ID: "urgent", Width: 1, Estimate: 10 * time.Minute, Submit: t0, Origin: -1, Deadline: t0.Add(10 * time.Hour),
			Worth: policy.Worth{Shape: policy.Step, A: 100, B: 0.02, C: 100}}, // full worth within 12 min
	}
	b := plan(t, Benefit, s)
	if where(b["urgent"]) != "start@0" || where(b["plain"]) != "start@1" {
		t.Fatalf("benefit: urgent %s, plain %s; want start@0, start@1", where(b["urgent"]), where(b["plain"]))
	}
	// Without the function, the deadline is far: the plain job (first) wins.
	s.Queue[1].Worth = policy.Worth{}
	b = plan(t, Benefit, s)
	if where(b["plain"]) != "start@0" {
		t.Fatalf("benefit without worth: plain %s, want start@0", where(b["plain"]))
	}
}

// The linear function of the job file ranks jobs by what they lose.
func TestLinearWorthSufferage(t *testing.T) {
	s := twoSites()
	s.Queue = []policy.Job{
		{ID: "cheap", Width: 1, Estimate: 10 * time.Minute, Submit: t0, Origin: -1, Deadline: t0.Add(time.Hour),
			Worth: policy.Worth{Shape: policy.Linear, A: 100, B: 0.1, C: 0.001}},
		{ID: "dear", Width: 1, Estimate: 10 * time.Minute, Submit: t0, Origin: -1, Deadline: t0.Add(time.Hour),
			Worth: policy.Worth{Shape: policy.Linear, A: 100, B: 0.1, C: 1}},
	}
	b := plan(t, Benefit, s)
	if where(b["dear"]) != "start@0" || where(b["cheap"]) != "start@1" {
		t.Fatalf("benefit: dear %s, cheap %s; want start@0, start@1", where(b["dear"]), where(b["cheap"]))
	}
	if su := plan(t, Sufferage, s); where(su["cheap"]) != "start@0" {
		t.Fatalf("sufferage ignores worth and keeps queue order on a tie: cheap %s", where(su["cheap"]))
	}
}

// Data: with a slow uplink to the fast site, data-aware heuristics choose
// the slow site, which ends first; transfer is in the prediction.
func TestTransferCounts(t *testing.T) {
	s := twoSites()
	s.Uplinks = []policy.Link{{SecPerByte: 1e-6}, {}} // 1 MB/s to fast, free to slow
	s.Queue = []policy.Job{{ID: "data", Width: 1, Estimate: 10 * time.Minute, Submit: t0, Origin: -1, DataSize: 3e9}}
	for _, h := range Names() {
		d := plan(t, h, s)["data"]
		if where(d) != "start@1" || d.Chosen.Transfer != 0 {
			t.Fatalf("%s: %s transfer %v, want start@1 without transfer", h, where(d), d.Chosen.Transfer)
		}
	}
	s.Uplinks = []policy.Link{{SecPerByte: 1e-9}, {}}
	if d := plan(t, Benefit, s)["data"]; where(d) != "start@0" || d.Chosen.Transfer != 3*time.Second {
		t.Fatalf("fast link: %s transfer %v, want start@0 with 3s", where(d), d.Chosen.Transfer)
	}
}

// Reject a job no allowed site can hold; wait while allowed sites are down;
// reserve (predict) the jobs mapped later; never start more than is free.
func TestPlannerEdges(t *testing.T) {
	s := &policy.Snapshot{Now: t0, Sites: []policy.Site{
		{Name: "a", Nodes: 4, Free: 2, H: 1, Busy: []policy.Hold{{Nodes: 2, Until: t0.Add(time.Hour)}}},
		{Name: "b", Nodes: 8, Free: 8, H: 1, Down: true},
	}}
	s.Queue = []policy.Job{
		{ID: "wide", Width: 16, Estimate: time.Minute, Submit: t0, Origin: -1},
		{ID: "downonly", Width: 1, Estimate: time.Minute, Submit: t0, Origin: -1, Allowed: []int{1}},
		{ID: "j1", Width: 2, Estimate: time.Minute, Submit: t0, Origin: -1, Allowed: []int{0}},
		{ID: "j2", Width: 2, Estimate: time.Minute, Submit: t0, Origin: -1, Allowed: []int{0}},
	}
	p, _ := ByName(Benefit)
	pl, err := p.Plan(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range pl.Decisions {
		got[d.Job] = d.Action.String()
	}
	if got["wide"] != "reject" || got["j1"] != "start" || got["j2"] != "reserve" || got["downonly"] != "" {
		t.Fatalf("decisions %v", got)
	}
	if len(pl.Pending) != 1 || pl.Pending[0].Job != "downonly" {
		t.Fatalf("pending %v", pl.Pending)
	}
	s.Quiet = true
	pl, _ = p.Plan(context.Background(), s)
	if len(pl.Decisions) != 2 || len(pl.Pending) != 0 {
		t.Fatalf("quiet plan %+v: want the reject and the start only", pl)
	}
}

// BenchmarkRemap2000x50 is one remapping pass over 2,000 unstarted jobs and
// 50 sites (issue 17: under 20 ms).
func BenchmarkRemap2000x50(b *testing.B) { benchRemap(b, 2000, 50) }

// BenchmarkRemap1000x50 and BenchmarkRemap4000x50 show the growth.
func BenchmarkRemap1000x50(b *testing.B) { benchRemap(b, 1000, 50) }
func BenchmarkRemap4000x50(b *testing.B) { benchRemap(b, 4000, 50) }

func benchRemap(b *testing.B, jobs, sites int) {
	s := benchSnapshot(jobs, sites, 1)
	p, _ := ByName(Benefit)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Plan(context.Background(), s); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRemapSpeed keeps the pass's complexity in the suite: on a loaded
// 2-core CI machine the bound is generous (the benchmark measures), but a
// rescan of every job on every round (O(n²·m)) takes seconds and fails it.
func TestRemapSpeed(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	r := testing.Benchmark(func(b *testing.B) { benchRemap(b, 2000, 50) })
	bound := time.Second
	if raceDetector {
		bound = 3 * time.Second // it took 1.2-1.4 s under -race at load 15; O(n²·m) takes tens
	}
	if per := time.Duration(r.NsPerOp()); per > bound {
		t.Fatalf("one remapping pass over 2000 jobs and 50 sites took %v", per)
	}
}

// Paper 003's Algorithm 2 contests only the data repository: with
// ContestMachines off, a pressed job cannot displace the holder of its
// machine, and on sites with no repository between them the benefit
// heuristic maps as Min-min does; on, it displaces (the live planner's
// rule, ByName).
func TestBenefitContestsMachinesOnlyWhenAsked(t *testing.T) {
	s := twoSites()
	s.Queue = []policy.Job{
		{ID: "relaxed", Width: 1, Estimate: 10 * time.Minute, Submit: t0, Origin: -1},
		{ID: "pressed", Width: 1, Estimate: 10 * time.Minute, Submit: t0, Origin: -1, Deadline: t0.Add(14 * time.Minute)},
	}
	for _, contest := range []bool{false, true} {
		p, err := New(Config{Heuristic: Benefit, ContestMachines: contest})
		if err != nil {
			t.Fatal(err)
		}
		pl, err := p.Plan(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, d := range pl.Decisions {
			got[d.Job] = where(d)
		}
		want := map[string]string{"relaxed": "start@0", "pressed": "reject"}
		if contest {
			want = map[string]string{"relaxed": "start@1", "pressed": "start@0"}
		}
		if got["relaxed"] != want["relaxed"] || got["pressed"] != want["pressed"] {
			t.Errorf("ContestMachines %v: %v, want %v", contest, got, want)
		}
	}
}
