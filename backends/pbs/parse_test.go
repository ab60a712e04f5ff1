package pbs

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseQsub(t *testing.T) {
	for f, want := range map[string]backends.JobID{"qsub-ok.txt": "4.localhost", "qsub-array.txt": "10[].localhost", "qsub-stdin.txt": "27.localhost"} {
		got, err := ParseQsub(fixture(t, f))
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", f, got, err, want)
		}
	}
	for _, bad := range []string{"", "4.localhost\n5.localhost\n", "qsub: Unknown queue\n", "4\n"} {
		if _, err := ParseQsub([]byte(bad)); !errors.Is(err, backends.ErrBadOutput) {
			t.Errorf("ParseQsub(%q) = %v, want ErrBadOutput", bad, err)
		}
	}
	// Refusals are read from stderr with PBS's words.
	for f, want := range map[string]string{"qsub-bad-resource.stderr": "Unknown resource", "qsub-bad-queue.stderr": "qsub: Unknown queue",
		"qsub-bad-jobname.stderr": "illegal -N value"} {
		if msg := Message(backends.Result{Stderr: fixture(t, f), ExitCode: 1}); !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: message %q, want one line containing %q", f, msg, want)
		}
	}
}

func status(t *testing.T, r JobRecord) backends.JobStatus {
	t.Helper()
	st, err := r.Status(time.UTC)
	if err != nil {
		t.Fatalf("%s: %v", r.ID, err)
	}
	return st
}

