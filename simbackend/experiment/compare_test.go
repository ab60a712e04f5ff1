package experiment

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSeedSweep: sweep.seed repeats every run once per seed, the seed
// slowest; each seed's runs equal, metric for metric, the same experiment
// with that seed as workload.seed; the plot's point is the seeds' mean with
// their min and max; compare counts the seeds.
func TestSeedSweep(t *testing.T) {
	needTraces(t)
	e, err := Load("testdata/tiny-seeds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Execute(context.Background(), e, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Runs) != 8 || s.Runs[0].Params.Seed != 7 || s.Runs[4].Params.Seed != 8 {
		t.Fatalf("want 8 runs, seed 7 then 8: %+v", s.Runs)
	}
	for _, seed := range []uint64{7, 8} {
		one, err := Load("testdata/tiny-seeds.yaml")
		if err != nil {
			t.Fatal(err)
		}
		one.Sweep.Seed, one.Workload.Seed = nil, seed
		so, err := Execute(context.Background(), one, Options{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range so.Runs {
			got := s.Runs[int(seed-7)*4+i]
			if got.Params.Policy != r.Params.Policy || got.Params.P != r.Params.P || got.Metrics["awrt"] != r.Metrics["awrt"] {
				t.Fatalf("seed %d run %d: swept %+v awrt %v, alone %+v awrt %v", seed, i, got.Params, got.Metrics["awrt"], r.Params, r.Metrics["awrt"])
			}
		}
	}
	if s.Runs[0].Metrics["awrt"] == s.Runs[4].Metrics["awrt"] {
		t.Fatalf("seeds 7 and 8 give the same AWRT %v: the seed does not reach the workload", s.Runs[0].Metrics["awrt"])
	}
	lines, _ := PlotData(e.Plots[0], s)
	if len(lines) != 2 || len(lines[0].Y) != 2 {
		t.Fatalf("lines %+v", lines)
	}
	a, b := s.Runs[0].Metrics["awrt"], s.Runs[4].Metrics["awrt"] // greedy-easy, p = 1, seeds 7 and 8
	l := lines[0]
	if l.Label != "greedy-easy" || l.N[0] != 2 || math.Abs(l.Y[0]-(a+b)/2) > 1e-9 || l.Lo[0] != min(a, b) || l.Hi[0] != max(a, b) {
		t.Fatalf("point %v (lo %v hi %v n %d), want mean of %v and %v", l.Y[0], l.Lo[0], l.Hi[0], l.N[0], a, b)
	}
	rows := Comparisons(s)
	if len(rows) != 3 || rows[2].X != "all" || rows[2].Seeds != 4 || rows[0].Seeds != 2 {
		t.Fatalf("rows %+v", rows)
	}
	dir := t.TempDir()
	if _, err := WriteAll(dir, s); err != nil {
		t.Fatal(err)
	}
	csvOut, err := os.ReadFile(filepath.Join(dir, CompareFile))
	if err != nil || !strings.HasPrefix(string(csvOut), "compare,x,mean_a,mean_b,gap_pct") {
		t.Fatalf("compare.csv: %v\n%s", err, csvOut)
	}
	if md, err := os.ReadFile(filepath.Join(dir, CompareMarkdownFile)); err != nil || !strings.Contains(string(md), "| all |") {
		t.Fatalf("compare.md: %v\n%s", err, md)
	}
}

// TestComparisonsVerdicts: the verdict is "lower" or "higher" only when
// the sign holds on every seed, else "within noise", with the counts.
func TestComparisonsVerdicts(t *testing.T) {
	e := &Experiment{Kind: KindCoalloc, Compare: []Compare{{Name: "c", Y: "awrt", X: "p", Of: "policy", A: "a", B: "b"}}}
	run := func(pol string, p float64, seed uint64, awrt float64) Result {
		return Result{Run: Run{Params: Params{Policy: pol, P: p, Seed: seed}}, Metrics: map[string]float64{"awrt": awrt}}
	}
	s := &Summary{Experiment: e, Runs: []Result{
		// p = 1: a lower on both seeds; p = 2: a lower on one, higher on the other;
		// p = 3: a higher on both.
		run("a", 1, 1, 90), run("b", 1, 1, 100), run("a", 1, 2, 99), run("b", 1, 2, 100),
		run("a", 2, 1, 90), run("b", 2, 1, 100), run("a", 2, 2, 120), run("b", 2, 2, 100),
		run("a", 3, 1, 110), run("b", 3, 1, 100), run("a", 3, 2, 101), run("b", 3, 2, 100),
	}}
	rows := Comparisons(s)
	want := []struct {
		x       string
		verdict string
		lower   int
		gap     float64
	}{{"1", VerdictLower, 2, -5.5}, {"2", VerdictNoise, 1, 5}, {"3", VerdictHigher, 0, 5.5}, {"all", VerdictNoise, 3, 1.666666}}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v", rows)
	}
	for i, w := range want {
		r := rows[i]
		if r.X != w.x || r.Verdict != w.verdict || r.ALower != w.lower || math.Abs(r.GapPct-w.gap) > 1e-3 {
			t.Errorf("row %d: %+v, want x %s verdict %s lower %d gap %v", i, r, w.x, w.verdict, w.lower, w.gap)
		}
	}
	if rows[1].MinGapPct != -10 || rows[1].MaxGapPct != 20 {
		t.Errorf("p = 2 per-seed gaps %v..%v, want -10..20", rows[1].MinGapPct, rows[1].MaxGapPct)
	}
	md := CompareMarkdown(e, rows)
	if !strings.Contains(md, "| 2 | 105 | 100 | +5.0 % | 1.05× | -10.0 … +20.0 % | 1/2 | 1/2 | within noise |") {
		t.Errorf("markdown:\n%s", md)
	}
}

// TestComparisonsPerSeedColumns: a paper kind's run carries its seeds as
// columns y_s0, y_s1, ... beside the mean; the comparison counts them seed
// by seed as it counts sweep.seed's runs, and gives the ratio of the means.
func TestComparisonsPerSeedColumns(t *testing.T) {
	e := &Experiment{Kind: KindDGJS, Compare: []Compare{{Name: "c", Y: "success_ratio", X: "jobs", Of: "policy", A: "dgjs", B: "min-min"}}}
	run := func(pol string, jobs int, seeds ...float64) Result {
		m := map[string]float64{"success_ratio": 0}
		for k, v := range seeds {
			m["success_ratio_s"+strconv.Itoa(k)] = v
			m["success_ratio"] += v / float64(len(seeds))
		}
		return Result{Run: Run{Params: Params{Policy: pol, Jobs: jobs}}, Metrics: m}
	}
	s := &Summary{Experiment: e, Runs: []Result{
		run("dgjs", 100, 0.9, 0.8, 0.7), run("min-min", 100, 0.6, 0.8, 0.5),
		run("dgjs", 200, 0.9, 0.9, 0.9), run("min-min", 200, 0.3, 0.3, 0.3),
	}}
	rows := Comparisons(s)
	if len(rows) != 3 {
		t.Fatalf("rows %+v", rows)
	}
	if r := rows[0]; r.X != "100" || r.Seeds != 3 || r.AHigher != 2 || r.ALower != 0 || r.Verdict != VerdictNoise {
		t.Errorf("jobs 100: %+v, want 3 seeds, dgjs higher on 2, a tie, within noise", r)
	}
	if r := rows[1]; r.X != "200" || r.AHigher != 3 || r.Verdict != VerdictHigher || math.Abs(r.Ratio-3) > 1e-9 {
		t.Errorf("jobs 200: %+v, want higher on 3 of 3, ratio 3", r)
	}
	var b strings.Builder
	if err := WriteCompareCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	// The means are sums in seed order: the same runs give the same bytes
	// every time (values whose sum depends on the order).
	many := &Summary{Experiment: e, Runs: []Result{
		run("dgjs", 100, 0.1, 0.2, 0.3, 1e-17, 0.7, 1e16, 0.11, 0.13, 0.17, 0.19),
		run("min-min", 100, 0.3, 0.1, 0.2, 0.7, 1e16, 1e-17, 0.19, 0.17, 0.13, 0.11),
	}}
	var first string
	for i := range 30 {
		var mb strings.Builder
		if err := WriteCompareCSV(&mb, Comparisons(many)); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = mb.String()
		} else if mb.String() != first {
			t.Fatalf("compare.csv differs between two evaluations of the same runs:\n%s\n%s", first, mb.String())
		}
	}
	if !strings.Contains(b.String(), "c,200,0.9,0.3,200.00,3.000,200.00,200.00,0,3,3,higher") {
		t.Errorf("compare.csv:\n%s", b.String())
	}
}

