package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/backends/pbs/pbslock"
	"github.com/gridsub/gridsub/backends/transport"
)

// needPBS skips unless the OpenPBS testbed's environment is loaded.
func needPBS(t *testing.T) {
	t.Helper()
	if os.Getenv("GRIDSUB_PBS_SSH_KEY") == "" || os.Getenv("GRIDSUB_PBS_SSH_PORT") == "" {
		t.Skip("no OpenPBS testbed: run `bash scripts/pbs-testbed.sh start && source /var/tmp/gridsub-pbs/testbed.env` (scripts/test.sh does both when ../shared/testbed/openpbs exists)")
	}
	pbslock.Hold(t)
}

// runPBS runs a job file through gridsub on the real OpenPBS testbed
// (configs/local-pbs.yaml) and returns its JSON summary and progress.
func runPBS(t *testing.T, job string) (jobJSON, string) {
	t.Helper()
	code, stdout, stderr := gridsub(t, "--config", "configs/local-pbs.yaml", job, "--output", "json", "--out-dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var j jobJSON
	if err := json.Unmarshal([]byte(stdout), &j); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	return j, stderr
}

// TestRealPBSStagesInAndOut runs examples/staging.yaml on the real OpenPBS
// server: inputs go up over SFTP, qsub runs the job, and the result file
// and the logs/ directory come back.
func TestRealPBSStagesInAndOut(t *testing.T) {
	needPBS(t)
	j, stderr := runPBS(t, "examples/staging.yaml")
	if j.State != "completed" || len(j.Sites) != 1 || j.Sites[0].Site != "pbs" {
		t.Fatalf("%+v", j)
	}
	if !strings.Contains(stderr, "placement: pbs") {
		t.Fatalf("stderr does not say where it ran:\n%s", stderr)
	}
	var result, log string
	for _, p := range j.Outputs {
		b, _ := os.ReadFile(p)
		switch filepath.Base(p) {
		case "result.txt":
			result = string(b)
		case "solve.log":
			log = string(b)
		}
	}
	if !strings.HasPrefix(result, "iterations=") || !strings.Contains(result, "sum=") || !strings.Contains(log, "solved on") {
		t.Fatalf("result.txt = %q, logs/solve.log = %q (outputs %v)", result, log, j.Outputs)
	}
}

// TestRealPBSRunsInItsReservation: a job with a reservation window gets a
// native pbs_rsub reservation, runs inside it (qsub -q R<n>: the job's
// $PBS_QUEUE is the reservation's queue), and the reservation is deleted
// afterwards (pbs_rstat no longer knows it).
func TestRealPBSRunsInItsReservation(t *testing.T) {
	needPBS(t)
	job := filepath.Join(t.TempDir(), "resv.yaml")
	body := `name: pbs-resv
command: ["/bin/sh", "-c", "echo in queue $PBS_QUEUE"]
resources: {nodes: 1, walltime: 2m}
scheduling:
  reservation: {earliest_start: +35s, latest_end: +6m}
`
	if err := os.WriteFile(job, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	j, stderr := runPBS(t, job)
	r := j.Resv
	if j.State != "completed" || r == nil || r.State != "released" || !strings.HasPrefix(r.Native, "R") || j.Start == nil || j.Start.Before(r.Earliest) {
		t.Fatalf("job %+v, reservation %+v; want completed inside a released R<n> reservation", j, r)
	}
	queue, _, _ := strings.Cut(r.Native, ".")
	var said string
	for _, p := range j.Outputs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "in queue") {
			said = strings.TrimSpace(string(b))
		}
	}
	if said != "in queue "+queue {
		t.Fatalf("the job said %q; want it in reservation queue %s (outputs %v)", said, queue, j.Outputs)
	}
	for _, e := range j.Events {
		if e.Kind == "release-failed" {
			t.Fatalf("deleting the reservation failed: %s", e.Msg)
		}
	}
	if !strings.Contains(stderr, "reservation bound: pbs") {
		t.Fatalf("progress does not say where it was bound:\n%s", stderr)
	}
	// Gone at the site.
	port, _ := strconv.Atoi(os.Getenv("GRIDSUB_PBS_SSH_PORT"))
	c, err := transport.Dial(context.Background(), transport.Config{Host: os.Getenv("GRIDSUB_PBS_SSH_HOST"), Port: port,
		User: os.Getenv("GRIDSUB_PBS_SSH_USER"), KeyFiles: []string{os.Getenv("GRIDSUB_PBS_SSH_KEY")},
		KnownHosts: []string{os.Getenv("GRIDSUB_PBS_SSH_KNOWN_HOSTS")}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bin := os.Getenv("GRIDSUB_PBS_BIN")
	if bin == "" {
		bin = "/opt/pbs/bin"
	}
	res, err := c.Run(context.Background(), []string{bin + "/pbs_rstat", "-f", r.Native}, nil)
	if err != nil || !strings.Contains(string(res.Stderr), "Unknown Reservation Id") {
		t.Fatalf("pbs_rstat -f %s after the job: %v, stdout %q, stderr %q; want it deleted", r.Native, err, res.Stdout, res.Stderr)
	}
}
