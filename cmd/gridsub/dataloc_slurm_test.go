package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dataRun is the part of a job's JSON summary these tests read.
type dataRun struct {
	State   string `json:"state"`
	Reason  string `json:"reason"`
	Outputs []string
	Sites   []struct {
		Site string `json:"site"`
	} `json:"sites"`
	Events []struct {
		Kind string `json:"kind"`
		Msg  string `json:"msg"`
	} `json:"events"`
}

// runDataJob writes a job whose input lies at siteA (path below siteA's
// remote_dir) and that may run only at site, runs it on the real testbed
// and returns its summary and the outputs' contents by base name.
func runDataJob(t *testing.T, name, path, size, site string) (dataRun, map[string]string, int) {
	t.Helper()
	job := filepath.Join(t.TempDir(), name+".yaml")
	src := fmt.Sprintf(`name: %s
command: ["/bin/sh", "-c", "if test -L big.dat; then echo link; else echo copy; fi > how.txt; sha256sum big.dat > sum.txt"]
inputs:
  - {site: siteA, path: %s, size: %s, remote: big.dat}
outputs: [sum.txt, how.txt]
resources: {nodes: 1, walltime: 2m}
scheduling: {sites: [%s]}
`, name, path, size, site)
	if err := os.WriteFile(job, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := gridsub(t, "--config", "configs/local-slurm.yaml", job, "--output", "json", "--out-dir", t.TempDir())
	var r dataRun
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	files := map[string]string{}
	for _, p := range r.Outputs {
		if b, err := os.ReadFile(p); err == nil {
			files[filepath.Base(p)] = string(b)
		}
	}
	return r, files, code
}

func (r dataRun) event(kind, text string) bool {
	for _, e := range r.Events {
		if e.Kind == kind && strings.Contains(e.Msg, text) {
			return true
		}
	}
	return false
}

// TestRealSlurmInputsAtSite puts a 3 MB file in siteA's scratch (its
// remote_dir) and runs a job that reads it on the real SLURM testbed:
// at siteB it is relayed through the broker (SFTP read at siteA, SFTP put
// at siteB) and arrives as a regular file with the same SHA-256; at siteA
// it is used in place (a symbolic link in the job directory, no copy).
// A missing file, one larger than declared and a symbolic link out of
// siteA's scratch fail the job with an error naming site and path, and
// nothing is submitted.
func TestRealSlurmInputsAtSite(t *testing.T) {
	needSlurm(t)
	scratch := os.Getenv("GRIDSUB_SITEA_SCRATCH")
	dir := filepath.Join(scratch, "dataloc-"+rand.Text()[:10]) // removed whole by the cleanup
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := make([]byte, 3_000_000)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(dir, "big.dat"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:]) + "  big.dat\n"
	rel, _ := filepath.Rel(scratch, dir)

	r, files, code := runDataJob(t, "dl-relay", rel+"/big.dat", "3MB", "siteB")
	if code != 0 || r.State != "completed" || len(r.Sites) != 1 || r.Sites[0].Site != "siteB" {
		t.Fatalf("relayed: exit %d, %+v", code, r)
	}
	if files["sum.txt"] != want || files["how.txt"] != "copy\n" {
		t.Fatalf("relayed: sum.txt %q how.txt %q; want %q and a copy", files["sum.txt"], files["how.txt"], want)
	}
	if !r.event("data", "relayed through the broker as big.dat") || !r.event("data", "to siteB") {
		t.Errorf("relayed: no relay event: %+v", r.Events)
	}

	r, files, code = runDataJob(t, "dl-inplace", rel+"/big.dat", "3MB", "siteA")
	if code != 0 || r.State != "completed" || r.Sites[0].Site != "siteA" {
		t.Fatalf("in place: exit %d, %+v", code, r)
	}
	if files["sum.txt"] != want || files["how.txt"] != "link\n" {
		t.Fatalf("in place: sum.txt %q how.txt %q; want %q through a link", files["sum.txt"], files["how.txt"], want)
	}
	if !r.event("data", "used in place as big.dat") {
		t.Errorf("in place: no event: %+v", r.Events)
	}

	// Failures: before any site hears of the job.
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "escape.dat")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "escdir")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, size, site, why string
	}{
		{"dl-missing", rel + "/nosuch.dat", "1MB", "siteB", "does not exist"},
		{"dl-toobig", rel + "/big.dat", "1MB", "siteB", "over the limit of 1000000 bytes"},
		{"dl-link", rel + "/escape.dat", "1MB", "siteB", "symbolic link"},
		{"dl-linkdir", rel + "/escdir/secret", "1MB", "siteB", "symbolic link"},
		{"dl-link-inplace", rel + "/escape.dat", "1MB", "siteA", "symbolic link"},
	} {
		r, _, code := runDataJob(t, c.name, c.path, c.size, c.site)
		if code != 1 || r.State != "failed" || !strings.Contains(r.Reason, "staging its data failed") ||
			!strings.Contains(r.Reason, "siteA:"+c.path) || !strings.Contains(r.Reason, c.why) || !strings.Contains(r.Reason, "not retryable") {
			t.Errorf("%s: exit %d, state %s, reason %q; want failed naming siteA:%s and %q", c.name, code, r.State, r.Reason, c.path, c.why)
		}
		if r.event("submitted-remote", "") {
			t.Errorf("%s: submitted although its data could not be staged", c.name)
		}
	}
}
