package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRealSlurmBenefitPlanner: with broker.policy: benefit the real SLURM
// testbed runs a job with a deadline and an "urgent" benefit function to
// completion, and a job no site can finish by its deadline is refused at
// once (exit 2) with the predicted end, before anything reaches a site.
func TestRealSlurmBenefitPlanner(t *testing.T) {
	needSlurm(t)
	raw, err := os.ReadFile(filepath.Join("..", "..", "configs", "local-slurm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfgText := strings.Replace(string(raw), "policy: optimal-easy", "policy: benefit", 1)
	if cfgText == string(raw) {
		t.Fatal("configs/local-slurm.yaml has no 'policy: optimal-easy' line to replace")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "benefit.yaml")
	job := filepath.Join(dir, "urgent.yaml")
	late := filepath.Join(dir, "late.yaml")
	os.WriteFile(cfg, []byte(cfgText), 0o644)
	os.WriteFile(job, []byte("name: urgent\ncommand: [hostname]\nresources: {nodes: 1, walltime: 2m}\n"+
		"scheduling:\n  deadline: +30m\n  benefit: {shape: step, a: 100, b: 0.5}\n"), 0o644)
	os.WriteFile(late, []byte("name: late\ncommand: [hostname]\nresources: {nodes: 1, walltime: 2h}\nscheduling: {deadline: +30m}\n"), 0o644)
	code, stdout, stderr := gridsub(t, "--config", cfg, job, "--output", "json", "--out-dir", filepath.Join(dir, "out"))
	if code != 0 {
		t.Fatalf("urgent job: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, `"completed"`) || !strings.Contains(stdout, `"site`) {
		t.Fatalf("urgent job did not complete on a site:\n%s", stdout)
	}
	code, _, stderr = gridsub(t, "--config", cfg, late)
	// Exit 1: the job can never run (bridge.Feasible, the one deadline
	// rule), as validate and the daemon say.
	if code != exitJobFailed || !strings.Contains(stderr, "deadline") || !strings.Contains(stderr, "1h30m0s late") {
		t.Fatalf("late job: exit %d, stderr %q; want exit 1 saying the deadline cannot be met", code, stderr)
	}
}
