package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// On the real OpenPBS server: memory per node goes into the select chunk,
// the account is qsub -A and the setup step runs in the job's shell before
// the command (the command sees what it exports); qsub accepts it and the
// job completes. A job asking GPUs is refused before anything reaches qsub
// (pbsnodes reports none).
func TestRealPBSResourcesAccountSetup(t *testing.T) {
	needPBS(t)
	start := time.Now() // the lock is held: what follows is this test's own time
	defer func() {
		t.Logf("ran for %s once it held the testbed's lock", time.Since(start).Round(time.Millisecond))
	}()
	d := t.TempDir()
	job := filepath.Join(d, "res.yaml")
	body := `name: pbs-res
setup: |
  export MODE=from-setup
command: ["/bin/sh", "-c", "echo mode=$MODE"]
resources: {nodes: 1, memory_per_node: 64MiB, walltime: 2m}
site_options:
  pbs: {account: proj42}
`
	if err := os.WriteFile(job, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	j, stderr := runPBS(t, job)
	if j.State != "completed" || len(j.Sites) != 1 || j.Sites[0].Site != "pbs" {
		t.Fatalf("%+v\n%s", j, stderr)
	}
	var said string
	for _, p := range j.Outputs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "mode=") {
			said = strings.TrimSpace(string(b))
		}
	}
	if said != "mode=from-setup" {
		t.Fatalf("the job said %q (outputs %v)", said, j.Outputs)
	}
	gpu := filepath.Join(d, "gpu.yaml")
	if err := os.WriteFile(gpu, []byte("name: g\ncommand: [x]\nresources: {nodes: 1, gpus_per_node: 1, walltime: 1m}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := gridsub(t, "--config", "configs/local-pbs.yaml", gpu, "--out-dir", d)
	if code != exitJobFailed || stdout != "" || !strings.Contains(stderr, "pbs: no GPUs, the job asks 1 per node") {
		t.Fatalf("gpu job: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
}
