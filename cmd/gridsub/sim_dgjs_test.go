package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimDGJS runs paper 004's low-failure figure through the CLI, cut to
// one point of 30 jobs by --jobs: the table shows the dgjs columns, the
// summary records the jobs used, and the plots are written.
func TestSimDGJS(t *testing.T) {
	out := t.TempDir()
	exp := filepath.Join("configs", "experiments", "paper004-low-failure.yaml")
	code, stdout, errOut := gridsub(t, "sim", exp, "--jobs", "30", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, col := range []string{"FAILURE", "POLICY", "SUCCESS_RATIO", "MEAN_COMPLETION", "dgjs-conditional"} {
		if !strings.Contains(stdout, col) {
			t.Errorf("table lacks %s:\n%s", col, stdout)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Experiment struct {
			DGJS struct {
				Jobs []int `json:"jobs"`
			} `json:"dgjs"`
		} `json:"experiment"`
		Runs []struct {
			Metrics map[string]float64 `json:"metrics"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Experiment.DGJS.Jobs) != 1 || s.Experiment.DGJS.Jobs[0] != 30 || len(s.Runs) != 4 {
		t.Fatalf("summary: jobs %v, %d runs", s.Experiment.DGJS.Jobs, len(s.Runs))
	}
	for _, r := range s.Runs {
		if v := r.Metrics["success_ratio"]; !(v > 0.5 && v <= 1) || r.Metrics["seeds"] != 10 {
			t.Fatalf("metrics %v", r.Metrics)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "paper004-fig1-success.svg")); err != nil {
		t.Fatal(err)
	}
}
