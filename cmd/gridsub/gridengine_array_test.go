package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRealGridEngineNativeArray runs a 20-element job array through gridsub
// on the real Grid Engine, the plugin loaded by path and checksum with
// plugin.options.native_arrays on: the elements a cycle dispatches go as
// one array job (qsub -t) through the plugin seam; each element ran as task
// index+1 of an array job ($JOB_ID, $SGE_TASK_ID, read back from its fetched
// output), several elements share each array job, and every one completes.
func TestRealGridEngineNativeArray(t *testing.T) {
	needGE(t)
	cfgPath := geConfig(t, "")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(b), "options: {pe: "+geEnv("PE")+"}", "options: {pe: "+geEnv("PE")+", native_arrays: true}", 1)
	if cfg == string(b) {
		t.Fatal("the site's plugin options were not found in the configuration")
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	const n = 20
	job := filepath.Join(t.TempDir(), "arr.yaml")
	if err := os.WriteFile(job, []byte(`name: gearr
command: ["/bin/sh", "-c", "echo \"$GRIDSUB_ARRAY_INDEX ${JOB_ID:-none} ${SGE_TASK_ID:-none}\" > idx.txt"]
array: "0-`+strconv.Itoa(n-1)+`"
outputs: [idx.txt]
resources: {nodes: 1, walltime: 2m}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code, stdout, stderr := gridsub(t, "--config", cfgPath, job, "--output", "json", "--out-dir", out)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	ents, _ := os.ReadDir(out)
	if len(ents) != n {
		t.Fatalf("%d output directories, want one per element: %v", len(ents), ents)
	}
	perArray := map[string]int{}
	for _, e := range ents {
		_, idx, _ := strings.Cut(e.Name(), "_")
		b, err := os.ReadFile(filepath.Join(out, e.Name(), "idx.txt"))
		f := strings.Fields(string(b))
		if err != nil || len(f) != 3 || f[0] != idx {
			t.Fatalf("element %s wrote %q (%v)", e.Name(), b, err)
		}
		i, _ := strconv.Atoi(idx)
		if f[2] != strconv.Itoa(i+1) {
			t.Fatalf("element %s ran as task %s of job %s, want a task %d of an array job", e.Name(), f[2], f[1], i+1)
		}
		perArray[f[1]]++
	}
	for id, k := range perArray {
		if k < 2 {
			t.Fatalf("array job %s ran %d element(s): elements were not grouped (%v)", id, k, perArray)
		}
	}
	t.Logf("%d elements in %d array job(s): %v", n, len(perArray), perArray)
}
