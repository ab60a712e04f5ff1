package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
