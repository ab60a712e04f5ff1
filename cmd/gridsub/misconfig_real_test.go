package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFile writes text into dir/name and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// misconfigured writes a copy of a testbed configuration with one line
// replaced (the site's own partition or queue).
func misconfigured(t *testing.T, dir, config, old, new string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, config))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q", config, old)
	}
	return writeFile(t, dir, "config.yaml", strings.Replace(string(b), old, new, 1))
}

// wantNamed runs gridsub and requires the exit code and every text in
// its output (stdout and stderr).
func wantNamed(t *testing.T, what string, code int, args []string, texts ...string) {
	t.Helper()
	got, stdout, stderr := gridsub(t, args...)
	for _, w := range texts {
		if !strings.Contains(stdout+stderr, w) {
			t.Errorf("%s: output lacks %q (exit %d)\nstdout:\n%s\nstderr:\n%s", what, w, got, stdout, stderr)
		}
	}
	if got != code {
		t.Errorf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what, got, code, stdout, stderr)
	}
}

// TestRealSlurmWrongPartitionNamed: on the real SLURM testbed, a job whose
// site options name a partition siteA does not have is refused by
// `gridsub validate` and by the dry run, naming the site, the field and
// the partitions siteA has; a configuration whose siteA partition is
// missing is named by both too, not called "down".
func TestRealSlurmWrongPartitionNamed(t *testing.T) {
	needSlurm(t)
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", `name: wrongpart
command: ["/bin/true"]
resources: {nodes: 1, walltime: 5m}
scheduling: {sites: [siteA]}
site_options: {siteA: {partition: nosuch}}
`)
	want := `site siteA has no partition "nosuch"; it has: batch, debug`
	wantNamed(t, "validate", exitUsage, []string{"--config", "configs/local-slurm.yaml", "validate", job}, `SiteOptions["siteA"].Partition`, want)
	wantNamed(t, "dry run", exitUsage, []string{"--config", "configs/local-slurm.yaml", "submit", "--dry-run", "--embedded", job}, `SiteOptions["siteA"].Partition`, want)

	cfg := misconfigured(t, dir, "configs/local-slurm.yaml", "partition: batch", "partition: nosuch")
	pinned := writeFile(t, dir, "pinned.yaml", "name: pinned\ncommand: [\"/bin/true\"]\nresources: {nodes: 1, walltime: 5m}\nscheduling: {sites: [siteA]}\n")
	open := writeFile(t, dir, "open.yaml", "name: open\ncommand: [\"/bin/true\"]\nresources: {nodes: 1, walltime: 5m}\n")
	want = `site siteA has no partition "nosuch" (sites.siteA.partition in the configuration); it has: batch, debug`
	wantNamed(t, "validate, misconfigured site", exitJobFailed, []string{"--config", cfg, "validate", pinned}, "site siteA is misconfigured: "+want)
	wantNamed(t, "validate, another site left", 0, []string{"--config", cfg, "validate", open}, "warning: site siteA is misconfigured: "+want)
	wantNamed(t, "dry run, misconfigured site", 0, []string{"--config", cfg, "submit", "--dry-run", "--embedded", open}, "misconfigured: "+want)
}

// TestRealPBSWrongQueueNamed: the same on the real OpenPBS server, with
// its queue.
func TestRealPBSWrongQueueNamed(t *testing.T) {
	needPBS(t)
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", `name: wrongq
command: ["/bin/true"]
resources: {nodes: 1, walltime: 5m}
site_options: {pbs: {partition: nosuch}}
`)
	wantNamed(t, "validate", exitUsage, []string{"--config", "configs/local-pbs.yaml", "validate", job}, `SiteOptions["pbs"].Partition`, `site pbs has no queue "nosuch"; it has: workq`)
	cfg := misconfigured(t, dir, "configs/local-pbs.yaml", "partition: ${GRIDSUB_PBS_QUEUE", "partition: nosuch #")
	open := writeFile(t, dir, "open.yaml", "name: open\ncommand: [\"/bin/true\"]\nresources: {nodes: 1, walltime: 5m}\n")
	want := `site pbs has no queue "nosuch" (sites.pbs.partition in the configuration); it has: workq`
	wantNamed(t, "validate, misconfigured site", exitJobFailed, []string{"--config", cfg, "validate", open}, "site pbs is misconfigured: "+want)
	wantNamed(t, "dry run, misconfigured site", exitJobFailed, []string{"--config", cfg, "submit", "--dry-run", "--embedded", open}, "misconfigured: "+want)
}
