package pbs

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// The fixtures of ../shared/fixtures/pbs that parse_test.go does not read,
// each with what the backend's parsers make of it. Outputs of forms the
// backend never asks for (plain tables, the text form of qstat -B) must be
// refused by the parser of that command's family, never misread.

func utc(h, m, s int) time.Time { return time.Date(2026, 11, 22, h, m, s, 0, time.UTC) }

func TestFixtureQsubIDs(t *testing.T) {
	for f, want := range map[string]backends.JobID{
		"qsub-named-vars.txt": "5.localhost", "qsub-hold.txt": "8.localhost", "qsub-long.txt": "9.localhost",
		"qsub-queued.txt": "11.localhost", "qsub-exit3.txt": "12.localhost", "qsub-walltime-short.txt": "13.localhost",
		"qsub-tricky-vars.txt": "14.localhost", "qsub-into-resv.txt": "17.localhost", "qsub-into-short-resv.txt": "26.localhost",
		"qsub-never-run.txt": "28.localhost", "qsub-second-active.txt": "29.localhost", "qsub-numeric-like-vars.txt": "31.localhost",
	} {
		got, err := ParseQsub(fixture(t, f))
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", f, got, err, want)
		}
	}
}

// TestFixtureMessages: each captured stderr read as the backend reads a
// failed command: its words on one line, a refusal (not "unavailable"),
// and the ids or reservation it names.
func TestFixtureMessages(t *testing.T) {
	d := newDialect(Config{Name: "s"})
	for _, c := range []struct {
		file, msg   string
		unknownJobs []string // UnknownJobIDs
		ended       bool     // the dialect's Ended (a cancel that is no error)
		unknownResv bool
	}{
		{file: "qsub-bad-env-quote.stderr", msg: "qsub: cannot send environment with the job"},
		{file: "qsub-bad-walltime.stderr", msg: "qsub: Illegal attribute or resource value Resource_List.walltime"},
		{file: "qdel-multi-unknown.stderr", msg: "qdel: Unknown Job Id 99998.localhost", unknownJobs: []string{"99998.localhost"}, ended: true},
		{file: "qdel-multi-mixed.stderr", msg: "qdel: Job has finished 5.localhost", ended: true},
		{file: "qdel-multi-mixed-unknown-first.stderr", msg: "qdel: Unknown Job Id 99998.localhost; qdel: Job has finished 5.localhost",
			unknownJobs: []string{"99998.localhost"}, ended: true},
		// The backend always asks qstat with -x; these words would also
		// mean, from qdel, a job that needs no cancel.
		{file: "qstat-finished-no-x.stderr", msg: "qstat: 4.localhost Job has finished, use -x or -H to obtain historical job information", ended: true},
		{file: "qstat-f-json-finished-no-x.stderr", msg: "qstat: 4.localhost Job has finished, use -x or -H to obtain historical job information", ended: true},
		{file: "qstat-x-f-json-mixed-known-first.stderr", msg: "qstat: Unknown Job Id 99999.localhost", unknownJobs: []string{"99999.localhost"}, ended: true},
		{file: "qstat-x-f-json-never-existed.stderr", msg: "qstat: Unknown Job Id 99999.localhost", unknownJobs: []string{"99999.localhost"}, ended: true},
		{file: "pbs_rdel-denied.stderr", msg: "pbs_rdel: Unknown Reservation Id R18.localhost", unknownResv: true},
		{file: "pbs_rstat-f-after-rdel.stderr", msg: "pbs_rstat: Unknown Reservation Id", unknownResv: true},
		{file: "pbs_rstat-f-deleted.stderr", msg: "pbs_rstat: Unknown Reservation Id", unknownResv: true},
		{file: "pbs_rstat-F-json-unsupported.stderr", msg: "pbs_rstat: illegally formed reservation identifier: json"},
		{file: "pbs_rsub-bad-resource.stderr", msg: "pbs_rsub: Unknown resource: foo"},
		{file: "pbsnodes-unknown-node-text.stderr", msg: "Node: nosuchnode, Error: Unknown node"},
	} {
		r := backends.Result{Stderr: fixture(t, c.file), ExitCode: 1}
		msg, down := d.Failure(r)
		if msg != c.msg || down {
			t.Errorf("%s: message %q, unavailable %v; want %q, a refusal", c.file, msg, down, c.msg)
		}
		if got := UnknownJobIDs(r.Stderr); !reflect.DeepEqual(got, c.unknownJobs) {
			t.Errorf("%s: unknown job ids %q, want %q", c.file, got, c.unknownJobs)
		}
		if got := d.Ended(msg); got != c.ended {
			t.Errorf("%s: Ended = %v, want %v", c.file, got, c.ended)
		}
		if got := unknownResv(msg); got != c.unknownResv {
			t.Errorf("%s: unknown reservation = %v, want %v", c.file, got, c.unknownResv)
		}
	}
}

