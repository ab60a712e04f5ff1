package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/bridge"
)

// With a daemon: an infeasible job is refused at submission (exit 1, the
// reason, nothing queued) exactly as without one; --dry-run and explain
// print the placement, the alternatives and the sites a job cannot use.
func TestServeFeasibilityDryRunExplain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := buildBinary(t)
	t.Chdir("../..")
	d, err := os.MkdirTemp("", "gsx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	t.Setenv(envSocket, sock)
	p := startServe(t, bin, state, sock, "--time-scale", "60")

	code, stdout, stderr := cli("examples/toowide.yaml")
	if code != exitJobFailed || stdout != "" || !strings.Contains(stderr, "needs 300 nodes; the eligible sites have 224 in all") {
		t.Fatalf("toowide with a daemon: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = cli("list", "-o", "json")
	if code != 0 || strings.Contains(stdout, "toowide") {
		t.Fatalf("toowide was stored: %s", stdout)
	}

	// A dry run through the daemon: GPUs rule every site out (exit 1).
	gpu := writeJob(t, d, "gpu.yaml", "name: g\ncommand: [x]\nresources: {nodes: 1, gpus_per_node: 2, walltime: 1h}\n")
	code, _, stderr = cli("submit", "--dry-run", gpu)
	if code != exitJobFailed || !strings.Contains(stderr, "Harbin: no GPUs, the job asks 2 per node") {
		t.Fatalf("gpu dry run: exit %d %q", code, stderr)
	}
	code, stdout, stderr = cli("submit", "--dry-run", "examples/env-args.yaml", "-o", "json")
	var e bridge.Explanation
	if err := json.Unmarshal([]byte(stdout), &e); err != nil || code != 0 || e.Job != bridge.DryRunID || e.Action != "start" ||
		e.Chosen == nil || len(e.Alternatives) == 0 {
		t.Fatalf("dry run: exit %d %v\n%s\n%s", code, err, stdout, stderr)
	}

	// Fill the grid, then explain the job waiting behind it.
	fill := writeJob(t, d, "fill.yaml", "name: fill\ncommand: [x]\nresources: {nodes: 224, walltime: 10h}\n")
	wait := writeJob(t, d, "wait.yaml", "name: wait\ncommand: [x]\nresources: {nodes: 16, cores_per_node: 6, walltime: 1h}\n")
	code, stdout, stderr = cli(fill)
	fillID := strings.TrimSpace(stdout)
	if code != 0 {
		t.Fatalf("fill: %d %s", code, stderr)
	}
	code, stdout, stderr = cli(wait)
	waitID := strings.TrimSpace(stdout)
	if code != 0 {
		t.Fatalf("wait: %d %s", code, stderr)
	}
	code, stdout, stderr = cli("explain", waitID)
	if code != 0 || !strings.Contains(stdout, "job "+waitID) || !strings.Contains(stdout, "would wait   Beijing:16") ||
		!strings.Contains(stdout, "Shanghai: its nodes have 4 cores per node, the job asks 6") {
		t.Fatalf("explain: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, _, stderr = cli("explain", "g-nosuch"); code != exitUsage || !strings.Contains(stderr, "no such job") {
		t.Errorf("explain of an unknown id: exit %d %q", code, stderr)
	}
	for _, id := range []string{waitID, fillID} {
		if code, _, stderr := cli("cancel", id); code != 0 {
			t.Errorf("cancel %s: %d %s", id, code, stderr)
		}
	}
	if code, _, stderr = cli("explain", fillID); code != exitUsage || !strings.Contains(stderr, "not queued") {
		t.Errorf("explain of a cancelled job: exit %d %q", code, stderr)
	}
	p.term(t, sock)
}
