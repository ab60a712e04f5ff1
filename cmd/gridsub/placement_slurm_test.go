package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/bridge"
)

type placedJSON struct {
	State    string         `json:"state"`
	Attempts int            `json:"attempts"`
	Events   []bridge.Event `json:"events"`
	Outputs  []string       `json:"outputs"`
	Sites    []struct {
		Site string `json:"site"`
	} `json:"sites"`
}

// examples/env-args.yaml asks 4 cores per node: on the real SLURM testbed
// siteA's nodes have 2 (sinfo says so), so it lands on siteB by itself,
// first time, and its output says so; the dry run names siteA's shape.
func TestRealSlurmEnvArgsLandsOnSiteB(t *testing.T) {
	needSlurm(t)
	code, stdout, stderr := gridsub(t, "--config", "configs/local-slurm.yaml", "submit", "--dry-run", "--embedded", "examples/env-args.yaml")
	if code != 0 || !strings.Contains(stdout, "would start  siteB:1") || !strings.Contains(stdout, "siteA: its nodes have 2 cores per node, the job asks 4") {
		t.Fatalf("dry run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	out, _ := runRealJSON(t, "examples/env-args.yaml")
	var r placedJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.State != "completed" || len(r.Sites) != 1 || r.Sites[0].Site != "siteB" || r.Attempts != 1 {
		t.Fatalf("env-args: %+v", r)
	}
	var got string
	for _, p := range r.Outputs {
		if b, err := os.ReadFile(p); err == nil && (filepath.Base(p) == "stdout.txt" || filepath.Base(p) == "gridsub.out") { // the names differ by backend (issue #16)
			got = string(b)
		}
	}
	if !strings.Contains(got, "threads=4 mode=fast args: --n 4") {
		t.Errorf("stdout = %q (outputs %v)", got, r.Outputs)
	}
}

// A site whose batch system refuses the job (here sbatch: siteA's debug
// partition allows 30 minutes and the testbed enforces partition limits at
// submission; the job asks an hour there) is not the end of the job: the
// broker records the refusal and the job runs on siteB, with an event
// saying so. (A partition the site does not have at all is named at
// submission instead: TestRealSlurmWrongPartitionNamed.)
func TestRealSlurmRefusalFallsThrough(t *testing.T) {
	needSlurm(t)
	job := filepath.Join(t.TempDir(), "refused.yaml")
	src := `name: refused-then-b
command: ["/bin/echo", "ran"]
resources: {nodes: 1, walltime: 1h}
site_options:
  siteA: {partition: debug}
scheduling: {prefer: [siteA]}
`
	if err := os.WriteFile(job, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr := runRealJSON(t, job)
	var r placedJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.State != "completed" || len(r.Sites) != 1 || r.Sites[0].Site != "siteB" {
		t.Fatalf("%+v\n%s", r, stderr)
	}
	var failed, refused bool
	for _, e := range r.Events {
		failed = failed || (e.Kind == "submit-failed" && e.Site == "siteA" && strings.Contains(e.Msg, "time limit"))
		refused = refused || (e.Kind == "refused" && strings.Contains(e.Msg, "siteA refused the job") && strings.Contains(e.Msg, "siteB"))
	}
	if !failed || !refused || r.Attempts != 2 {
		t.Fatalf("attempts %d, events %+v", r.Attempts, r.Events)
	}
}