func TestParseDSV(t *testing.T) {
	recs, err := ParseDSV(fixture(t, "qstat-f-dsv-x-multi.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].ID != "4.localhost" || recs[1].ID != "5.localhost" {
		t.Fatalf("records %+v, want 4 and 5 (DSV prints every id asked for)", recs)
	}
	st := status(t, recs[1])
	want := backends.JobStatus{ID: "5.localhost", Name: "gridjob", State: backends.StateCompleted, ExitCode: 0,
		Reason: "Job run at Sun Nov 22 at 02:08 on (vm:ncpus=1) and finished", NodeList: "(vm:ncpus=1)",
		Start: time.Date(2026, 11, 22, 2, 8, 19, 0, time.UTC), End: time.Date(2026, 11, 22, 2, 8, 24, 0, time.UTC)}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("status\n got %+v\nwant %+v", st, want)
	}
	if recs[1].Vars["GRIDSUB_ID"] != "abc" || recs[1].Vars["PBS_O_WORKDIR"] != "/home/pbsuser" {
		t.Errorf("vars %v", recs[1].Vars)
	}
	// Values verbatim: commas unescaped, number-like values untouched.
	recs, err = ParseDSV(fixture(t, "qstat-x-f-dsv-tricky-vars.txt"))
	if err != nil || len(recs) != 1 {
		t.Fatal(recs, err)
	}
	v := recs[0].Vars
	if v["A"] != "x,y" || v["B"] != "" || v["C"] != "12345" || v["E"] != "true" || v["F"] != `a`+strings.Repeat(`\`, 16)+`b` {
		t.Errorf("tricky vars %q", v)
	}
	recs, err = ParseDSV(fixture(t, "qstat-x-f-dsv-numeric-like-vars.txt"))
	if err != nil || len(recs) != 1 {
		t.Fatal(recs, err)
	}
	v = recs[0].Vars
	if v["V1"] != "007" || v["V2"] != "1e5" || v["V10"] != "null" || v["V12"] != "12345678901234567890" {
		t.Errorf("numeric-like vars retyped: %q", v)
	}
	if st := status(t, recs[0]); st.State != backends.StateCancelled || recs[0].Attrs["Job_Name"] != "123" {
		t.Errorf("held job deleted: %+v", st)
	}
	// Captured from the release tag on the testbed: the unknown id goes to
	// stderr (exit 153), the known ones are all printed.
	recs, err = ParseDSV(fixture(t, "release/qstat-x-f-dsv-mixed-unknown.txt"))
	if err != nil || len(recs) != 2 {
		t.Fatalf("mixed: %+v %v", recs, err)
	}
	if got := UnknownJobIDs(fixture(t, "release/qstat-x-f-dsv-mixed-unknown.stderr")); !reflect.DeepEqual(got, []string{"999999.localhost"}) {
		t.Errorf("unknown ids %v", got)
	}
	recs, err = ParseDSV(fixture(t, "release/qstat-x-f-dsv-numeric-like-vars.txt"))
	if err != nil || len(recs) != 1 || GridFromTag(recs[0].Vars[TagVar]) != "ct-1" || recs[0].Vars["V1"] != "007" {
		t.Fatalf("release DSV: %+v %v", recs, err)
	}
	// A '|' inside a value is kept; a line without a job id is an error.
	recs, err = ParseDSV([]byte("Job Id: 7.s|Job_Name=a|comment=x|y|job_state=Q\n"))
	if err != nil || recs[0].Attrs["comment"] != "x|y" || recs[0].Attrs["job_state"] != "Q" {
		t.Errorf("pipe in value: %+v %v", recs, err)
	}
	for _, bad := range []string{"Job_Name=a|job_state=Q\n", "Job Id: 7.s||job_state=Q\n", "Job Id: x|a=b\n"} {
		if _, err := ParseDSV([]byte(bad)); !errors.Is(err, backends.ErrBadOutput) {
			t.Errorf("ParseDSV(%q) = %v, want ErrBadOutput", bad, err)
		}
	}
	if recs, err := ParseDSV(nil); err != nil || len(recs) != 0 {
		t.Errorf("empty: %v %v", recs, err)
	}
}

// TestJobStates maps every job state captured on the real server.
func TestJobStates(t *testing.T) {
	for _, c := range []struct {
		file   string
		state  backends.State
		code   int
		signal int
		reason string
	}{
		{"qstat-f-json-running.json", backends.StateRunning, -1, 0, ""},
		{"qstat-f-json-queued.json", backends.StatePending, -1, 0, "Not Running: Not enough free nodes available"},
		{"qstat-f-json-held.json", backends.StatePending, -1, 0, ""},
		{"qstat-f-json-never-run.json", backends.StatePending, -1, 0, "Can Never Run"},
		{"qstat-f-json-resv-job-running.json", backends.StateRunning, -1, 0, ""},
		{"qstat-f-json-x-finished.json", backends.StateCompleted, 0, 0, "finished"},
		{"qstat-f-json-x-finished-vars.json", backends.StateCompleted, 0, 0, ""},
		{"qstat-f-json-x-exit3.json", backends.StateFailed, 3, 0, "failed"},
		{"qstat-f-json-x-walltime-exceeded.json", backends.StateTimeout, -29, 0, "exceeded resource walltime"},
		{"qstat-f-json-x-deleted-running.json", backends.StateCancelled, 271, 15, "terminated"},
		{"qstat-f-json-x-deleted-held.json", backends.StateCancelled, -1, 0, ""},
		{"qstat-f-json-x-deleted-queued.json", backends.StateCancelled, -1, 0, "terminated"},
		{"qstat-f-json-x-resv-job-after-rdel.json", backends.StateCancelled, 271, 15, ""},
		{"qstat-f-json-x-resv-ended-job.json", backends.StateCancelled, 271, 15, "root@localhost"},
		{"qstat-f-json-tricky-vars.json", backends.StatePending, -1, 0, ""},
		{"release/qstat-f-json-x-numeric-like-vars.json", backends.StateFailed, 3, 0, "failed"},
	} {
		recs, err := ParseJobsJSON(fixture(t, c.file))
		if err != nil || len(recs) != 1 {
			t.Errorf("%s: %d records, %v", c.file, len(recs), err)
			continue
		}
		st := status(t, recs[0])
		if st.State != c.state || st.ExitCode != c.code || st.Signal != c.signal || !strings.Contains(st.Reason, c.reason) {
			t.Errorf("%s: %s exit %d signal %d reason %q; want %s exit %d signal %d reason ~%q",
				c.file, st.State, st.ExitCode, st.Signal, st.Reason, c.state, c.code, c.signal, c.reason)
		}
		if st.State.Final() != !st.End.IsZero() && c.state != backends.StateCancelled {
			t.Errorf("%s: end %v for state %s", c.file, st.End, st.State)
		}
	}
	if _, err := (&JobRecord{ID: "1.s", Attrs: map[string]string{"job_state": "Z"}}).Status(time.UTC); !errors.Is(err, backends.ErrBadOutput) {
		t.Errorf("unknown job_state: %v", err)
	}
	if _, err := (&JobRecord{ID: "1.s", Attrs: map[string]string{"job_state": "F", "Exit_status": "x"}}).Status(time.UTC); !errors.Is(err, backends.ErrBadOutput) {
		t.Errorf("bad Exit_status: %v", err)
	}
}

// TestParseJobsJSON: both variants' JSON, the one-job defect, and the
// header-only documents.
func TestParseJobsJSON(t *testing.T) {
	ids := func(f string) []backends.JobID {
		recs, err := ParseJobsJSON(fixture(t, f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var out []backends.JobID
		for _, r := range recs {
			out = append(out, r.ID)
		}
		return out
	}
	for f, want := range map[string][]backends.JobID{
		"qstat-f-json-all-active.json":            {"26.localhost", "29.localhost"}, // no ids: every job
		"qstat-f-json-multi-active.json":          {"9.localhost"},                  // two ids asked, ONE printed (master)
		"qstat-f-json-x-multi.json":               {"4.localhost"},
		"qstat-x-f-json-mixed-known-unknown.json": {"4.localhost"},
		"release/qstat-f-json-x-multi.json":       {"0.localhost", "1.localhost"}, // the release tag prints both
		"qstat-f-json-no-jobs.json":               nil,
		"qstat-f-json-unknown.json":               nil,
	} {
		if got := ids(f); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", f, got, want)
		}
	}
	for _, f := range []string{"qstat-f-json-unknown.stderr", "qstat-x-f-json-mixed-known-unknown.stderr", "qstat-unknown.stderr", "qdel-unknown.stderr"} {
		if got := UnknownJobIDs(fixture(t, f)); len(got) != 1 || !strings.HasPrefix(got[0], "9999") {
			t.Errorf("%s: unknown ids %v", f, got)
		}
	}
	// master retypes number-like variables, the release tag keeps strings;
	// both decode, and the lettered tag survives either.
	master, _ := ParseJobsJSON(fixture(t, "qstat-f-json-numeric-like-vars.json"))
	release, _ := ParseJobsJSON(fixture(t, "release/qstat-f-json-x-numeric-like-vars.json"))
	if v := master[0].Vars; v["V1"] != "7" || v["V2"] != "100000" || v["V10"] != "null" || v["V11"] != "+3" {
		t.Errorf("master vars %q", v)
	}
	if v := release[0].Vars; v["V1"] != "007" || v["V2"] != "1e5" || v["V10"] != "null" || v["E"] != "true" {
		t.Errorf("release vars %q", v)
	}
	if release[0].Attrs["Job_Name"] != "123" || master[0].Attrs["Job_Name"] != "123" {
		t.Errorf("Job_Name 123: release %q master %q", release[0].Attrs["Job_Name"], master[0].Attrs["Job_Name"])
	}
	if st := status(t, release[0]); st.GridID != "ct-1" {
		t.Errorf("tag from release JSON: %q", st.GridID)
	}
	tricky, _ := ParseJobsJSON(fixture(t, "qstat-f-json-tricky-vars.json"))
	if v := tricky[0].Vars; v["C"] != "12345" || v["E"] != "true" || v["A"] != "x,y" {
		t.Errorf("tricky vars %q", v)
	}
	for _, bad := range []string{"", "{", `{"Jobs":{}}`, `{"pbs_version":"x","Jobs":[]}`, `{"pbs_version":"x","Jobs":{"nojob":{}}}`} {
		if _, err := ParseJobsJSON([]byte(bad)); !errors.Is(err, backends.ErrBadOutput) {
			t.Errorf("ParseJobsJSON(%q) = %v, want ErrBadOutput", bad, err)
		}
	}
}

func TestParsePbsnodes(t *testing.T) {
	for _, c := range []struct {
		file       string
		state      string
		used, jobs int
		idle       bool
	}{
		{"pbsnodes-a-json-idle.json", "free", 0, 0, true},
		{"pbsnodes-a-json-busy.json", "job-busy", 2, 2, false},
		{"pbsnodes-a-json-resv-running.json", "free", 1, 1, false},
		{"pbsnodes-a-json-root.json", "free", 1, 1, false},
		{"release/pbsnodes-a-json-idle.json", "free", 0, 0, true},
	} {
		ns, err := ParsePbsnodes(fixture(t, c.file))
		if err != nil || len(ns) != 1 {
			t.Errorf("%s: %+v %v", c.file, ns, err)
			continue
		}
		n := ns[0]
		if n.Name != "vm" || n.NCPUs != 2 || n.State != c.state || n.UsedCPUs != c.used || len(n.Jobs) != c.jobs || n.Idle() != c.idle || !n.Usable() {
			t.Errorf("%s: %+v (idle %v)", c.file, n, n.Idle())
		}
	}
	for _, f := range []string{"pbsnodes-F-json-unknown-node.json", "pbsnodes-F-json-vnode-without-v.json"} {
		if _, err := ParsePbsnodes(fixture(t, f)); !errors.Is(err, backends.ErrBadOutput) || !strings.Contains(err.Error(), "Unknown node") {
			t.Errorf("%s: %v, want ErrBadOutput naming the unknown node", f, err)
		}
	}
	if (&Node{State: "down,offline"}).Usable() {
		t.Error("a down node is usable")
	}
}

func TestParseServerQueues(t *testing.T) {
	for _, f := range []string{"qstat-B-f-json.json", "release/qstat-B-f-json.json"} {
		s, err := ParseServer(fixture(t, f))
		if err != nil || s.Name != "localhost" || s.DefaultQueue != "workq" || !s.History || s.Version != "23.06.06" {
			t.Errorf("%s: %+v %v", f, s, err)
		}
	}
	qs, err := ParseQueues(fixture(t, "qstat-Q-f-json-with-resv-queue.json"))
	if err != nil || len(qs) != 2 || qs[0].Name != "R16" || !qs[0].IsResv || qs[0].Started || qs[1].Name != "workq" || qs[1].IsResv || !qs[1].Started || !qs[1].Enabled {
		t.Errorf("queues with a reservation: %+v %v", qs, err)
	}
	for _, f := range []string{"qstat-Q-f-json.json", "release/qstat-Q-f-json.json"} {
		qs, err := ParseQueues(fixture(t, f))
		if err != nil || len(qs) != 1 || qs[0].Name != "workq" || qs[0].Type != "Execution" {
			t.Errorf("%s: %+v %v", f, qs, err)
		}
	}
	if _, err := ParseServer([]byte(`{"pbs_version":"x"}`)); !errors.Is(err, backends.ErrBadOutput) {
		t.Errorf("server without Server: %v", err)
	}
}

func TestParseReservations(t *testing.T) {
	for f, want := range map[string][2]string{"pbs_rsub-ok.txt": {"R16.localhost", "UNCONFIRMED"}, "pbs_rsub-I-ok.txt": {"R20.localhost", "CONFIRMED"},
		"pbs_rsub-I-unsatisfiable.txt": {"R19.localhost", "DENIED"}, "pbs_rsub-unsatisfiable.txt": {"R18.localhost", "UNCONFIRMED"}} {
		id, st, err := ParseRsub(fixture(t, f))
		if err != nil || string(id) != want[0] || st != want[1] {
			t.Errorf("%s: %s %s %v, want %v", f, id, st, err, want)
		}
	}
	for _, f := range []string{"pbs_rsub-bad-time.stderr", "pbs_rsub-start-in-past.stderr"} {
		if _, _, err := ParseRsub(fixture(t, f)); !errors.Is(err, backends.ErrBadOutput) {
			t.Errorf("%s as stdout: %v", f, err)
		}
	}
	for _, c := range []struct {
		file, id, state string
		nodes           int
		start           time.Time
	}{
		{"pbs_rstat-f-confirmed.txt", "R16.localhost", "RESV_CONFIRMED", 1, time.Date(2026, 11, 22, 2, 13, 0, 0, time.UTC)},
		{"pbs_rstat-f-confirmed-short-id.txt", "R16.localhost", "RESV_CONFIRMED", 1, time.Date(2026, 11, 22, 2, 13, 0, 0, time.UTC)},
		{"pbs_rstat-f-unconfirmed.txt", "R24.localhost", "RESV_UNCONFIRMED", 0, time.Date(2026, 11, 22, 2, 56, 0, 0, time.UTC)},
		{"pbs_rstat-f-running.txt", "R16.localhost", "RESV_RUNNING", 1, time.Date(2026, 11, 22, 2, 13, 0, 0, time.UTC)},
		{"pbs_rstat-f-being-deleted.txt", "R16.localhost", "RESV_BEING_DELETED", 1, time.Date(2026, 11, 22, 2, 13, 0, 0, time.UTC)},
		{"pbs_rstat-f-tomorrow.txt", "R30.localhost", "RESV_CONFIRMED", 1, time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)},
	} {
		rs, err := ParseRstat(fixture(t, c.file))
		if err != nil || len(rs) != 1 {
			t.Errorf("%s: %+v %v", c.file, rs, err)
			continue
		}
		r := rs[0].Reservation(time.UTC)
		if string(r.ID) != c.id || r.State != c.state || r.Nodes != c.nodes || !r.Start.Equal(c.start) {
			t.Errorf("%s: %+v", c.file, r)
		}
		if d := r.End.Sub(r.Start); d <= 0 {
			t.Errorf("%s: window %s", c.file, d)
		}
	}
	rs, err := ParseRstat(fixture(t, "pbs_rstat-f-all-confirmed.txt"))
	if err != nil || len(rs) < 1 || rs[0].ID != "R16.localhost" {
		t.Errorf("all: %+v %v", rs, err)
	}
	// -F json is not JSON (-F means full): the reservation is printed anyway.
	rs, err = ParseRstat(fixture(t, "pbs_rstat-F-json-unsupported.txt"))
	if err != nil || len(rs) != 1 || rs[0].ID != "R16.localhost" {
		t.Errorf("-F json: %+v %v", rs, err)
	}
	for _, f := range []string{"pbs_rstat-f-unknown.stderr", "pbs_rstat-f-denied.stderr"} {
		if !strings.Contains(string(fixture(t, f)), "Unknown Reservation Id") {
			t.Errorf("%s lacks the message ShowReservation looks for", f)
		}
	}
	if !strings.Contains(Message(backends.Result{Stderr: fixture(t, "pbs_rdel-unknown.stderr")}), "Unknown Reservation Id R999.localhost") {
		t.Error("pbs_rdel unknown message")
	}
	if _, err := ParseRstat([]byte("reserve_state = X\n")); !errors.Is(err, backends.ErrBadOutput) {
		t.Errorf("no Resv ID: %v", err)
	}
	if ResvNodes("(vm:ncpus=2)+(vm2:ncpus=2)") != 2 || ResvNodes("") != 0 {
		t.Error("ResvNodes")
	}
}

func TestQdelMessages(t *testing.T) {
	for f, want := range map[string]string{"qdel-finished.stderr": "Job has finished", "qdel-unknown.stderr": "Unknown Job Id", "qdel-bad-syntax.stderr": "illegally formed job identifier"} {
		if msg := Message(backends.Result{Stderr: fixture(t, f)}); !strings.Contains(msg, want) {
			t.Errorf("%s: %q, want %q", f, msg, want)
		}
	}
}
