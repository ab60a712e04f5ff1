package slurm

import (
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// The job file's memory, GPUs, partition and account reach sbatch as
// separate words; the spec's partition wins over the site's.
func TestSbatchArgsResources(t *testing.T) {
	s := &backends.JobSpec{GridID: "g9", Nodes: 2, CoresPerNode: 4, Walltime: time.Hour, Command: []string{"x"},
		MemPerNode: 3<<30 + 1, GPUsPerNode: 2, Partition: "gpu", Account: "proj-42"}
	got := strings.Join(SbatchArgs(s, "batch"), " ")
	for _, w := range []string{"--partition=gpu ", "--account=proj-42 ", "--mem=3073M ", "--gres=gpu:2 ", "--cpus-per-task=4 "} {
		if !strings.Contains(got, w) {
			t.Errorf("sbatch args %q lack %q", got, w)
		}
	}
	if strings.Contains(got, "--partition=batch") {
		t.Errorf("the site's partition was kept: %q", got)
	}
	plain := strings.Join(SbatchArgs(&backends.JobSpec{GridID: "g9", Nodes: 1, Walltime: time.Hour, Command: []string{"x"}}, ""), " ")
	for _, w := range []string{"--mem", "--gres", "--account", "--partition"} {
		if strings.Contains(plain, w) {
			t.Errorf("a job asking nothing got %s: %q", w, plain)
		}
	}
}

// A partition or account that is not a plain name never reaches sbatch.
func TestCheckSpecRejectsBadPartitionAndAccount(t *testing.T) {
	for _, s := range []*backends.JobSpec{
		{GridID: "g", Nodes: 1, Walltime: time.Hour, Command: []string{"x"}, Partition: "--wrap=rm"},
		{GridID: "g", Nodes: 1, Walltime: time.Hour, Command: []string{"x"}, Account: "a b"},
		{GridID: "g", Nodes: 1, Walltime: time.Hour, Command: []string{"x"}, GPUsPerNode: -1},
	} {
		if err := checkSpec(s); err == nil {
			t.Errorf("checkSpec(%+v) = nil", s)
		}
	}
}

// The setup runs in the command's shell before it (what it exports the
// command sees); a failing setup ends the job with 125 and the command
// never runs; an exit in the setup still leaves the exit-code file.
func TestWrapperSetup(t *testing.T) {
	sp := &backends.JobSpec{GridID: "g1", Nodes: 1, Walltime: time.Minute,
		Command: []string{"/bin/sh", "-c", `echo "mode=$MODE"`}, Setup: "export MODE=from-setup\n"}
	dir, out, rc := runWrapper(t, sp)
	if rc != 0 || strings.TrimSpace(out) != "mode=from-setup" || readExit(t, dir) != "0" {
		t.Errorf("setup + command: rc %d, out %q", rc, out)
	}
	sp.Setup = "false"
	sp.Command = []string{"/bin/sh", "-c", "echo ran"}
	dir, out, rc = runWrapper(t, sp)
	if rc != 125 || strings.Contains(out, "ran") || readExit(t, dir) != "125" {
		t.Errorf("failing setup: rc %d, out %q", rc, out)
	}
	sp.Setup = "exit 7"
	dir, _, rc = runWrapper(t, sp)
	if rc != 7 || readExit(t, dir) != "7" {
		t.Errorf("exit in setup: rc %d", rc)
	}
	// A script job: the setup's variables reach the script.
	sp = &backends.JobSpec{GridID: "g1", Nodes: 1, Walltime: time.Minute, Script: `echo "v=$V"`, Setup: "V=x; export V"}
	dir, out, rc = runWrapper(t, sp)
	if rc != 0 || strings.TrimSpace(out) != "v=x" || readExit(t, dir) != "0" {
		t.Errorf("setup + script: rc %d, out %q", rc, out)
	}
}

func TestParseSinfoMemoryAndGres(t *testing.T) {
	recs, err := ParseSinfo(fixture(t, "sinfo_siteB_mem").Stdout)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || recs[0].MemMiB != 4000 || recs[0].GPUs != 0 || recs[0].CPUs != 4 {
		t.Fatalf("records %+v", recs)
	}
	for in, want := range map[string]int{"(null)": 0, "gpu:2": 2, "gpu:a100:4(S:0-1)": 4, "gpu:a100:2,gpu:v100:1,shard:8": 3, "mps:100": 0} {
		if got, err := GresGPUs(in); err != nil || got != want {
			t.Errorf("GresGPUs(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := GresGPUs("gpu:lots"); err == nil {
		t.Error("GresGPUs(gpu:lots) = nil error")
	}
}
