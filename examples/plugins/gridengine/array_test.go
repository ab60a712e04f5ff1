package gridengine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

func TestParseArrayLimits(t *testing.T) {
	l, err := ParseArrayLimits(fixture(t, "qconf-sconf.txt"))
	if err != nil || l.MaxTasks != 75000 || l.MaxInstances != 2000 {
		t.Fatalf("%+v, %v", l, err)
	}
	for _, bad := range []string{"", "max_aj_tasks 10\n", "max_aj_tasks x\nmax_aj_instances 2\n", "max_aj_tasks -1\nmax_aj_instances 2\n"} {
		if _, err := ParseArrayLimits([]byte(bad)); !errors.Is(err, backends.ErrBadOutput) {
			t.Errorf("ParseArrayLimits(%q) = %v", bad, err)
		}
	}
}

// runFunc is a Runner.
type runFunc func(argv []string) backends.Result

func (f runFunc) Run(_ context.Context, argv []string, _ io.Reader) (backends.Result, error) {
	return f(argv), nil
}

func TestMaxArraySize(t *testing.T) {
	for in, want := range map[string]int{
		"max_aj_instances 2000\nmax_aj_tasks 75000\n": 75000,
		"max_aj_instances 0\nmax_aj_tasks 0\n":        MaxTasks, // no limit
		"max_aj_instances 2000\nmax_aj_tasks 1\n":     0,        // no array of two
	} {
		d := newDialect(Config{Name: "ge"})
		var calls int
		x := New(Config{Name: "ge", User: "u"}, runFunc(func(argv []string) backends.Result {
			calls++
			if strings.Join(argv, " ") != "/usr/bin/qconf -sconf" {
				t.Fatalf("ran %q", argv)
			}
			return backends.Result{Stdout: []byte(in)}
		}), nil).Exec()
		for range 2 {
			n, err := d.MaxArraySize(context.Background(), x)
			if err != nil || n != want {
				t.Errorf("%q: %d, %v; want %d", in, n, err, want)
			}
		}
		if calls != 1 {
			t.Errorf("%d qconf -sconf for two asks, want 1 (cached)", calls)
		}
	}
}

