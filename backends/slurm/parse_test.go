package slurm

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// fixture loads a capture: NAME.out, NAME.err and NAME.rc (testdata/README.md).
func fixture(t *testing.T, name string) backends.Result {
	t.Helper()
	read := func(ext string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name+ext))
		if err != nil {
			t.Fatalf("fixture: %v", err)
		}
		return b
	}
	rc, err := strconv.Atoi(strings.TrimSpace(string(read(".rc"))))
	if err != nil {
		t.Fatalf("fixture %s.rc: %v", name, err)
	}
	return backends.Result{Stdout: read(".out"), Stderr: read(".err"), ExitCode: rc}
}

func TestParseSbatch(t *testing.T) {
	r := fixture(t, "sbatch_ok")
	id, cluster, err := ParseSbatch(r.Stdout)
	if err != nil || id != "17" || cluster != "" || r.ExitCode != 0 {
		t.Fatalf("sbatch_ok: %q %q %v", id, cluster, err)
	}
	// Synthetic (not captured: needs a federation or -M, i.e. slurmdbd): a
	// site's wrapper banner before "id;cluster".
	id, cluster, err = ParseSbatch([]byte("Welcome to the cluster!\nRemember: 123 is not a job id;\n4711;sitea\n"))
	if err != nil || id != "4711" || cluster != "sitea" {
		t.Fatalf("banner + id;cluster: %q %q %v", id, cluster, err)
	}
	for _, bad := range []string{"", "Submitted batch job 12\n", "12a\n"} {
		_, _, err := ParseSbatch([]byte(bad))
		if !errors.Is(err, backends.ErrBadOutput) || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Errorf("ParseSbatch(%q) error %v: want ErrBadOutput quoting the raw text", bad, err)
		}
	}
}

func TestSbatchErrorsAreRejections(t *testing.T) {
	b := New(Config{Name: "siteA"}, nil, nil)
	for name, want := range map[string]string{
		"sbatch_bad_partition":   "Invalid partition name specified",
		"sbatch_too_many_nodes":  "More processors requested than permitted",
		"sbatch_too_long":        "Requested time limit is invalid",
		"sbatch_bad_reservation": "Requested reservation is invalid",
	} {
		r := fixture(t, name)
		if r.ExitCode == 0 {
			t.Fatalf("%s: captured rc 0", name)
		}
		err := b.Exec().Fail([]string{"sbatch"}, r)
		if !errors.Is(err, backends.ErrRejected) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrRejected containing %q", name, err, want)
		}
		if strings.Contains(err.Error(), "sbatch: error:") {
			t.Errorf("%s: prefix not stripped: %v", name, err)
		}
	}
	err := b.Exec().Fail([]string{"squeue"}, backends.Result{ExitCode: 1,
		Stderr: []byte("squeue: error: Unable to contact slurm controller (connect failure)\n")})
	if !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("controller down: %v, want ErrUnavailable", err)
	}
}

func TestParseSqueueMixed(t *testing.T) {
	r := fixture(t, "squeue_mixed")
	recs, err := ParseSqueue(r.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		state      backends.State
		code, sig  int
		grid, name string
		nodes      int
		nodelist   string
		reason     string
	}
	exp := map[backends.JobID]want{
		"22": {backends.StateCancelled, 0, 15, "cap-cancel", "capcancel", 1, "anode3", "None"},
		"17": {backends.StateCompleted, 0, 0, "cap-ok", "cap ok", 1, "anode1", "None"},
		"18": {backends.StateFailed, 3, 0, "cap-fail", "capfail", 1, "anode1", "NonZeroExitCode"},
		"20": {backends.StatePending, -1, 0, "cap-held", "cap held", 1, "", "JobHeldUser"},
		"19": {backends.StateRunning, -1, 0, "cap-time", "captime", 1, "anode2", "None"},
		"21": {backends.StateRunning, -1, 0, "cap-run", "caprun", 2, "anode[1-2]", "None"},
	}
	if len(recs) != len(exp) {
		t.Fatalf("%d records, want %d (999999 in the query must simply be absent)", len(recs), len(exp))
	}
	for _, rec := range recs {
		w, ok := exp[rec.Status.ID]
		if !ok {
			t.Fatalf("unexpected job %s", rec.Status.ID)
		}
		s := rec.Status
		if s.State != w.state || s.ExitCode != w.code || s.Signal != w.sig || s.GridID != w.grid || s.Name != w.name ||
			rec.Nodes != w.nodes || s.NodeList != w.nodelist || s.Reason != w.reason {
			t.Errorf("job %s: %+v nodes=%d, want %+v", s.ID, s, rec.Nodes, w)
		}
	}
	run := recs[4].Status
	if run.ID != "19" || run.Start.Unix() != 1795315817 || run.End.Unix() != 1795315877 {
		t.Errorf("running job times: %+v", run)
	}
	if !recs[3].Status.Start.IsZero() {
		t.Errorf("pending job N/A start parsed as %s", recs[3].Status.Start)
	}
}

