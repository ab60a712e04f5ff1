package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAssignRunsByCores(t *testing.T) {
	got := assignRuns(6, []string{"A", "B"}, map[string]int{"A": 16, "B": 8})
	if strings.Join(got, ",") != "A,A,B,A,A,B" {
		t.Fatalf("got %v, want A twice as often as B, interleaved", got)
	}
	n := map[string]int{}
	for _, s := range assignRuns(300, []string{"A", "B", "C"}, map[string]int{"A": 1, "B": 1, "C": 4}) {
		n[s]++
	}
	if n["A"] != 50 || n["B"] != 50 || n["C"] != 200 {
		t.Fatalf("%v", n)
	}
}

func TestArraySpec(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{{[]int{7}, "7"}, {[]int{3, 0, 1, 2, 7, 9, 10}, "0-3,7,9-10"}, {[]int{0, 2, 4}, "0,2,4"}} {
		if got := arraySpec(c.in); got != c.want {
			t.Errorf("%v: %q, want %q", c.in, got, c.want)
		}
	}
}

// TestSweepRefusals: flags that apply only to a sweep, a state that is not
// this sweep's or is corrupt, and --run-index's mistakes get a clear error
// (exit 2) before any daemon is asked.
func TestSweepRefusals(t *testing.T) {
	exp := "cmd/gridsub/testdata/sweep-paper001-fig5.yaml"
	out := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", exp, "--limit", "2"}, "--limit applies to a sweep on batch sites only"},
		{[]string{"sim", exp, "--walltime", "1h"}, "--walltime applies to a sweep"},
		{[]string{"sim", exp, "--run-out", "x.json"}, "--run-out goes with --run-index"},
		{[]string{"sim", exp, "--run-index", "0"}, "--run-index needs --run-out"},
		{[]string{"sim", exp, "--run-index", "9", "--run-out", filepath.Join(out, "r.json")}, "the experiment has runs 0..8"},
		{[]string{"sim", exp, "--run-index", "0", "--run-out", "r.json", "--on", "siteA"}, "does not go with --on"},
		{[]string{"sim", exp, "--on", "siteA,siteA", "--out", out}, "site siteA listed twice"},
		{[]string{"sim", exp, "--on", "siteA", "--workers", "4", "--out", out}, "with --on the runs go to the sites"},
		{[]string{"sim", exp, "--on", "siteA", "--limit", "-1", "--out", out}, "--limit must be >= 1"},
		{[]string{"sim", "configs/experiments/paper003-qos.yaml", "--on", "siteA", "--out", out}, "runs on this machine only"},
	} {
		code, _, stderr := gridsub(t, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, exitUsage, c.want)
		}
	}
	// A state file that is not this sweep's, or not a state at all.
	state := filepath.Join(out, sweepStateFile)
	for _, c := range []struct{ body, want string }{
		{`{"format":"gridsub-sweep/1","key":"0123456789abcdef","fingerprint":"other","sites":["siteA"],"assign":["siteA"],"stage":{}}`, "holds a sweep of another experiment"},
		{`{"format":"gridsub-sweep/1","key":"../../etc","sites":["siteA"],"assign":[],"stage":{}}`, "is not 16 hexadecimal digits"},
		{`{"format":"gridsub-sweep/1","key":"0123456789abcdef","sites":["siteA"],"assign":["siteZ"],"stage":{}}`, `assigned to "siteZ"`},
		{`garbage`, "is not a sweep state gridsub can read"},
	} {
		if err := os.WriteFile(state, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := gridsub(t, "sim", exp, "--on", "siteA", "--out", out)
		if code != exitUsage || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, state) {
			t.Errorf("state %s: exit %d, stderr %q; want exit %d naming the file and %q", c.body, code, stderr, exitUsage, c.want)
		}
	}
}
