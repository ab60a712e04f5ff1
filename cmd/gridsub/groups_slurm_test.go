package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRealSlurmArrayAndPipeline runs a job array and a two-step pipeline
// on the real SLURM testbed: every array element runs as a SLURM job of
// its own with its index and its parent's id in its environment (read back
// from its fetched output), and the pipeline's second step, on the other
// site, starts only after the first ended there (their own clocks, written
// by the jobs, say so).
func TestRealSlurmArrayAndPipeline(t *testing.T) {
	needSlurm(t)
	dir := t.TempDir()
	arrFile, pipeFile := filepath.Join(dir, "arr.yaml"), filepath.Join(dir, "pipe.yaml")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(arrFile, `name: arr
command: ["/bin/sh", "-c", "echo \"$GRIDSUB_ARRAY_INDEX $GRIDSUB_ARRAY_JOB_ID\" > idx.txt"]
array: "3,5,7%2"
outputs: [idx.txt]
resources: {nodes: 1, walltime: 2m}
`)
	write(pipeFile, `name: pipe
steps:
  - name: first
    command: ["/bin/sh", "-c", "sleep 1; date +%s%N > t.txt"]
    outputs: [t.txt]
    resources: {nodes: 1, walltime: 2m}
    scheduling: {sites: [siteA]}
  - name: second
    afterok: [first]
    command: ["/bin/sh", "-c", "date +%s%N > t.txt"]
    outputs: [t.txt]
    resources: {nodes: 1, walltime: 2m}
    scheduling: {sites: [siteB]}
`)
	t.Run("array", func(t *testing.T) {
		out := t.TempDir()
		r, _ := runRealOut(t, arrFile, out)
		if r.State != "completed" {
			t.Fatalf("%+v", r)
		}
		ents, _ := os.ReadDir(out)
		if len(ents) != 3 {
			t.Fatalf("%d output directories, want one per element: %v", len(ents), ents)
		}
		for _, e := range ents {
			id := e.Name()
			parent, idx, ok := strings.Cut(id, "_")
			b, err := os.ReadFile(filepath.Join(out, id, "idx.txt"))
			if !ok || err != nil || string(b) != idx+" "+parent+"\n" {
				t.Errorf("element %s wrote %q (%v)", id, b, err)
			}
		}
	})
	t.Run("pipeline", func(t *testing.T) {
		out := t.TempDir()
		r, _ := runRealOut(t, pipeFile, out)
		if r.State != "completed" {
			t.Fatalf("%+v", r)
		}
		var ts [2]int64
		for k := range 2 {
			m, _ := filepath.Glob(filepath.Join(out, "*_"+strconv.Itoa(k+1), "t.txt"))
			if len(m) != 1 {
				t.Fatalf("step %d: outputs %v", k+1, m)
			}
			b, _ := os.ReadFile(m[0])
			ts[k], _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		}
		if ts[0] == 0 || ts[1] <= ts[0] {
			t.Fatalf("step 2 ran at %d, step 1 ended at %d", ts[1], ts[0])
		}
	})
}

// runRealOut is runReal with the outputs in out.
func runRealOut(t *testing.T, job, out string) (runJSON, string) {
	t.Helper()
	code, stdout, stderr := gridsub(t, "--config", "configs/local-slurm.yaml", job, "--output", "json", "--out-dir", out)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var r runJSON
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	return r, stderr
}