// TestCompareBad: a comparison naming a metric, parameter or value the
// runs do not have, or leaving a varying parameter unpinned, is refused
// with the field's path.
func TestCompareBad(t *testing.T) {
	base, err := os.ReadFile("testdata/tiny-seeds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(base), "compare:")
	for _, c := range []struct{ name, compare, want string }{
		{"metric", "{name: c, y: speed, x: p, of: policy, a: greedy-easy, b: single-site-easy}", "compare[0].y"},
		{"value", "{name: c, y: awrt, x: p, of: policy, a: greedy-easy, b: sabin}", "compare[0].b"},
		{"same", "{name: c, y: awrt, x: p, of: policy, a: greedy-easy, b: greedy-easy}", "must differ"},
		{"x seed", "{name: c, y: awrt, x: seed, of: policy, a: greedy-easy, b: single-site-easy}", "compare[0].x"},
		{"where", "{name: c, y: awrt, x: p, of: policy, a: greedy-easy, b: single-site-easy, where: {workload: 2}}", "compare[0].where.workload"},
	} {
		_, err := Parse("x.yaml", []byte(head+"compare:\n  - "+c.compare+"\n"))
		if err == nil || !errors.Is(err, ErrValue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.name, err, c.want)
		}
	}
	two := strings.Replace(head, "policies: [greedy-easy, single-site-easy]", "policies: [greedy-easy, single-site-easy]\n", 1)
	two = strings.Replace(two, "  seed: [7, 8]", "  seed: [7, 8]\n  workload: [1, 2]", 1)
	two = strings.Replace(two, "series: [policy]}", "series: [policy], where: {workload: 1}}", 1)
	_, err = Parse("x.yaml", []byte(two+"compare:\n  - {name: c, y: awrt, x: p, of: policy, a: greedy-easy, b: single-site-easy}\n"))
	if err == nil || !strings.Contains(err.Error(), "the runs differ in workload") {
		t.Errorf("unpinned workload: %v", err)
	}
	if bytes.Contains(base, []byte("\t")) {
		t.Fatal("tabs in the fixture")
	}
}
