package paper003

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const small = `
name: t
kind: paper003
grid: {clusters: [2, 3], repositories: 2, speed: [0.5, 2], bandwidth: [1MB/s, 20MB/s], replicas: [1, 2]}
tasks: {count: 60, work: [100s, 1000s], arrival: 20s, deadline: [3, 8], benefit: [100, 0.8, 0.05], urgent: 0.1, urgent_b: 0.5}
interval: 300s
seeds: 3
data_mb: [0, 500]
heuristics: [{name: benefit}, {name: min-min}, {name: min-min, blind: true}, {name: sufferage}]
claims:
  - {text: grows slower, metric: makespan, a: benefit, b: min-min-blind, less: true, over: growth}
`

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ old, new, want string }{
		{"kind: paper003", "kind: paper003\nextra: 1", "field extra not found"},
		{"seeds: 3", "seeds: 0", "seeds: 0"},
		{"{name: sufferage}", "{name: suffrage}", `"suffrage"`},
		{"bandwidth: [1MB/s, 20MB/s]", "bandwidth: [1MB, 20MB/s]", "grid.bandwidth[0]"},
		{"replicas: [1, 2]", "replicas: [1, 3]", "grid.replicas"},
		{"metric: makespan", "metric: speed", `"speed"`},
		{"interval: 300s", "interval: 5", "not a duration"},
	} {
		_, err := Parse([]byte(strings.Replace(small, tc.old, tc.new, 1)))
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want ErrSpec naming %q", tc.new, err, tc.want)
		}
	}
	if _, err := Parse([]byte(small)); err != nil {
		t.Fatal(err)
	}
	huge := strings.NewReplacer("clusters: [2, 3]", "clusters: [1024, 1024]", "count: 60", "count: 100000").Replace(small)
	if _, err := Parse([]byte(huge)); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "cells per mapping event") {
		t.Errorf("a grid too big for memory: %v", err)
	}
}

// A small experiment runs end to end: deterministic whatever the workers;
// data-aware heuristics never run a task late (they drop what would be);
// with no data to move, blind and aware Min-min are the same; the files
// are written.
func TestSmallExperiment(t *testing.T) {
	s, err := Parse([]byte(small))
	if err != nil {
		t.Fatal(err)
	}
	a, err := Execute(context.Background(), s, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Execute(context.Background(), s, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Runs, b.Runs) {
		t.Fatal("results depend on the number of workers")
	}
	if len(a.Runs) != 3*2*4 {
		t.Fatalf("%d runs", len(a.Runs))
	}
	byKey := map[string]Result{}
	for _, r := range a.Runs {
		byKey[r.Heuristic+"/"+strings.TrimSuffix(strings.TrimSuffix(formatMB(r.DataMB), ".0"), ".")+"/"+string(rune('0'+r.Seed))] = r.Metrics
		if r.Heuristic != "min-min-blind" && r.Metrics["late"] != 0 {
			t.Errorf("%s ran %g tasks late", r.Heuristic, r.Metrics["late"])
		}
		if r.Metrics["makespan"] <= 0 || r.Metrics["events"] <= 0 {
			t.Errorf("run %+v measured nothing", r)
		}
		done := 60 - r.Metrics["abandoned"]
		if done <= 0 {
			t.Errorf("run %+v abandoned everything", r)
		}
	}
	for seed := 1; seed <= 3; seed++ {
		k := string(rune('0' + seed))
		if byKey["min-min/0/"+k]["makespan"] != byKey["min-min-blind/0/"+k]["makespan"] {
			t.Errorf("seed %d: without data blind and aware Min-min differ", seed)
		}
		if byKey["min-min-blind/500/"+k]["makespan"] <= byKey["min-min/500/"+k]["makespan"] {
			t.Errorf("seed %d: blind Min-min not slower with 500 MB inputs", seed)
		}
	}
	if len(a.Verdicts) != 1 || a.Verdicts[0].Seeds != 3 || a.Verdicts[0].Verdict == "holds" {
		t.Errorf("verdicts %+v: 3 seeds can never make a claim hold", a.Verdicts)
	}
	dir := t.TempDir()
	s.Plots = []Plot{{Name: "m", Y: "makespan"}}
	files, err := WriteAll(dir, a)
	if err != nil || len(files) != 5 {
		t.Fatalf("WriteAll: %v %v", files, err)
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "results.csv"))
	if n := strings.Count(string(csv), "\n"); n != 25 {
		t.Errorf("results.csv has %d lines", n)
	}
	// compare.csv: the claim's verdict, 3 seeds: never "holds".
	cmp, _ := os.ReadFile(filepath.Join(dir, "compare.csv"))
	if lines := strings.Split(strings.TrimSpace(string(cmp)), "\n"); len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "claim,at,mean_a,mean_b,diff,ci95,in_dir,seeds,verdict") || !strings.HasSuffix(lines[1], ",3,within noise") {
		t.Errorf("compare.csv:\n%s", cmp)
	}
}

func formatMB(d float64) string {
	if d == 0 {
		return "0"
	}
	return "500"
}

// The experiment files of the repository parse.
func TestConfigsParse(t *testing.T) {
	files, _ := filepath.Glob("../../../configs/experiments/paper003-*.yaml")
	if len(files) < 2 {
		t.Fatalf("paper003 experiment files: %v", files)
	}
	for _, f := range files {
		if !IsKind(f) {
			t.Errorf("%s: not kind paper003", f)
		}
		s, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if s.Seeds < 10 {
			t.Errorf("%s: %d seeds; results pages need >= 10", f, s.Seeds)
		}
	}
}
