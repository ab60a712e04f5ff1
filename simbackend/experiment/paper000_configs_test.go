package experiment

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestPaper000FullAndQuick: every figure of paper 000 has a paper-scale
// file (10,000 jobs, 10 seeds, comparisons for the page's verdicts) and a
// -quick variant that is the same experiment on fewer jobs and one seed,
// as their comments say.
func TestPaper000FullAndQuick(t *testing.T) {
	quick, _ := filepath.Glob("../../configs/experiments/paper000-*-quick.yaml")
	if len(quick) != 9 { // figures 2-9 and the wide-jobs table
		t.Fatalf("found %d quick files: %v", len(quick), quick)
	}
	for _, q := range quick {
		full := strings.TrimSuffix(q, "-quick.yaml") + ".yaml"
		eq, err := Load(q)
		if err != nil {
			t.Fatal(err)
		}
		ef, err := Load(full)
		if err != nil {
			t.Fatalf("%s has no paper-scale file: %v", q, err)
		}
		if ef.Workload.Jobs != 10000 || eq.Workload.Jobs >= 10000 || len(eq.Sweep.Seed) > 1 {
			t.Errorf("%s: %d jobs, quick %d jobs and %d seeds", full, ef.Workload.Jobs, eq.Workload.Jobs, len(eq.Sweep.Seed))
		}
		wide := strings.Contains(full, "wide")
		if !wide && (len(ef.Sweep.Seed) != 10 || len(ef.Compare) == 0) {
			t.Errorf("%s: %d seeds and %d comparisons, want 10 seeds and the page's comparisons", full, len(ef.Sweep.Seed), len(ef.Compare))
		}
		if eq.Name != ef.Name+"-quick" {
			t.Errorf("%s is named %q, want %q", q, eq.Name, ef.Name+"-quick")
		}
		// Apart from the size, the seeds and the names, the same experiment.
		a, b := *ef, *eq
		a.Workload.Jobs, b.Workload.Jobs = 0, 0
		a.Sweep.Seed, b.Sweep.Seed = nil, nil
		a.Name, b.Name, a.Title, b.Title = "", "", "", ""
		a.file, b.file, a.lines, b.lines = "", "", nil, nil
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s and %s differ beyond jobs, seeds and names:\n%+v\n%+v", full, q, a, b)
		}
	}
}
