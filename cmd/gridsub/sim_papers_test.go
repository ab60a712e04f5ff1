package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/internal/config"
)

// gridsub sim runs the kinds drrm and trust-minmin as a user would: the
// table shows their metrics, the plots are written, and --jobs (which they
// have no use for) is a usage error rather than silently ignored.
func TestSimPaperKinds(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"drrm.yaml": "name: d\nkind: drrm\ndrrm: {set: synthetic, resources: [5, 25], requests: 50, seeds: 2}\n" +
			"plots:\n  - {name: tpc, x: res_number, y: tpc, series: [policy]}\n",
		"trust.yaml": "name: t\nkind: trust-minmin\ntrust: {tasks: [20], runs: 3, seeds: 2}\n" +
			"plots:\n  - {name: mig, x: run, y: migration_rate, series: [policy]}\n",
	}
	for name, src := range files {
		exp := filepath.Join(dir, name)
		if err := os.WriteFile(exp, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out-"+name)
		code, stdout, errOut := gridsub(t, "sim", exp, "--out", out)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errOut)
		}
		want := map[string]string{"drrm.yaml": "TPC", "trust.yaml": "MIGRATION_RATE"}[name]
		if !strings.Contains(stdout, want) || !strings.Contains(stdout, "runs on") {
			t.Errorf("%s: table without %s:\n%s", name, want, stdout)
		}
		plot := map[string]string{"drrm.yaml": "tpc.svg", "trust.yaml": "mig.svg"}[name]
		if _, err := os.Stat(filepath.Join(out, plot)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		code, _, errOut = gridsub(t, "sim", exp, "--jobs", "100", "--out", out)
		if code != exitUsage || !strings.Contains(errOut, "--jobs") {
			t.Errorf("%s --jobs: exit %d, stderr %q; want a usage error naming --jobs", name, code, errOut)
		}
	}
}

// TestServeTrustMinMin: a real `gridsub serve` plans with paper 002's
// Trust-Min-min (broker.policy: trust-min-min) over sites in two local
// areas (sites[].area): jobs complete (the name is no co-allocation
// planner's: without the assemble wiring the daemon refuses to start); a bad
// area name is refused at load, naming the field.
func TestServeTrustMinMin(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub and starts a daemon")
	}
	cfg := `sites:
  - {name: a, kind: sim, nodes: 4, cores_per_node: 1, h: 1.0, area: north}
  - {name: b, kind: sim, nodes: 8, cores_per_node: 1, h: 0.8, area: south}
network:
  default: {bandwidth: 1MB/s, latency: 10ms}
broker:
  policy: trust-min-min
`
	dir, state, sock := serveDirs(t)
	path := filepath.Join(dir, "tmm.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	badCfg := strings.Replace(cfg, "area: south", "area: 'so uth'", 1)
	if _, err := config.Parse("bad.yaml", []byte(badCfg), func(k string) (string, bool) { return dir, k == "HOME" }); err == nil || !strings.Contains(err.Error(), "sites[1].area") {
		t.Errorf("a bad area: %v; want an error naming sites[1].area", err)
	}
	bin := buildBinary(t)
	t.Setenv(envSocket, sock)
	p := startServe(t, bin, state, sock, "--time-scale", "3000", "--config", path)
	runJob(t, dir, "tmm-1")
	runJob(t, dir, "tmm-2")
	p.term(t, sock)
}
