package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimPaper003: gridsub sim runs a paper003 experiment file (a bounded
// copy of configs/experiments/paper003-qos.yaml: fewer tasks and seeds),
// prints the table and the verdicts, and writes results.csv, summary.json
// and the plots; --jobs is refused for this kind.
func TestSimPaper003(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "configs", "experiments", "paper003-qos.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	small := strings.NewReplacer("count: 500", "count: 80", "seeds: 10", "seeds: 2", "data_mb: [0, 100, 250, 500, 1000]", "data_mb: [0, 500]").Replace(string(src))
	exp := filepath.Join(t.TempDir(), "p3.yaml")
	if err := os.WriteFile(exp, []byte(small), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code, stdout, errOut := gridsub(t, "sim", exp, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"benefit", "sufferage", "within noise", "abandons fewer"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"results.csv", "summary.json", "paper003-fig4-makespan.png", "paper003-fig5-abandoned.svg"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if code, _, errOut := gridsub(t, "sim", exp, "--jobs", "10"); code != exitUsage || !strings.Contains(errOut, "--jobs") {
		t.Errorf("--jobs on a paper003 file: exit %d, %q", code, errOut)
	}
}
