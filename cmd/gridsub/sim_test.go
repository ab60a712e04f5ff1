package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/simbackend/swf"
)

// TestSimJobsOverride: --jobs replaces the file's workload.jobs, the summary
// records the value used, and bad values are usage errors.
func TestSimJobsOverride(t *testing.T) {
	if _, ok := swf.WorkloadsDir(); !ok {
		t.Skip("workload traces not found: set GRIDSUB_WORKLOADS or put ../shared/workloads beside the repository")
	}
	out := t.TempDir()
	exp := filepath.Join("configs", "experiments", "paper000-fig7-bandwidth-quick.yaml")
	code, _, errOut := gridsub(t, "sim", exp, "--jobs", "120", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Experiment struct {
			Workload struct {
				Jobs int `json:"jobs"`
			} `json:"workload"`
		} `json:"experiment"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Experiment.Workload.Jobs != 120 {
		t.Fatalf("summary.json workload.jobs = %d, want 120", s.Experiment.Workload.Jobs)
	}
	for _, bad := range [][]string{
		{"sim", exp, "--jobs", "-1"},
		{"sim", filepath.Join("configs", "experiments", "ctc-easy-reference.yaml"), "--jobs", "10"},
	} {
		code, _, errOut := gridsub(t, bad...)
		if code != exitUsage || !strings.Contains(errOut, "--jobs") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming --jobs", bad, code, errOut)
		}
	}
}