func TestFixtureRsub(t *testing.T) {
	for f, want := range map[string]backends.ResvID{"pbs_rsub-hhmm-already-past.txt": "R30.localhost",
		"pbs_rsub-short.txt": "R25.localhost", "pbs_rsub-while-scheduling-off.txt": "R23.localhost"} {
		id, state, err := ParseRsub(fixture(t, f))
		if err != nil || id != want || state != "UNCONFIRMED" {
			t.Errorf("%s: %q %q %v; want %q UNCONFIRMED", f, id, state, err, want)
		}
	}
}

func TestFixtureRstat(t *testing.T) {
	for f, want := range map[string]backends.Reservation{
		"pbs_rstat-f-confirmed-after-scheduling-on.txt": {ID: "R24.localhost", Start: utc(2, 56, 0), End: utc(3, 6, 0),
			Nodes: 1, NodeList: "(vm:ncpus=1)", State: "RESV_CONFIRMED"},
		"pbs_rstat-f-expired-being-deleted.txt": {ID: "R25.localhost", Start: utc(2, 16, 0), End: utc(2, 17, 0),
			Nodes: 1, NodeList: "(vm:ncpus=1)", State: "RESV_BEING_DELETED"},
	} {
		rs, err := ParseRstat(fixture(t, f))
		if err != nil || len(rs) != 1 {
			t.Fatalf("%s: %+v %v", f, rs, err)
		}
		if got := rs[0].Reservation(time.UTC); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, want %+v", f, got, want)
		}
	}
	// -B lists the ids alone: records without attributes.
	for f, want := range map[string][]backends.ResvID{"pbs_rstat-B-confirmed.txt": {"R16.localhost"},
		"pbs_rstat-B-unconfirmed.txt": {"R16.localhost", "R20.localhost", "R23.localhost", "R24.localhost"}} {
		rs, err := ParseRstat(fixture(t, f))
		var ids []backends.ResvID
		for _, r := range rs {
			ids = append(ids, r.ID)
			if len(r.Attrs) != 0 || r.Reservation(time.UTC).State != "" {
				t.Errorf("%s: %s has attributes %v", f, r.ID, r.Attrs)
			}
		}
		if err != nil || !reflect.DeepEqual(ids, want) {
			t.Errorf("%s: %v %v; want %v", f, ids, err, want)
		}
	}
}

// TestFixtureTablesRefused: the table and text forms the backend never
// asks for (a login PATH's other qstat, a wrong option) are refused by
// the parser of the form it does ask for, not misread as empty or as jobs.
func TestFixtureTablesRefused(t *testing.T) {
	dsv := func(b []byte) error { _, err := ParseDSV(b); return err }
	rstat := func(b []byte) error { _, err := ParseRstat(b); return err }
	for f, parse := range map[string]func([]byte) error{
		"qstat-plain-all.txt": dsv, "qstat-plain-resv-job.txt": dsv, "qstat-t-plain-all.txt": dsv, "qstat-x-plain-array.txt": dsv,
		"qstat-Q-plain.txt":         func(b []byte) error { _, err := ParseQueues(b); return err },
		"qstat-B-f-text.txt":        func(b []byte) error { _, err := ParseServer(b); return err },
		"pbsnodes-a-idle.txt":       func(b []byte) error { _, err := ParsePbsnodes(b); return err },
		"pbsnodes-a-busy.txt":       func(b []byte) error { _, err := ParsePbsnodes(b); return err },
		"pbs_rstat-S-confirmed.txt": rstat, "pbs_rstat-plain-after-rdel.txt": rstat, "pbs_rstat-plain-after-unsatisfiable.txt": rstat,
		"pbs_rstat-plain-being-deleted.txt": rstat, "pbs_rstat-plain-confirmed.txt": rstat, "pbs_rstat-plain-running.txt": rstat,
		"pbs_rstat-plain-tomorrow.txt": rstat, "pbs_rstat-plain-unconfirmed.txt": rstat,
	} {
		if err := parse(fixture(t, f)); !errors.Is(err, backends.ErrBadOutput) {
			t.Errorf("%s: %v, want ErrBadOutput", f, err)
		}
	}
}

