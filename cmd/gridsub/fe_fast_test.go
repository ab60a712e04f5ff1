package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
)

// TestFrontFastPath: the front-ends and `status --snakemake ID` skip the
// command tree; --help, gridsub's own flags and other commands do not.
func TestFrontFastPath(t *testing.T) {
	t.Setenv(envSocket, filepath.Join(t.TempDir(), "none.sock"))
	t.Setenv(envURL, "")
	for _, args := range [][]string{
		{"squeue", "--help"}, {"sbatch", "-t", "5", "--help"}, {"status", "--snakemake"}, {"status", "-o", "json", "1"},
		{"status", "--snakemake", "1", "-o", "json"}, {"status", "--snakemake", "--bogus"}, {"serve"}, {"shims", "install", "x"}, {},
	} {
		if _, ok := fastPath(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); ok {
			t.Errorf("fastPath took %q", args)
		}
	}
	for _, args := range [][]string{{"status", "--snakemake", "7"}, {"status", "7", "--snakemake"}} {
		var out, errb bytes.Buffer
		err, ok := fastPath(context.Background(), args, &out, &errb)
		if !ok || err != nil || out.String() != "running\n" {
			t.Errorf("%q: ok %v, err %v, stdout %q", args, ok, err, out.String())
		}
	}
	var out, errb bytes.Buffer
	err, ok := fastPath(context.Background(), []string{"squeue", "-h"}, &out, &errb)
	if !ok || processExit(err, &errb) != 1 || !bytes.Contains(errb.Bytes(), []byte("squeue: error: ")) {
		t.Errorf("squeue without a daemon: ok %v, err %v, stderr %q", ok, err, errb.String())
	}
}