func TestParseSqueueAllJobsAndTimeout(t *testing.T) {
	recs, err := ParseSqueue(fixture(t, "squeue_by_comment").Stdout)
	if err != nil {
		t.Fatal(err)
	}
	var pipes, timeouts, untagged int
	for _, r := range recs {
		if strings.Contains(r.Name, " | pipes ") {
			pipes++
		}
		if r.Status.State == backends.StateTimeout {
			timeouts++
		}
		if r.Comment == "(null)" && r.Status.GridID != "" {
			t.Errorf("job %s without a tag got grid id %q", r.Status.ID, r.Status.GridID)
		}
		if r.Comment == "(null)" {
			untagged++
		}
	}
	if len(recs) != 14 || timeouts != 1 {
		t.Errorf("%d records, %d timeouts; want 14 and 1", len(recs), timeouts)
	}
	_ = pipes // the pipe-named job may already be purged at capture time
	to, err := ParseSqueue(fixture(t, "squeue_timeout").Stdout)
	if err != nil || len(to) != 1 || to[0].Status.State != backends.StateTimeout || to[0].Status.Reason != "TimeLimit" || to[0].Status.ExitCode != 143 {
		t.Errorf("squeue_timeout: %+v %v", to, err)
	}
}

func TestSqueueInvalidID(t *testing.T) {
	r := fixture(t, "squeue_invalid")
	if r.ExitCode != 1 || !strings.Contains(Message(r), "Invalid job id specified") || len(r.Stdout) != 0 {
		t.Fatalf("squeue_invalid capture: %+v", r)
	}
	r = fixture(t, "scontrol_job_invalid")
	if r.ExitCode != 1 || Message(r) != "slurm_load_jobs error: Invalid job id specified" {
		t.Fatalf("scontrol_job_invalid capture: %q", Message(r))
	}
}

func TestParseSqueueGarbage(t *testing.T) {
	for _, g := range []string{"JOBID PARTITION NAME\n", "1\x1fRUNNING\n", strings.Repeat("x\x1f", 11) + "y\n",
		"1\x1fWEIRD\x1fNone\x1f0\x1f0\x1f0\x1f1:00\x1f1\x1fn\x1fp\x1fc\x1fn\n"} {
		_, err := ParseSqueue([]byte(g))
		if !errors.Is(err, backends.ErrBadOutput) || !strings.Contains(err.Error(), strconv.Quote(g)) {
			t.Errorf("ParseSqueue(%q): %v", g, err)
		}
	}
}

func TestParseScontrolJobs(t *testing.T) {
	cases := []struct {
		fix       string
		state     backends.State
		code, sig int
		name      string
		grid      string
	}{
		{"scontrol_job_running", backends.StateRunning, -1, 0, "caprun", "cap-run"},
		{"scontrol_job_failed", backends.StateFailed, 3, 0, "capfail", "cap-fail"},
		{"scontrol_job_held", backends.StatePending, -1, 0, "cap held", "cap-held"},
		{"scontrol_job_cancelled", backends.StateCancelled, 0, 15, "capcancel", "cap-cancel"},
		{"scontrol_job_timeout", backends.StateTimeout, 143, 0, "captime", "cap-time"}, // the shell of --wrap died of SIGTERM
	}
	for _, c := range cases {
		js, err := ParseScontrolJobs(fixture(t, c.fix).Stdout, time.UTC)
		if err != nil || len(js) != 1 {
			t.Fatalf("%s: %v %v", c.fix, js, err)
		}
		j := js[0]
		if j.State != c.state || j.ExitCode != c.code || j.Signal != c.sig || j.Name != c.name || j.GridID != c.grid {
			t.Errorf("%s: %+v", c.fix, j)
		}
	}
	run, _ := ParseScontrolJobs(fixture(t, "scontrol_job_running").Stdout, time.UTC)
	if run[0].NodeList != "anode[1-2]" || run[0].Start.IsZero() || run[0].End.Sub(run[0].Start) != 5*time.Minute {
		t.Errorf("running job (epoch times): %+v", run[0])
	}
	held, _ := ParseScontrolJobs(fixture(t, "scontrol_job_held").Stdout, time.UTC)
	if !held[0].Start.IsZero() || held[0].Reason != "JobHeldUser" || held[0].NodeList != "" {
		t.Errorf("held job: %+v", held[0])
	}
	failed, _ := ParseScontrolJobs(fixture(t, "scontrol_job_cancelled").Stdout, time.UTC)
	if want := time.Date(2026, 11, 22, 2, 50, 18, 0, time.UTC); !failed[0].Start.Equal(want) {
		t.Errorf("ISO start %s, want %s", failed[0].Start, want)
	}
	all := fixture(t, "scontrol_jobs_all")
	js, err := ParseScontrolJobs(all.Stdout, time.UTC)
	if err != nil || len(js) != len(lines(all.Stdout)) || len(js) < 10 {
		t.Errorf("all jobs: %d parsed of %d lines, %v", len(js), len(lines(all.Stdout)), err)
	}
}