// TestFixtureJobsJSON: the JSON captures the older tests leave out (arrays,
// reservation jobs, header-only answers), to the statuses Status reports.
func TestFixtureJobsJSON(t *testing.T) {
	type job struct {
		id         backends.JobID
		state      backends.State
		exit       int
		queue      string
		start, end time.Time
	}
	zero := time.Time{}
	for f, want := range map[string][]job{
		"qstat-f-json-array-parent.json":          {{"10[].localhost", backends.StateRunning, -1, "workq", utc(2, 8, 52), zero}},
		"qstat-f-json-array-subjob-queued.json":   {{"10[3].localhost", backends.StatePending, -1, "workq", utc(2, 8, 52), zero}},
		"qstat-f-json-array-subjob-running.json":  {{"10[1].localhost", backends.StateRunning, -1, "workq", utc(2, 8, 52), zero}},
		"qstat-f-json-resv-job-before-start.json": {{"17.localhost", backends.StatePending, -1, "R16", zero, zero}},
		// qdel of the reservation is under way, the job still runs.
		"qstat-f-json-resv-job-during-rdel.json":    {{"17.localhost", backends.StateRunning, -1, "R16", utc(2, 13, 0), zero}},
		"qstat-f-json-x-array-parent-finished.json": {{"10[].localhost", backends.StateCompleted, 0, "workq", utc(2, 8, 52), utc(2, 10, 54)}},
		"qstat-f-json-x-array-subjob-finished.json": {{"10[2].localhost", backends.StateCompleted, 0, "workq", utc(2, 9, 14), utc(2, 10, 15)}},
		"qstat-t-f-json-array.json": {
			{"10[1].localhost", backends.StateRunning, -1, "workq", utc(2, 8, 52), zero},
			{"10[2].localhost", backends.StatePending, -1, "workq", utc(2, 8, 52), zero},
			{"10[3].localhost", backends.StatePending, -1, "workq", utc(2, 8, 52), zero},
			{"10[].localhost", backends.StateRunning, -1, "workq", utc(2, 8, 52), zero}},
		"qstat-x-t-f-json-array-finished.json": {
			{"10[1].localhost", backends.StateCompleted, 0, "workq", utc(2, 8, 52), utc(2, 9, 53)},
			{"10[2].localhost", backends.StateCompleted, 0, "workq", utc(2, 9, 14), utc(2, 10, 15)},
			{"10[3].localhost", backends.StateCompleted, 0, "workq", utc(2, 9, 53), utc(2, 10, 54)},
			{"10[].localhost", backends.StateCompleted, 0, "workq", utc(2, 8, 52), utc(2, 10, 54)}},
		// The known job is printed, the unknown one named on stderr.
		"qstat-x-f-json-mixed-known-first.json": {{"4.localhost", backends.StateCompleted, 0, "workq", utc(2, 8, 19), utc(2, 8, 24)}},
		// Header only: no Jobs key.
		"qstat-f-json-finished-no-x.json":   nil,
		"qstat-x-f-json-never-existed.json": nil,
	} {
		recs, err := ParseJobsJSON(fixture(t, f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var got []job
		for _, r := range recs {
			st := status(t, r)
			got = append(got, job{st.ID, st.State, st.ExitCode, r.Attrs["queue"], st.Start, st.End})
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", f, got, want)
		}
	}
}

// TestFixtureFullText: the text form of qstat -f reads to the records of
// the same jobs' DSV or JSON form: same statuses, same variables (the text
// form escapes commas, wraps long values with a tab, keeps number-like
// values verbatim).
func TestFixtureFullText(t *testing.T) {
	read := func(f string) []JobRecord {
		var recs []JobRecord
		var err error
		if strings.HasSuffix(f, ".json") {
			recs, err = ParseJobsJSON(fixture(t, f))
		} else if strings.HasPrefix(f, "qstat-f-text") {
			recs, err = ParseFullText(fixture(t, f))
		} else {
			recs, err = ParseDSV(fixture(t, f))
		}
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		return recs
	}
	for _, c := range []struct {
		text, other string
		vars        bool // the variables agree too (JSON retypes number-like ones)
	}{
		{"qstat-f-text-x-multi.txt", "qstat-f-dsv-x-multi.txt", true},
		{"qstat-f-text-x-finished.txt", "qstat-f-json-x-finished-vars.json", false},
		{"qstat-f-text-running.txt", "qstat-f-json-running.json", false},
		{"qstat-f-text-array-parent.txt", "qstat-f-json-array-parent.json", false},
		{"qstat-f-text-tricky-vars.txt", "qstat-x-f-dsv-tricky-vars.txt", true},
		{"qstat-f-text-numeric-like-vars.txt", "qstat-x-f-dsv-numeric-like-vars.txt", true},
	} {
		text, other := read(c.text), read(c.other)
		if len(text) == 0 || len(text) != len(other) {
			t.Fatalf("%s: %d records, %s: %d", c.text, len(text), c.other, len(other))
		}
		for i := range text {
			if text[i].ID != other[i].ID || text[i].Attrs["Job_Name"] != other[i].Attrs["Job_Name"] ||
				text[i].Attrs["Job_Owner"] != other[i].Attrs["Job_Owner"] {
				t.Errorf("%s job %d: %s %q, %s: %s %q", c.text, i, text[i].ID, text[i].Attrs["Job_Name"], c.other, other[i].ID, other[i].Attrs["Job_Name"])
			}
			tv, ov := text[i].Vars, other[i].Vars
			if f, ok := tv["F"]; ok && c.vars {
				// Backslashes are multiplied: qsub got two, the text form
				// shows 8, DSV 16 (the fixtures' README, note 12).
				if strings.Count(f, `\`) != 8 || strings.Count(ov["F"], `\`) != 16 {
					t.Errorf("%s: F=%q, %s: F=%q; want 8 and 16 backslashes", c.text, f, c.other, ov["F"])
				}
				tv, ov = without(tv, "F"), without(ov, "F")
			}
			if c.vars && !reflect.DeepEqual(tv, ov) {
				t.Errorf("%s %s: variables\n %q\n%s: %q", c.text, text[i].ID, text[i].Vars, c.other, other[i].Vars)
			}
		}
		// The DSV captures of tricky/numeric vars are later (-x): only
		// the same jobs' statuses at the same moment are compared.
		if strings.Contains(c.other, "-x-") == strings.Contains(c.text, "-x-") {
			for i := range text {
				if a, b := status(t, text[i]), status(t, other[i]); !reflect.DeepEqual(a, b) {
					t.Errorf("%s %s: status\n %+v\n%s: %+v", c.text, text[i].ID, a, c.other, b)
				}
			}
		}
	}
	vars := read("qstat-f-text-tricky-vars.txt")[0].Vars
	for k, want := range map[string]string{"A": "x,y", "B": "", "C": "12345", "D": "1.5", "E": "true"} {
		if vars[k] != want {
			t.Errorf("tricky vars: %s=%q, want %q", k, vars[k], want)
		}
	}
	if v := read("qstat-f-text-numeric-like-vars.txt")[0].Vars; v["V1"] != "007" || v["V2"] != "1e5" || v["V12"] != "12345678901234567890" || v["V10"] != "null" {
		t.Errorf("numeric-like vars not verbatim: %q", v)
	}
	for _, bad := range []string{"    Job_Name = x\n", "Job Id: nope\n", "Job Id: 4.localhost\nJob_Name = x\n", "Job Id: 4.localhost\n    no equals sign\n"} {
		if _, err := ParseFullText([]byte(bad)); !errors.Is(err, backends.ErrBadOutput) {
			t.Errorf("ParseFullText(%q) = %v, want ErrBadOutput", bad, err)
		}
	}
}

func without(m map[string]string, k string) map[string]string {
	c := map[string]string{}
	for x, v := range m {
		if x != k {
			c[x] = v
		}
	}
	return c
}

func TestFixturePbsnodesOne(t *testing.T) {
	// By host name, and by vnode with -v: the same vnode, one job on one CPU.
	want := []Node{{Name: "vm", State: "free", NCPUs: 2, UsedCPUs: 1, MemBytes: 25276510208, Jobs: []string{"17.localhost"}}}
	for _, f := range []string{"pbsnodes-F-json-host.json", "pbsnodes-v-F-json-vnode.json"} {
		got, err := ParsePbsnodes(fixture(t, f))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v %v; want %+v", f, got, err, want)
		}
	}
}

// TestEveryFixtureIsRead: every captured output in testdata is named by a
// test of this package, and the top level is the 133 files of
// ../shared/fixtures/pbs.
func TestEveryFixtureIsRead(t *testing.T) {
	var src strings.Builder
	tests, _ := os.ReadDir(".")
	for _, e := range tests {
		if strings.HasSuffix(e.Name(), "_test.go") {
			b, err := os.ReadFile(e.Name())
			if err != nil {
				t.Fatal(err)
			}
			src.Write(b)
		}
	}
	ents, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() || e.Name() == "README.md" {
			continue
		}
		n++
		if !strings.Contains(src.String(), `"`+e.Name()+`"`) {
			t.Errorf("testdata/%s is read by no test", e.Name())
		}
	}
	if n != 133 {
		t.Errorf("%d captured outputs at the top of testdata, want the 133 of ../shared/fixtures/pbs", n)
	}
}
