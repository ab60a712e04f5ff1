package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// needSlurm skips unless the local SLURM testbed's environment is loaded.
func needSlurm(t *testing.T) {
	t.Helper()
	if os.Getenv("GRIDSUB_SSH_KEY") == "" || os.Getenv("GRIDSUB_SITEA_SSH_PORT") == "" {
		t.Skip("no SLURM testbed: run `bash scripts/slurm-testbed.sh start && source /var/tmp/gridsub-local-testbed/testbed.env` (scripts/test.sh does both)")
	}
}

type runJSON struct {
	State string `json:"state"`
	Sites []struct {
		Site  string `json:"site"`
		Nodes int    `json:"nodes"`
	} `json:"sites"`
	Outputs []string `json:"outputs"`
}

// runRealJSON runs a job file on the real testbed, requires success and
// returns its JSON summary (stdout) and progress (stderr).
func runRealJSON(t *testing.T, job string) (stdout, stderr string) {
	t.Helper()
	out := t.TempDir()
	code, stdout, stderr := gridsub(t, "--config", "configs/local-slurm.yaml", job, "--output", "json", "--out-dir", out)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	return stdout, stderr
}

func runReal(t *testing.T, job string) (runJSON, string) {
	t.Helper()
	stdout, stderr := runRealJSON(t, job)
	var r runJSON
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	return r, stderr
}

// TestRealSlurmStagesInAndOut runs examples/staging.yaml on the real SLURM
// testbed: inputs go up over SFTP, the job computes from them, and both the
// result file and the logs/ directory come back.
func TestRealSlurmStagesInAndOut(t *testing.T) {
	needSlurm(t)
	r, stderr := runReal(t, "examples/staging.yaml")
	if r.State != "completed" || len(r.Sites) != 1 || !strings.HasPrefix(r.Sites[0].Site, "site") {
		t.Fatalf("%+v", r)
	}
	if !strings.Contains(stderr, "placement: "+r.Sites[0].Site) {
		t.Fatalf("stderr does not say where it ran:\n%s", stderr)
	}
	var result, log string
	for _, p := range r.Outputs {
		b, _ := os.ReadFile(p)
		switch filepath.Base(p) {
		case "result.txt":
			result = string(b)
		case "solve.log":
			log = string(b)
		}
	}
	// examples/data/input.dat and params.txt decide this line.
	if !strings.HasPrefix(result, "iterations=") || !strings.Contains(result, "sum=") {
		t.Fatalf("result.txt = %q (outputs %v)", result, r.Outputs)
	}
	if !strings.Contains(log, "solved on") {
		t.Fatalf("logs/solve.log = %q", log)
	}
}

// TestRealSlurmCoAllocates runs a 10-node job, wider than either site (8 and
// 4 nodes), which must be split across both.
func TestRealSlurmCoAllocates(t *testing.T) {
	needSlurm(t)
	r, _ := runReal(t, "examples/wide-slurm.yaml")
	total := 0
	for _, s := range r.Sites {
		total += s.Nodes
	}
	if r.State != "completed" || len(r.Sites) != 2 || total != 10 {
		t.Fatalf("%+v", r)
	}
	parts := 0
	for _, p := range r.Outputs {
		if filepath.Base(p) != "gridsub.out" {
			continue
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "of 2 of g") {
			parts++
		}
	}
	if parts != 2 {
		t.Fatalf("%d of 2 parts reported their share; outputs %v", parts, r.Outputs)
	}
}

// TestRealSlurmOneSiteDown: siteB's sshd port refuses connections; the job
// still runs on siteA, and the user is told siteB is out. With both sites
// down nothing is submitted and the error says what to check.
func TestRealSlurmOneSiteDown(t *testing.T) {
	needSlurm(t)
	closed := closedPort(t)
	t.Setenv("GRIDSUB_SITEB_SSH_PORT", closed)
	r, stderr := runReal(t, "examples/hello.yaml")
	if r.State != "completed" || len(r.Sites) != 1 || r.Sites[0].Site != "siteA" {
		t.Fatalf("with siteB down: %+v; want completed on siteA\n%s", r, stderr)
	}
	if !strings.Contains(stderr, "site siteB cannot be reached now") || !strings.Contains(stderr, "127.0.0.1:"+closed) {
		t.Errorf("stderr does not say siteB is unreachable:\n%s", stderr)
	}
	t.Setenv("GRIDSUB_SITEA_SSH_PORT", closed)
	code, stdout, stderr := gridsub(t, "--config", "configs/local-slurm.yaml", "examples/hello.yaml", "--out-dir", t.TempDir())
	if code != exitInternal || !strings.Contains(stderr, "nothing was submitted") || !strings.Contains(stderr, "site siteA") || !strings.Contains(stderr, "site siteB") {
		t.Fatalf("both sites down: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// closedPort is a loopback port nobody listens on (it was free a moment ago).
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// TestRealSlurmRunsInItsReservation: a job with a window is admitted at
// once, bound shortly before the window opens, and runs inside the native
// SLURM reservation gridsub created for it (the job sees its name), which
// is deleted once the job ended.
func TestRealSlurmRunsInItsReservation(t *testing.T) {
	needSlurm(t)
	dir := t.TempDir()
	job := filepath.Join(dir, "resv.yaml")
	body := `name: slurm-resv
command: ["/bin/sh", "-c", "echo in reservation $SLURM_JOB_RESERVATION"]
resources: {nodes: 2, walltime: 2m}
scheduling:
  reservation: {earliest_start: +35s, latest_end: +6m}
`
	if err := os.WriteFile(job, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr := runRealJSON(t, job)
	var j jobJSON
	if err := json.Unmarshal([]byte(stdout), &j); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	r := j.Resv
	if j.State != "completed" || r == nil || r.State != "released" || r.Native != j.ID+"-r" || j.Start == nil || j.Start.Before(r.Earliest) {
		t.Fatalf("job %+v, reservation %+v; want completed inside released reservation %s-r, not before %v", j, r, j.ID, r)
	}
	var said string
	for _, p := range j.Outputs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "in reservation") {
			said = strings.TrimSpace(string(b))
		}
	}
	if said != "in reservation "+j.ID+"-r" {
		t.Fatalf("the job said %q; want it inside reservation %s-r (outputs %v)", said, j.ID, j.Outputs)
	}
	// Deleted at the site: scontrol delete succeeded.
	released := false
	for _, e := range j.Events {
		released = released || e.Kind == "released"
		if e.Kind == "release-failed" {
			t.Fatalf("deleting the reservation failed: %s", e.Msg)
		}
	}
	if !released {
		t.Fatalf("no released event: %+v", j.Events)
	}
	if !strings.Contains(stderr, "reservation bound: "+r.Site) {
		t.Fatalf("progress does not say where it was bound:\n%s", stderr)
	}
}