func TestArrayRunsAndRange(t *testing.T) {
	runs := ArrayRuns([]int{0, 1, 2, 7, 9, 11, 20})
	if len(runs) != 3 || TRange(runs[0]) != "1-3:1" || TRange(runs[1]) != "8-12:2" || len(runs[2]) != 1 {
		t.Fatalf("%v", runs)
	}
	d := newDialect(Config{Name: "ge", Queue: "q", SlotsPerNode: 1})
	spec := &backends.JobSpec{GridID: backends.ElementTag("p7", 0, 2), Nodes: 1, Walltime: 90 * time.Second}
	cmd, err := d.ArrayCommand(context.Background(), nil, spec, "p7", 2, []int{0, 1, 2, 3}, "/home/u/gridsub")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(cmd.Argv[4:], " ")
	want := "/usr/bin/qsub /home/u/gridsub gridsub/.ids gridsub-array:p7-a2 -N p7 -v GRIDSUB_TAG=gridsub-array:p7-a2 -r n -S /bin/bash -w e -q q -l h_rt=90 -t 1-4:1"
	if got != want {
		t.Errorf("array argv:\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(cmd.Stdin, "GRIDSUB_ELEMENT=$((SGE_TASK_ID - 1))") || !strings.Contains(cmd.Stdin, `"${GRIDSUB_ELEMENT}"`) ||
		!strings.Contains(cmd.Stdin, `"$JOB_ID.$SGE_TASK_ID" > `+IDFile) {
		t.Errorf("driver:\n%s", cmd.Stdin)
	}
	if _, err := d.ArrayCommand(context.Background(), nil, spec, "p7", 2, []int{0, 1, 3}, "/b"); !errors.Is(err, backends.ErrInvalidSpec) {
		t.Errorf("non-arithmetic run: %v", err)
	}
	if id := d.ElementID("3649", 0); id != "3649.1" {
		t.Errorf("ElementID = %s", id)
	}
}

func TestParseArrayQsub(t *testing.T) {
	// qsub -terse -t's real answers (the testbed).
	for in, want := range map[string]string{string(fixture(t, "qsub-array.txt")): "3645", "3649.1-200:1\n": "3649"} {
		if id, err := ParseArrayQsub([]byte(in)); err != nil || id != want {
			t.Errorf("ParseArrayQsub(%q) = %q, %v", in, id, err)
		}
	}
	for _, bad := range []string{"17\n", "", "x.1-2:1\n", "17.1-2:1\n18.1-2:1\n", "Your job-array 17.1-2:1 (\"a\") has been submitted\n"} {
		if _, err := ParseArrayQsub([]byte(bad)); !errors.Is(err, backends.ErrBadOutput) {
			t.Errorf("ParseArrayQsub(%q) = %v", bad, err)
		}
	}
}

func TestTaskSet(t *testing.T) {
	ts, err := ParseTaskSet("8,9,11-19:1,23-30:2")
	if err != nil {
		t.Fatal(err)
	}
	for task, want := range map[int]bool{8: true, 9: true, 10: false, 11: true, 19: true, 20: false, 23: true, 24: false, 29: true, 30: false, 31: false} {
		if ts.Has(task) != want {
			t.Errorf("Has(%d) = %v", task, !want)
		}
	}
	var all []int
	ts.Each(100, func(t int) { all = append(all, t) })
	if len(all) != 2+9+4 {
		t.Errorf("Each: %v", all)
	}
	var few int
	ts.Each(3, func(int) { few++ })
	if few != 3 {
		t.Errorf("Each(3) called %d times", few)
	}
	for _, bad := range []string{"0", "x", "3-1:1", "1-5:0", "1-5:x", "-", ","} {
		if _, err := ParseTaskSet(bad); err == nil {
			t.Errorf("ParseTaskSet(%q) accepted", bad)
		}
	}
}

// TestMergeArrayTasks: real qstat -xml of two array jobs (running tasks
// one per entry; pending ones as "8,9,11-19:1,23-30:1"; held ones
// "20-22:1") answers for tasks; a task qstat does not list is not live.
func TestMergeArrayTasks(t *testing.T) {
	live, err := ParseQstatXML(fixture(t, "qstat-array-pending.xml"))
	if err != nil {
		t.Fatal(err)
	}
	p := &Polled{Live: live, GridIDs: map[string]string{"3646": "gridsub-array:par-a1", "3645": "g:plain"}}
	ids := []backends.JobID{"3646.2", "3646.7", "3646.8", "3646.15", "3646.21", "3646.10", "3646.3", "3645.1", "3645.2"}
	got := Merge(p, ids, time.UTC)
	want := map[backends.JobID]backends.State{"3646.2": backends.StateRunning, "3646.7": backends.StateRunning, "3646.8": backends.StatePending,
		"3646.15": backends.StatePending, "3646.21": backends.StatePending, "3645.1": backends.StateRunning}
	for id, s := range want {
		if got[id].State != s || got[id].ID != id {
			t.Errorf("%s: %+v, want %s", id, got[id], s)
		}
	}
	// 3646.10 was deleted, 3646.3 is not in this listing, 3645 has no task 2.
	for _, id := range []backends.JobID{"3646.10", "3646.3", "3645.2"} {
		if _, ok := got[id]; ok {
			t.Errorf("%s answered: %+v", id, got[id])
		}
	}
	var pending, running int
	for i := range live {
		if live[i].State == "r" || live[i].State == "t" {
			running += live[i].Count()
		} else {
			pending += live[i].Count()
		}
	}
	if running != 8 || pending != 22 { // 3645: 1, 3, 5 running; 3646: 2, 4-7 running, 19 waiting (8,9,11-19,23-30), 3 held (20-22)
		t.Errorf("entries stand for %d running and %d pending jobs, want 8 and 22", running, pending)
	}
	if got["3646.21"].Reason != "hqw (held)" || got["3646.8"].GridID != "par_7-a1" || got["3645.1"].GridID != "" {
		t.Errorf("held task %+v; grid ids %q %q", got["3646.21"], got["3646.8"].GridID, got["3645.1"].GridID)
	}
}

// TestParseQacctTasks: qacct -j of an array job has one record per task
// (taskid), read as "<job>.<task>"; a plain job's taskid is "undefined".
func TestParseQacctTasks(t *testing.T) {
	recs, err := ParseQacct(fixture(t, "qacct-array.txt"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	got := map[backends.JobID]int{}
	for i := range recs {
		got[recs[i].ID()] = recs[i].ExitStatus
	}
	if got["3645.1"] != 1 || got["3645.3"] != 0 || got["3645.5"] != 2 {
		t.Fatalf("%+v", got)
	}
	plain, err := ParseQacct(fixture(t, "qacct-ok.txt"), time.UTC)
	if err != nil || len(plain) != 1 || plain[0].Task != 0 || strings.Contains(string(plain[0].ID()), ".") {
		t.Fatalf("%+v %v", plain, err)
	}
	bad := strings.Replace(string(fixture(t, "qacct-array.txt")), "taskid       1", "taskid       x", 1)
	if _, err := ParseQacct([]byte(bad), time.UTC); !errors.Is(err, backends.ErrBadOutput) {
		t.Errorf("bad taskid: %v", err)
	}
}

func TestParseTaggedArray(t *testing.T) {
	ts, err := ParseTagged(fixture(t, "qstat-j-array.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Tag != "gridsub-array:par-a1" || !ts[0].Tasks.Has(3) || ts[0].Tasks.Has(2) || !ts[1].Tasks.Has(30) {
		t.Fatalf("%+v", ts)
	}
}

func TestCancelArgvTask(t *testing.T) {
	c := Cmds{Bin: "/usr/bin"}
	if got := strings.Join(c.CancelArgv("/c", "3646.10")[4:], " "); got != "/usr/bin/qdel /c 3646.10 3646 -t 10" {
		t.Errorf("task: %s", got)
	}
	if got := strings.Join(c.CancelArgv("/c", "17")[4:], " "); got != "/usr/bin/qdel /c 17 17" {
		t.Errorf("job: %s", got)
	}
}

func TestGridIDOf(t *testing.T) {
	ix := map[string]string{"5": "gridsub-array:p-a3", "6": "plain-1"}
	for id, want := range map[string]string{"5.1": "p_0-a3", "5.10": "p_9-a3", "5": "", "6": "plain-1", "6.2": "", "7.1": ""} {
		if got := GridIDOf(ix, id); got != want {
			t.Errorf("GridIDOf(%s) = %q, want %q", id, got, want)
		}
	}
}

// TestParseStatusArray: one real status command over the 14 tasks of a
// native array and an unknown task: ended tasks from qacct (by taskid),
// a task deleted while running is Cancelled (its marker, failed 100), one
// deleted while pending is Cancelled (its marker, no record), running and
// pending ones from qstat -xml, each with its element's grid id.
func TestParseStatusArray(t *testing.T) {
	p, err := ParseStatus(fixture(t, "status-array.txt"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	var ids []backends.JobID
	for task := 1; task <= 14; task++ {
		ids = append(ids, TaskID("4196", task))
	}
	got := Merge(p, append(ids, "999999999.1"), time.UTC)
	if len(got) != 14 {
		t.Fatalf("%d answered: %+v", len(got), got)
	}
	for i, id := range ids {
		want := backends.StateRunning
		switch {
		case i == 0:
			want = backends.StateCompleted
		case i == 1:
			want = backends.StateFailed
		case i == 2 || i == 13:
			want = backends.StateCancelled
		case i == 11 || i == 12:
			want = backends.StatePending
		}
		st := got[id]
		if st.State != want || st.ID != id || st.GridID != backends.ElementTag("gcapx1423945321", i, 1) {
			t.Errorf("task %s: %+v, want %s", id, st, want)
		}
	}
	if got["4196.2"].ExitCode != 3 || got["4196.3"].Signal != 9 {
		t.Errorf("ended tasks: %+v %+v", got["4196.2"], got["4196.3"])
	}
	if len(p.Acct) != 3 {
		t.Errorf("%d accounting records, want the 3 ended tasks' only", len(p.Acct))
	}
}

// TestLiveArray: the tag listing's array job maps each element's tag to
// its task.
func TestLiveArray(t *testing.T) {
	ts, err := ParseTagged(fixture(t, "tags-array.txt"))
	if err != nil || len(ts) != 1 || !ts[0].Tasks.Has(14) || ts[0].Tasks.Has(15) {
		t.Fatalf("%+v %v", ts, err)
	}
	d := newDialect(Config{Name: "ge"})
	x := New(Config{Name: "ge", User: "geuser"}, runFunc(func([]string) backends.Result {
		return backends.Result{Stdout: fixture(t, "tags-array.txt")}
	}), nil).Exec()
	m, err := d.Live(context.Background(), x)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 14 || m[backends.ElementTag("gcapx1423945321", 0, 1)] != "4196.1" || m[backends.ElementTag("gcapx1423945321", 13, 1)] != "4196.14" {
		t.Fatalf("%+v", m)
	}
}

// TestSplitFind: the find command's two parts (a real tag listing, then
// id file lines); output without the mark is ErrBadOutput.
func TestSplitFind(t *testing.T) {
	out := append(fixture(t, "tags-array.txt"), []byte(idFilesMark+"\ngridsub/x_1-a1:4196.2\n")...)
	tags, ids, err := SplitFind(out)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := mine(tags, "geuser")
	if err != nil || len(ts) != 1 || ParseIDFiles(ids)["gridsub/x_1-a1"] != "4196.2" {
		t.Fatalf("%+v %v %q", ts, err, ids)
	}
	if others, _ := mine(tags, "someone"); len(others) != 0 {
		t.Fatalf("another user's jobs kept: %+v", others)
	}
	if _, _, err := SplitFind(fixture(t, "tags-array.txt")); !errors.Is(err, backends.ErrBadOutput) {
		t.Fatalf("no mark: %v", err)
	}
}

// TestFindScriptQmasterDown runs the find command's script with bash
// against stand-in qstat programs printing the real words of
// testdata/errors.txt: the qmaster down is qstat's failure with its words
// (never an empty listing, which would say no job carries the tag), no job
// at all is an empty listing.
func TestFindScriptQmasterDown(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	fake := func(name, out string, code int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' %s\nexit %d\n", shellQuote(out), code)), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	down := "error: commlib error: got select error (Connection refused)\nunable to send message to qmaster using port 6444 on host \"vm\": got send error"
	argv := Cmds{}.FindArgv("geuser", dir, "g1")
	argv[4] = fake("qstat-down", down, 1)
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(ee.Stderr), "unable to send message to qmaster") || len(out) != 0 {
		t.Fatalf("qmaster down: %q, %v", out, err)
	}
	argv[4] = fake("qstat-none", "Following jobs do not exist: \n*", 1)
	out, err = exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		t.Fatalf("no jobs: %v", err)
	}
	tags, ids, err := SplitFind(out)
	if err != nil || len(ids) != 0 {
		t.Fatalf("no jobs: %q %v", out, err)
	}
	if ts, err := ParseTagged(tags); err != nil || len(ts) != 0 {
		t.Fatalf("no jobs: %+v %v", ts, err)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
