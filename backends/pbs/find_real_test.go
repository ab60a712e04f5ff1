package pbs_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch/sshbatchtest"
)

// TestFindByGridIDLongHistory: on the real server, with whatever history
// it holds (hundreds of finished jobs on the shared testbed), a finished
// job and a live one are found by their tags in one id-less qstat (the
// find command) plus the id-file listing — never one request per history
// job, which took 8 s for 323 jobs (docs/pbs.md). It logs the history's
// length and the lookup's time; GRIDSUB_LONG=1 also times the old by-id
// form on the same history for comparison.
func TestFindByGridIDLongHistory(t *testing.T) {
	s := testSite(t)
	c := dial(t, s)
	cnt := &sshbatchtest.Counter{Runner: c, Name: newBackend(s, c, c).Exec().Command}
	b := newBackend(s, c, cnt)
	ctx := context.Background()
	done := &backends.JobSpec{GridID: gridID("find"), Nodes: 1, CoresPerNode: 1, Walltime: time.Minute, Command: []string{"true"}}
	doneID, err := b.Submit(ctx, done)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, err := b.Status(ctx, []backends.JobID{doneID})
		if err == nil && st[0].State.Final() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not finished after 2 min: %+v %v", doneID, st, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// A live job: held in the queue of a reservation an hour ahead.
	resv, err := b.CreateReservation(ctx, &backends.ReservationSpec{Name: "find-" + gridID("r"),
		Start: time.Now().Add(time.Hour), Duration: 10 * time.Minute, Nodes: 1})
	if err != nil {
		t.Fatalf("CreateReservation: %v", err)
	}
	t.Cleanup(func() { b.DeleteReservation(context.Background(), resv) })
	live := &backends.JobSpec{GridID: gridID("find"), Nodes: 1, CoresPerNode: 1, Walltime: time.Minute,
		Command: []string{"true"}, Reservation: string(resv)}
	liveID, err := b.Submit(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Run(ctx, []string{s.bin + "/qselect", "-x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	history := strings.Count(string(r.Stdout), "\n")
	cnt.Reset()
	for _, x := range []struct {
		spec  *backends.JobSpec
		id    backends.JobID
		final bool
	}{{done, doneID, true}, {live, liveID, false}} {
		t0 := time.Now()
		got, err := b.FindByGridID(ctx, x.spec.GridID)
		took := time.Since(t0)
		calls := cnt.Reset()
		if err != nil {
			t.Fatalf("FindByGridID(%s): %v", x.spec.GridID, err)
		}
		if len(got) != 1 || got[0].ID != x.id || got[0].State.Final() != x.final || got[0].GridID != x.spec.GridID {
			t.Fatalf("FindByGridID(%s) = %+v, want job %s (final %v)", x.spec.GridID, got, x.id, x.final)
		}
		if calls["qstat"] != 1 || calls["job id files"] != 1 || len(calls) != 2 {
			t.Errorf("FindByGridID ran %v, want one find command and one id-file listing", calls)
		}
		t.Logf("FindByGridID of a %s job among %d jobs the server knows: %s", map[bool]string{true: "finished", false: "live"}[x.final],
			history, took.Round(time.Millisecond))
	}
	if os.Getenv("GRIDSUB_LONG") == "1" {
		t0 := time.Now()
		r, err := c.Run(ctx, []string{"bash", "-c", `ids=$("$1" -x -u "$3") || exit; [ -z "$ids" ] || exec "$2" -x -f -F dsv $ids`,
			"old-find", s.bin + "/qselect", s.bin + "/qstat", s.ssh.User}, nil)
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("old find form: %v %d %s", err, r.ExitCode, r.Stderr)
		}
		t.Logf("the old by-id form (qselect -x -u, then qstat -x -f of every id) on the same history: %s, %d bytes",
			time.Since(t0).Round(time.Millisecond), len(r.Stdout))
	}
}
