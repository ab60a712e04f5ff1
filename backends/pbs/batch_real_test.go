package pbs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/transport"
)

// pendingResv makes a one-node reservation that starts in an hour: jobs
// submitted into its queue stay queued and harmless; pbs_rdel at the end
// removes the queue and the jobs in it.
func pendingResv(t *testing.T, b *pbs.Backend) backends.ResvID {
	t.Helper()
	resv, err := b.CreateReservation(context.Background(), &backends.ReservationSpec{Name: "batch-" + gridID("r"),
		Start: time.Now().Add(time.Hour), Duration: 10 * time.Minute, Nodes: 1})
	if err != nil {
		t.Fatalf("CreateReservation: %v", err)
	}
	t.Cleanup(func() {
		if err := b.DeleteReservation(context.Background(), resv); err != nil {
			t.Logf("DeleteReservation: %v", err)
		}
	})
	return resv
}

// tagCount lists the server's live jobs (the tests' jobs wait in a
// reservation queue) and counts them per tag, with each job's id.
func tagCount(t *testing.T, s site, c *transport.Client) (map[string]int, map[backends.JobID]string) {
	t.Helper()
	r, err := c.Run(context.Background(), pbs.Cmds{Bin: s.bin}.LiveDSVArgv(), nil)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := pbs.ParseDSV(r.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	n, tags := map[string]int{}, map[backends.JobID]string{}
	for _, rec := range recs {
		n[rec.Vars[pbs.TagVar]]++
		tags[rec.ID] = rec.Vars[pbs.TagVar]
	}
	return n, tags
}

// TestSubmitBatchPartialFailure: a batch of 6 with one job qsub refuses
// (a queue that does not exist) and one the backend refuses before sending
// (more nodes than the site has): the 4 others get ids, each the job
// carrying its own tag, in ONE remote command; the two get their own clear
// errors.
func TestSubmitBatchPartialFailure(t *testing.T) {
	s := testSite(t)
	c := dial(t, s)
	cnt := &counter{Runner: c}
	b := newBackend(s, c, cnt)
	resv := pendingResv(t, b)
	const n = 6
	specs := make([]*backends.JobSpec, n)
	for i := range specs {
		specs[i] = &backends.JobSpec{GridID: gridID("bp"), Name: fmt.Sprintf("b $(touch /tmp/owned-%d)", i), Nodes: 1, CoresPerNode: 1,
			Walltime: time.Minute, Command: []string{"true"}, Reservation: string(resv)}
	}
	specs[2].Reservation = "R999999.localhost"
	specs[4].Nodes = 99
	cnt.reset()
	res := b.SubmitBatch(context.Background(), specs)
	if calls := cnt.reset(); calls[sshbatch.Program] != 1 || len(calls) != 1 {
		t.Errorf("remote commands: %v, want exactly one batch", calls)
	}
	if len(res) != n {
		t.Fatalf("%d results for %d specs", len(res), n)
	}
	_, tags := tagCount(t, s, c)
	for i, r := range res {
		switch i {
		case 2:
			if r.Err == nil || !errors.Is(r.Err, backends.ErrRejected) || !strings.Contains(r.Err.Error(), "qsub") {
				t.Errorf("job 2 (no such queue): %v, want ErrRejected with qsub's words", r.Err)
			}
			t.Logf("job 2: %v", r.Err)
		case 4:
			if r.Err == nil || !errors.Is(r.Err, backends.ErrRejected) || !strings.Contains(r.Err.Error(), "99 nodes") {
				t.Errorf("job 4 (99 nodes): %v, want ErrRejected naming the node count", r.Err)
			}
		default:
			if r.Err != nil || r.ID == "" {
				t.Errorf("job %d: %v, want an id", i, r.Err)
				continue
			}
			if tags[r.ID] != pbs.GridTag(specs[i].GridID) {
				t.Errorf("job %d: remote job %s carries tag %q, want %q", i, r.ID, tags[r.ID], pbs.GridTag(specs[i].GridID))
			}
		}
	}
	if r, _ := c.Run(context.Background(), []string{"test", "-e", "/tmp/owned-0"}, nil); r.ExitCode == 0 {
		t.Error("a job name was run by a shell")
	}
}

// cutRunner runs batches with "create mark; sleep 30" put after the end of
// command `after`, and cuts the batch once mark exists (ctx ended:
// SIGTERM, session closed), as a dropped connection would, at the same
// point however slow the site.
type cutRunner struct {
	backends.Runner
	after int
	mark  string // remote file the shell creates when it reaches the sleep
}

func (r *cutRunner) Run(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	if len(argv) != 4 || argv[3] != sshbatch.Program {
		return r.Runner.Run(ctx, argv, stdin)
	}
	seen := -1
	var sb strings.Builder
	for _, l := range strings.SplitAfter(argv[2], "\n") {
		sb.WriteString(l)
		if strings.HasPrefix(l, "r=$?; printf '\\n#gridsub-rc ") {
			if seen++; seen == r.after {
				sb.WriteString(": > " + transport.Quote([]string{r.mark}) + "; sleep 30\n")
			}
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// Cut once the shell is in the sleep, however slow the site.
		for cctx.Err() == nil {
			if t, err := r.Runner.Run(cctx, []string{"test", "-e", r.mark}, nil); err == nil && t.ExitCode == 0 {
				cancel()
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	res, err := r.Runner.Run(cctx, []string{argv[0], argv[1], sb.String(), argv[3]}, nil)
	if err != nil {
		// As a dropped connection: retryable, and the caller's ctx is fine.
		err = fmt.Errorf("%w: cut: %v", backends.ErrUnavailable, err)
	}
	return res, err
}

// TestSubmitBatchCut: a batch of 6 is cut after its 3rd submission.
// SubmitBatch finds the 3 submitted ones by their tags, reports the others
// as ErrOutcomeUnknown; looked up again they are not at the site, are
// submitted again, and in the end every tag is at the site exactly once.
func TestSubmitBatchCut(t *testing.T) {
	s := testSite(t)
	c := dial(t, s)
	b := newBackend(s, c, c)
	resv := pendingResv(t, b)
	mark := s.home + "/cut-" + gridID("m")
	t.Cleanup(func() { _, _ = c.Run(context.Background(), []string{"rm", "-f", mark}, nil) })
	cutB := newBackend(s, c, &cutRunner{Runner: c, after: 2, mark: mark})
	const n = 6
	specs := make([]*backends.JobSpec, n)
	for i := range specs {
		specs[i] = &backends.JobSpec{GridID: gridID("bc"), Nodes: 1, CoresPerNode: 1, Walltime: time.Minute,
			Command: []string{"true"}, Reservation: string(resv)}
	}
	ctx := context.Background()
	res := cutB.SubmitBatch(ctx, specs)
	var again []*backends.JobSpec
	for i, r := range res {
		switch {
		case i <= 2 && r.Err != nil:
			t.Errorf("job %d (before the cut): %v, want found by its tag", i, r.Err)
		case i > 2 && r.Err == nil:
			t.Errorf("job %d (after the cut): got id %s, want outcome unknown", i, r.ID)
		case i > 2 && (!backends.OutcomeUnknown(r.Err) || !backends.Retryable(r.Err)):
			t.Errorf("job %d: %v, want ErrOutcomeUnknown and retryable", i, r.Err)
		case i > 2:
			again = append(again, specs[i])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	_, tags := tagCount(t, s, c)
	for i := 0; i <= 2; i++ {
		if tags[res[i].ID] != pbs.GridTag(specs[i].GridID) {
			t.Errorf("job %d: id %s carries %q, want %q", i, res[i].ID, tags[res[i].ID], pbs.GridTag(specs[i].GridID))
		}
	}
	// Reconcile by tag, as the broker does before resubmitting.
	time.Sleep(time.Second)
	count, _ := tagCount(t, s, c)
	for _, sp := range again {
		if n := count[pbs.GridTag(sp.GridID)]; n != 0 {
			t.Errorf("%s: %d jobs carry its tag after the cut: the cut shell went on submitting", sp.GridID, n)
		}
	}
	for i, r := range b.SubmitBatch(ctx, again) {
		if r.Err != nil {
			t.Errorf("resubmitting %s: %v", again[i].GridID, r.Err)
		}
	}
	count, _ = tagCount(t, s, c)
	for i, sp := range specs {
		if got := count[pbs.GridTag(sp.GridID)]; got != 1 {
			t.Errorf("job %d: %d remote jobs carry its tag, want exactly 1", i, got)
		}
	}
}
