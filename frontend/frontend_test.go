package frontend

import (
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/policy"
)

func TestFrontIDs(t *testing.T) {
	const p = "g0lx8k2p3q9ab-"
	for _, c := range []struct{ grid, front string }{
		{p + "000042", "42"}, {p + "000042_3", "42_3"}, {p + "1234567", "1234567"}, {p + "000001", "1"},
	} {
		if got := FrontID(p, c.grid); got != c.front {
			t.Errorf("FrontID(%s) = %s, want %s", c.grid, got, c.front)
		}
		if got := gridID(p, c.front); got != c.grid {
			t.Errorf("gridID(%s) = %s, want %s", c.front, got, c.grid)
		}
	}
	if got := gridID(p, "42.gridsub"); got != p+"000042" {
		t.Errorf("qsub's id: %s", got)
	}
	for _, s := range []string{"g0lx8k2p3q9ab-000042", "abc", "", "+5", "4x"} {
		if got := gridID(p, s); got != s {
			t.Errorf("gridID(%q) = %q; a grid id or garbage stays as given", s, got)
		}
	}
}

func TestSqueueFormat(t *testing.T) {
	l, err := parseFormat("%.18i %-8j|%t %%")
	if err != nil {
		t.Fatal(err)
	}
	b := l.row(nil, func(b []byte, k byte) []byte {
		return append(b, map[byte]string{'i': "42", 'j': "averyverylongname", 't': "R"}[k]...)
	})
	if got, want := string(b), "                42 averyver|R %\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"%", "%.", "%y", "%99999i"} {
		if _, err := parseFormat(bad); err == nil {
			t.Errorf("format %q accepted", bad)
		}
	}
}

// TestSqueueRowsMatchJobs: a job's squeue line is the same from the whole
// job (squeue -j, -t all) and from its row of the daemon's queue (the
// default listing), in every field the queue carries (%o, the command,
// is not in it: "(script)" there).
func TestSqueueRowsMatchJobs(t *testing.T) {
	const prefix = "g0lx8k2p3q9ab-"
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	base := func(id string, st bridge.JobState) *bridge.Job {
		return &bridge.Job{ID: prefix + id, State: st, Submit: t0,
			Req: bridge.Request{Name: "n" + id, Nodes: 2, CoresPerNode: 3, Estimate: 36*time.Hour + 5*time.Second}}
	}
	var js []*bridge.Job
	for _, st := range []bridge.JobState{bridge.Queued, bridge.Held, bridge.Reserved, bridge.Submitting, bridge.Dispatched, bridge.Running} {
		js = append(js, base("000001", st))
	}
	pred := base("000002", bridge.Queued)
	pred.Predicted.Parts = []policy.Part{{}}
	run := base("000003", bridge.Running)
	run.Start = t0.Add(time.Minute)
	run.Comps = []bridge.Component{{Site: "Beijing"}, {Site: "Shanghai"}, {Site: "Beijing"}}
	opts := base("000004", bridge.Queued)
	opts.Req.SiteOptions = map[string]bridge.SiteOptions{"Beijing": {Partition: "debug", Account: "proj"}}
	el := base("000005_7", bridge.Running)
	el.Parent, el.Index, el.Start = prefix+"000005", 7, t0.Add(-49*time.Hour)
	el.Comps = []bridge.Component{{Site: "Harbin"}}
	js = append(js, pred, run, opts, el)

	l, err := parseFormat("%i|%.12j|%t|%T|%M|%D|%P|%u|%R|%r|%l|%L|%C|%N|%S|%V|%e|%a|%q|%A|%K|%F|%Z|%-5i|%.3P")
	if err != nil {
		t.Fatal(err)
	}
	c := &feClient{prefix: prefix, now: t0.Add(2 * time.Hour)}
	line := func(r sqRow) string {
		return string(l.row(nil, func(b []byte, k byte) []byte { return appendSqueueField(b, c, &r, k, "me") }))
	}
	for _, j := range js {
		q := api.QueueRowOf(j)
		if got, want := line(rowOfQueue(&q)), line(rowOfJob(j)); got != want {
			t.Errorf("%s (%s):\nfrom the queue %q\nfrom the job   %q", j.ID, j.State, got, want)
		}
	}
}
