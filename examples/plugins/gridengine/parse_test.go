package gridengine

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// The fixtures are the real daemons' output (testdata/README.md).

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseQstatXML(t *testing.T) {
	jobs, err := ParseQstatXML(fixture(t, "qstat-mixed.xml"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]backends.State{"18": backends.StateRunning, "19": backends.StateRunning, "17": backends.StatePending, "16": backends.StatePending}
	if len(jobs) != len(want) {
		t.Fatalf("%d jobs: %+v", len(jobs), jobs)
	}
	for _, j := range jobs {
		st := j.Status(time.UTC)
		if st.State != want[j.Number] {
			t.Errorf("job %s (%s): %s, want %s", j.Number, j.State, st.State, want[j.Number])
		}
		switch j.Number {
		case "17":
			if j.State != "Eqw" || !strings.Contains(st.Reason, "error state") {
				t.Errorf("Eqw job: %+v, reason %q", j, st.Reason)
			}
		case "16":
			if j.Tasks != "1-3:1" || !strings.Contains(st.Reason, "held") {
				t.Errorf("held array job: %+v, reason %q", j, st.Reason)
			}
		case "19":
			if j.Slots != 3 || st.NodeList != "gridsub.q@vm" || st.Start.IsZero() {
				t.Errorf("running PE job: %+v -> %+v", j, st)
			}
		}
	}
	jobs, err = ParseQstatXML(fixture(t, "qstat-held-pending.xml"))
	if err != nil || len(jobs) != 3 {
		t.Fatalf("%+v, %v", jobs, err)
	}
	empty, err := ParseQstatXML([]byte("<?xml version='1.0'?>\n<job_info>\n  <queue_info>\n  </queue_info>\n  <job_info>\n  </job_info>\n</job_info>\n"))
	if err != nil || len(empty) != 0 {
		t.Fatalf("empty listing: %+v, %v", empty, err)
	}
	for _, bad := range []string{"", "garbage", "<job_info><queue_info><job_list><JB_job_number>x</JB_job_number><state>r</state></job_list></queue_info></job_info>",
		"<job_info><queue_info><job_list><JB_job_number>5</JB_job_number></job_list></queue_info></job_info>", "<other/>"} {
		if _, err := ParseQstatXML([]byte(bad)); !errors.Is(err, backends.ErrBadOutput) {
			t.Errorf("ParseQstatXML(%q) = %v, want ErrBadOutput", bad, err)
		}
	}
}

func TestParseQhostXML(t *testing.T) {
	hosts, err := ParseQhostXML(fixture(t, "qhost.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 1 || hosts[0].Name != "vm" || hosts[0].NCPU != 2 || hosts[0].MemTotal != int64(23.5*(1<<30)) {
		t.Fatalf("%+v", hosts)
	}
	if _, err := ParseQhostXML([]byte(`<qhost><host name='h'><hostvalue name='arch_string'>lx-amd64</hostvalue><hostvalue name='num_proc'>x</hostvalue></host></qhost>`)); !errors.Is(err, backends.ErrBadOutput) {
		t.Errorf("bad num_proc: %v", err)
	}
	if _, err := ParseQhostXML([]byte("error: commlib error")); !errors.Is(err, backends.ErrBadOutput) {
		t.Errorf("garbage: %v", err)
	}
}

func TestParseMemory(t *testing.T) {
	for in, want := range map[string]int64{"-": 0, "1024": 1024, "512K": 512 << 10, "2G": 2 << 30, "1k": 1000, "3g": 3e9} {
		if got, err := ParseMemory(in); err != nil || got != want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"G", "x", "-1M", "1e300T"} {
		if _, err := ParseMemory(in); err == nil {
			t.Errorf("ParseMemory(%q) accepted", in)
		}
	}
}

func TestParseQueues(t *testing.T) {
	qs, err := ParseQueueList(fixture(t, "qconf-sql.txt"))
	if err != nil || len(qs) != 1 || qs[0] != "gridsub.q" {
		t.Fatalf("%v, %v", qs, err)
	}
	if qs, err := ParseQueueList([]byte("no cqueue list defined\n")); err != nil || len(qs) != 0 {
		t.Fatalf("no queues: %v, %v", qs, err)
	}
	if _, err := ParseQueueList([]byte("a queue; rm -rf /\n")); !errors.Is(err, backends.ErrBadOutput) {
		t.Errorf("garbage queue name: %v", err)
	}
	cqs, err := ParseClusterQueues(fixture(t, "qstat-gc.txt"))
	if err != nil || len(cqs) != 1 || cqs[0] != (ClusterQueue{Name: "gridsub.q", Used: 4, Avail: 4, Total: 8}) {
		t.Fatalf("%+v, %v", cqs, err)
	}
	for _, bad := range []string{"CLUSTER QUEUE\n", "x\n---\n", "CLUSTER QUEUE  CQLOAD\n-----\ngridsub.q 0.1 a 0 8 8 0 0\n"} {
		if _, err := ParseClusterQueues([]byte(bad)); !errors.Is(err, backends.ErrBadOutput) {
			t.Errorf("ParseClusterQueues(%q) = %v", bad, err)
		}
	}
}

func TestParseQacct(t *testing.T) {
	for _, c := range []struct {
		file   string
		state  backends.State
		exit   int
		signal int
	}{
		{"qacct-ok.txt", backends.StateCompleted, 0, 0},
		{"qacct-exit3.txt", backends.StateFailed, 3, 0},
		{"qacct-h_rt.txt", backends.StateTimeout, 137, 9},
		{"qacct-deleted.txt", backends.StateFailed, 137, 9},
	} {
		recs, err := ParseQacct(fixture(t, c.file), time.UTC)
		if err != nil || len(recs) != 1 {
			t.Fatalf("%s: %+v, %v", c.file, recs, err)
		}
		st := recs[0].Status()
		if st.State != c.state || st.ExitCode != c.exit || st.Signal != c.signal || st.Start.IsZero() || st.End.Before(st.Start) {
			t.Errorf("%s: %+v, want %s exit %d signal %d", c.file, st, c.state, c.exit, c.signal)
		}
	}
	if recs, err := ParseQacct(fixture(t, "qacct-unknown.txt"), time.UTC); err != nil || len(recs) != 0 {
		t.Errorf("unknown job: %+v, %v", recs, err)
	}
	for _, bad := range []string{"garbage\n", "======\njobnumber x\nfailed 0\nexit_status 0\n", "=====\njobnumber 5\nfailed zero\nexit_status 0\n", "=====\njobnumber 5\nfailed 0\n"} {
		if _, err := ParseQacct([]byte(bad), time.UTC); !errors.Is(err, backends.ErrBadOutput) {
			t.Errorf("ParseQacct(%q) = %v, want ErrBadOutput", bad, err)
		}
	}
}

// TestParseStatus: one status command's real output over a completed, a
// failed, a running, a cancelled, a pending and an unknown job.
func TestParseStatus(t *testing.T) {
	p, err := ParseStatus(fixture(t, "status-mixed.txt"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	ids := []backends.JobID{"208", "209", "210", "211", "212", "999999999"}
	got := Merge(p, ids, time.UTC)
	want := map[backends.JobID]backends.State{"208": backends.StateCompleted, "209": backends.StateFailed, "210": backends.StateRunning,
		"211": backends.StateCancelled, "212": backends.StatePending}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for id, s := range want {
		if got[id].State != s || got[id].GridID == "" {
			t.Errorf("job %s: %+v, want %s with its grid id", id, got[id], s)
		}
	}
	if got["209"].ExitCode != 3 {
		t.Errorf("failed job: %+v", got["209"])
	}
	// Only the ids asked for are answered.
	if m := Merge(p, []backends.JobID{"210"}, time.UTC); len(m) != 1 {
		t.Errorf("Merge of one id: %+v", m)
	}
	out := fixture(t, "status-mixed.txt")
	for name, bad := range map[string]string{
		"no acct mark":   strings.Replace(string(out), acctMark, "#x", 1),
		"no tags mark":   strings.Replace(string(out), tagsMark, "#x", 1),
		"bad index line": strings.Replace(string(out), "208:cap", "208:../cap", 1),
		"bad cancelled":  strings.Replace(string(out), cancelledMark+"\n211", cancelledMark+"\nrm -rf", 1),
	} {
		if _, err := ParseStatus([]byte(bad), time.UTC); !errors.Is(err, backends.ErrBadOutput) {
			t.Errorf("%s: %v, want ErrBadOutput", name, err)
		}
	}
}

// A job gridsub deleted that completed cleanly first stays completed; one
// the deletion killed is cancelled.
func TestMergeCancelled(t *testing.T) {
	p := &Polled{Acct: []Acct{{Number: "5"}, {Number: "6", Failed: 100, FailedText: "assumedly after job", ExitStatus: 137}},
		Cancelled: []string{"5", "6", "7"}}
	got := Merge(p, []backends.JobID{"5", "6", "7"}, time.UTC)
	if got["5"].State != backends.StateCompleted || got["6"].State != backends.StateCancelled || got["7"].State != backends.StateCancelled {
		t.Fatalf("%+v", got)
	}
}

func TestParseTagged(t *testing.T) {
	ts, err := ParseTagged(fixture(t, "qstat-j-all.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 4 || ts[0].Number != "16" || ts[0].Owner != "geuser" || ts[0].Name != "arr" {
		t.Fatalf("%+v", ts)
	}
	tagged := []byte("job_number:                 1\nowner:                      geuser\ncwd:                        /home/geuser/gridsub/g1\njob_name:                   hello\nenv_list:                   TERM=NONE,GRIDSUB_TAG=g:g1\n")
	ts, err = ParseTagged(tagged)
	if err != nil || len(ts) != 1 || ts[0].Tag != "g:g1" || GridFromTag(ts[0].Tag) != "g1" || ts[0].Cwd != "/home/geuser/gridsub/g1" {
		t.Fatalf("%+v, %v", ts, err)
	}
	if ts, err := ParseTagged([]byte("Following jobs do not exist: \n*\n")); err != nil || len(ts) != 0 {
		t.Fatalf("no jobs: %+v, %v", ts, err)
	}
	for _, bad := range []string{"owner: x\n", "garbage\n", "job_number: x1\n"} {
		if _, err := ParseTagged([]byte(bad)); !errors.Is(err, backends.ErrBadOutput) {
			t.Errorf("ParseTagged(%q) = %v", bad, err)
		}
	}
}

func TestParseQsub(t *testing.T) {
	for in, want := range map[string]backends.JobID{"17\n": "17", "16.1-3:1\n": "16"} {
		if id, err := ParseQsub([]byte(in)); err != nil || id != want {
			t.Errorf("ParseQsub(%q) = %q, %v", in, id, err)
		}
	}
	for _, bad := range []string{"", "Your job 17 (\"x\") has been submitted\n", "17\n18\n", "0\n", "-1\n"} {
		if _, err := ParseQsub([]byte(bad)); !errors.Is(err, backends.ErrBadOutput) {
			t.Errorf("ParseQsub(%q) = %v", bad, err)
		}
	}
}

func TestParseReservations(t *testing.T) {
	if id, err := ParseQrsub([]byte("Your advance reservation 5 has been granted\n")); err != nil || id != "5" {
		t.Fatalf("%q, %v", id, err)
	}
	if _, err := ParseQrsub([]byte("advance_reservation: no suitable queues\n")); !errors.Is(err, backends.ErrBadOutput) {
		t.Errorf("refusal read as a grant: %v", err)
	}
	ars, unknown, err := ParseQrstat(fixture(t, "qrstat-running.xml"), time.UTC)
	if err != nil || len(unknown) != 0 || len(ars) != 1 {
		t.Fatalf("%+v %v %v", ars, unknown, err)
	}
	a := ars[0]
	if a.ID != "5" || a.State != "r" || a.Slots != 2 || a.End.Sub(a.Start) != 10*time.Minute || a.Instances[0] != "gridsub.q@vm" {
		t.Errorf("%+v", a)
	}
	ars, _, err = ParseQrstat(fixture(t, "qrstat-waiting.xml"), time.UTC)
	if err != nil || len(ars) != 1 || ars[0].State != "w" || ars[0].Start != time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) {
		t.Fatalf("%+v %v", ars, err)
	}
	ars, unknown, err = ParseQrstat(fixture(t, "qrstat-unknown.xml"), time.UTC)
	if err != nil || len(ars) != 0 || len(unknown) != 1 || unknown[0] != "99" {
		t.Fatalf("%+v %v %v", ars, unknown, err)
	}
	if _, _, err := ParseQrstat([]byte("<qrstat><ar_summary><id>5</id><start_time>soon</start_time></ar_summary></qrstat>"), time.UTC); !errors.Is(err, backends.ErrBadOutput) {
		t.Errorf("bad time: %v", err)
	}
}

func TestParseInfo(t *testing.T) {
	info, err := ParseInfo(fixture(t, "info.txt"), "ge", "gridsub.q", 2)
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != Kind || info.Nodes != 4 || info.CoresPerNode != 2 || info.Partitions[0] != "gridsub.q" || info.MemPerNode <= 0 || info.FreeNodes > info.Nodes {
		t.Fatalf("%+v", info)
	}
	if _, err := ParseInfo(fixture(t, "info.txt"), "ge", "other.q", 1); !errors.Is(err, backends.ErrRejected) || !strings.Contains(err.Error(), "other.q") {
		t.Errorf("unknown queue: %v", err)
	}
	if _, err := ParseInfo([]byte("<qhost/>\n"), "ge", "", 1); !errors.Is(err, backends.ErrBadOutput) {
		t.Errorf("cut output: %v", err)
	}
}

// TestFailures: the real error words of each command, read as the
// Backend reads them (qmaster unreachable or a refusal; an ended job or
// reservation).
func TestFailures(t *testing.T) {
	d := newDialect(Config{Name: "ge"})
	blocks := strings.Split(string(fixture(t, "errors.txt")), "--- ")[1:]
	if len(blocks) < 10 {
		t.Fatalf("%d error fixtures", len(blocks))
	}
	for _, b := range blocks {
		head, body, _ := strings.Cut(b, "\n")
		f := strings.Fields(head)
		code, _ := strconv.Atoi(f[1])
		msg, down := d.Failure(backends.Result{Stderr: []byte(body), ExitCode: code})
		if strings.Contains(msg, "\n") || msg == "" {
			t.Errorf("%s: message %q", f[2], msg)
		}
		if down != (f[2] == "qmaster-down") {
			t.Errorf("%s: unavailable = %v", f[2], down)
		}
		if ended := d.Ended(msg); ended != (f[2] == "ended") {
			t.Errorf("%s: ended = %v", f[2], ended)
		}
	}
}

func TestQsubArgs(t *testing.T) {
	spec := &backends.JobSpec{GridID: "7abc", Name: "my job; rm -rf /", Nodes: 2, CoresPerNode: 2, MemPerNode: 3 << 30,
		Walltime: 90 * time.Second, Partition: "gridsub.q", Account: "grid"}
	got := strings.Join(QsubArgs(spec, Shape{SlotsPerNode: 4, PE: "mpi"}, "", "def"), " ")
	want := "-N my_job__rm_-rf__ -v GRIDSUB_TAG=g:7abc -r n -S /bin/bash -w e -pe mpi 4 -l h_vmem=1536M -q gridsub.q -P grid"
	if got != want {
		t.Errorf("QsubArgs:\n got %s\nwant %s", got, want)
	}
	one := strings.Join(QsubArgs(&backends.JobSpec{GridID: "x", Nodes: 1, Walltime: time.Second}, Shape{SlotsPerNode: 1}, "", ""), " ")
	if one != "-N x -v GRIDSUB_TAG=g:x -r n -S /bin/bash -w e" {
		t.Errorf("single slot: %s", one)
	}
	argv := Cmds{}.SubmitArgv("r/gridsub/x", "r/gridsub/.ids", &backends.JobSpec{GridID: "x", Walltime: 1500 * time.Millisecond, Reservation: "5"}, time.Unix(1e9, 0), nil)
	if argv[4] != "/usr/bin/qsub" || argv[5] != "/usr/bin/qrstat" || argv[9] != "2" || argv[10] != "5" || argv[11] != "1000000000" {
		t.Errorf("SubmitArgv: %q", argv)
	}
	if CleanName("1st") != "g1st" || CleanName("") != "g" || len(CleanName(strings.Repeat("a", 300))) != 200 {
		t.Error("CleanName")
	}
}

func TestCheckSpec(t *testing.T) {
	d := newDialect(Config{Name: "ge", SlotsPerNode: 2})
	for name, spec := range map[string]*backends.JobSpec{
		"cores":       {Nodes: 1, CoresPerNode: 3},
		"gpus":        {Nodes: 1, GPUsPerNode: 1},
		"no pe":       {Nodes: 1},
		"reservation": {Nodes: 1, CoresPerNode: 1, Reservation: "R5.server"},
	} {
		if err := d.CheckSpec(spec); !errors.Is(err, backends.ErrInvalidSpec) {
			t.Errorf("%s: %v, want ErrInvalidSpec", name, err)
		}
	}
	if err := d.CheckSpec(&backends.JobSpec{Nodes: 1, CoresPerNode: 1, Reservation: "5"}); err != nil {
		t.Errorf("one slot in reservation 5: %v", err)
	}
}

// A reservation's users reach qrsub -u as one comma-separated word: a
// name that is no user name is refused before anything runs.
func TestReserveRefusesBadUsers(t *testing.T) {
	d := newDialect(Config{Name: "ge", PE: "gridsub"})
	for _, u := range []string{"a,b", "@arusers", "", "-x"} {
		if _, err := d.Reserve(context.Background(), nil, &backends.ReservationSpec{Name: "r", Nodes: 1, Duration: time.Minute, Users: []string{u}}); !errors.Is(err, backends.ErrInvalidSpec) {
			t.Errorf("user %q: %v, want ErrInvalidSpec", u, err)
		}
	}
}