func TestParseKVValuesWithSpaces(t *testing.T) {
	m := ParseKV("JobId=5 JobName=a b  c UserId=u(1) Reason=Nodes required for job are DOWN, DRAINED Command=/bin/x --y z AllocNode:Sid=h:1 NodeList= Tres=cpu=1,mem=100M")
	for k, v := range map[string]string{"JobName": "a b  c", "Reason": "Nodes required for job are DOWN, DRAINED",
		"Command": "/bin/x --y z", "AllocNode:Sid": "h:1", "NodeList": "", "Tres": "cpu=1,mem=100M", "UserId": "u(1)"} {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
}

func TestParseJobComp(t *testing.T) {
	recs, err := ParseJobComp(fixture(t, "jobcomp").Stdout, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 20 {
		t.Fatalf("%d records, want 20", len(recs))
	}
	byName := map[string]CompRecord{}
	for _, r := range recs {
		byName[r.Name] = r
	}
	if r := byName["a name with | pipes and a very long long long long long tail"]; r.Status.State != backends.StateFailed || r.Status.ExitCode != 3 {
		t.Errorf("free-text name record: %+v", r)
	}
	if r := byName["cap held"]; r.Status.State != backends.StateCancelled || r.Status.NodeList != "" {
		t.Errorf("held+cancelled record: %+v", r)
	}
	last := recs[len(recs)-1]
	if !strings.HasSuffix(last.WorkDir, "/scratch/griduser/capture") || last.Status.End.IsZero() {
		t.Errorf("last record: %+v", last)
	}
	var timeouts int
	for _, r := range recs {
		if r.Status.State == backends.StateTimeout {
			timeouts++
		}
	}
	if timeouts != 3 {
		t.Errorf("%d TIMEOUT records, want 3", timeouts)
	}
	if _, err := ParseJobComp([]byte("garbage line\n"), time.UTC); !errors.Is(err, backends.ErrBadOutput) {
		t.Errorf("garbage: %v", err)
	}
}

func TestParseSinfo(t *testing.T) {
	recs, err := ParseSinfo(fixture(t, "sinfo").Stdout)
	if err != nil {
		t.Fatal(err)
	}
	nodes, idle, debug := map[string]bool{}, 0, 0
	for _, r := range recs {
		if r.Partition == "batch" {
			if !r.Default || r.CPUs != 2 {
				t.Errorf("batch record %+v", r)
			}
			nodes[r.Node] = true
			if NodeIdle(r.State) {
				idle++
			}
		}
		if r.Partition == "debug" {
			debug++
			if r.Default {
				t.Errorf("debug marked default")
			}
		}
	}
	if len(nodes) != 8 || debug != 2 || idle != 6 {
		t.Errorf("batch nodes %d (want 8), idle %d (want 6), debug %d (want 2)", len(nodes), idle, debug)
	}
	b, err := ParseSinfo(fixture(t, "sinfo_siteB").Stdout)
	if err != nil || len(b) != 4 || b[0].CPUs != 4 || b[0].Partition != "compute" {
		t.Errorf("siteB: %+v %v", b, err)
	}
	if _, err := ParseSinfo([]byte("PARTITION AVAIL TIMELIMIT\n")); !errors.Is(err, backends.ErrBadOutput) {
		t.Errorf("garbage: %v", err)
	}
	for s, usable := range map[string]bool{"idle": true, "mixed": true, "allocated": true, "down*": false, "drained": false, "draining": false, "idle~": true} {
		if NodeUsable(s) != usable {
			t.Errorf("NodeUsable(%q) = %v", s, !usable)
		}
	}
}

func TestParseReservations(t *testing.T) {
	id, err := ParseReservationCreated(fixture(t, "resv_create").Stdout)
	if err != nil || id != "capr1" {
		t.Fatalf("create: %q %v", id, err)
	}
	rs, err := ParseReservations(fixture(t, "resv_show").Stdout, time.UTC)
	if err != nil || len(rs) != 1 {
		t.Fatal(rs, err)
	}
	r := rs[0]
	if r.ID != "capr1" || r.Nodes != 2 || r.NodeList != "bnode[1-2]" || r.End.Sub(r.Start) != 10*time.Minute || r.State != "INACTIVE" {
		t.Errorf("show: %+v", r)
	}
	all, err := ParseReservations(fixture(t, "resv_show_all").Stdout, time.UTC)
	if err != nil || len(all) != 2 || all[1].ID != "capr2" || all[1].Nodes != 2 {
		t.Errorf("show all: %+v %v", all, err)
	}
	// SLURM clamped NodeCnt=4 to the 2 free nodes, silently (rc 0).
	cl := fixture(t, "resv_create_clamped")
	shown, _ := ParseReservations(fixture(t, "resv_show_clamped").Stdout, time.UTC)
	if cl.ExitCode != 0 || len(shown) != 1 || shown[0].Nodes != 2 {
		t.Errorf("clamped capture: rc %d, %+v", cl.ExitCode, shown)
	}
	for name, want := range map[string]string{
		"resv_create_busy":    "Requested nodes are busy",
		"resv_create_overlap": "Requested reservation overlaps with another reservation",
		"resv_delete_in_use":  "Requested reservation is in use",
		"resv_delete_missing": "Requested reservation is invalid",
		"resv_show_missing":   "Reservation nosuch not found",
	} {
		r := fixture(t, name)
		if r.ExitCode != 1 || !strings.Contains(Message(r), want) {
			t.Errorf("%s: rc %d %q, want rc 1 with %q", name, r.ExitCode, Message(r), want)
		}
	}
	if _, err := ParseReservationCreated([]byte("Error creating the reservation: x")); !errors.Is(err, backends.ErrBadOutput) {
		t.Errorf("garbage create: %v", err)
	}
	if _, err := ParseReservations([]byte("ReservationName=x NodeCnt=two StartTime=1 EndTime=2"), time.UTC); !errors.Is(err, backends.ErrBadOutput) {
		t.Errorf("garbage show: %v", err)
	}
}

func TestConfigAndSacctCaptures(t *testing.T) {
	cfg := fixture(t, "scontrol_config_jobcomp").Stdout
	if v, _ := configValue(cfg, "JobCompType"); v != "jobcomp/filetxt" {
		t.Errorf("JobCompType %q", v)
	}
	if v, _ := configValue(cfg, "JobCompLoc"); !strings.HasSuffix(v, "/siteA/log/jobcomp.txt") {
		t.Errorf("JobCompLoc %q", v)
	}
	r := fixture(t, "sacct_disabled")
	if r.ExitCode != 1 || Message(r) != "Slurm accounting storage is disabled" {
		t.Errorf("sacct: %+v", r)
	}
	if r := fixture(t, "scancel_invalid"); r.ExitCode != 0 {
		t.Errorf("scancel of an unknown id: rc %d (22.05 says nothing and exits 0)", r.ExitCode)
	}
}

func TestMapState(t *testing.T) {
	for s, want := range map[string]backends.State{
		"PENDING": backends.StatePending, "CONFIGURING": backends.StatePending, "SUSPENDED": backends.StatePending,
		"RUNNING": backends.StateRunning, "COMPLETING": backends.StateRunning, "COMPLETED": backends.StateCompleted,
		"FAILED": backends.StateFailed, "NODE_FAIL": backends.StateFailed, "OUT_OF_MEMORY": backends.StateFailed,
		"BOOT_FAIL": backends.StateFailed, "PREEMPTED": backends.StateFailed, "CANCELLED by 1001": backends.StateCancelled,
		"TIMEOUT": backends.StateTimeout, "DEADLINE": backends.StateTimeout, "NONSENSE": backends.StateUnknown,
	} {
		if got := MapState(s); got != want {
			t.Errorf("MapState(%q) = %s, want %s", s, got, want)
		}
	}
}
