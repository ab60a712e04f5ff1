package slurm_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/transport"
)

// pendingResv makes a one-node reservation that starts in an hour, so the
// jobs submitted into it stay pending and cost the cluster nothing; the
// jobs in ids() and the reservation are removed at the end.
func pendingResv(t *testing.T, be *slurm.Backend, c *transport.Client, ids func() []backends.JobID) backends.ResvID {
	t.Helper()
	ctx := context.Background()
	resv, err := be.CreateReservation(ctx, &backends.ReservationSpec{Name: "r-" + gridID("batch"),
		Start: time.Now().Add(time.Hour), Duration: 10 * time.Minute, Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if all := ids(); len(all) > 0 {
			_, _ = c.Run(context.Background(), slurm.ScancelArgv(all...), nil)
			time.Sleep(500 * time.Millisecond)
		}
		_ = be.DeleteReservation(context.Background(), resv)
	})
	return resv
}

// tagsOf asks squeue which tag (--comment) each job carries.
func tagsOf(t *testing.T, c *transport.Client, ids []backends.JobID) map[backends.JobID]string {
	t.Helper()
	r, err := c.Run(context.Background(), slurm.SqueueArgv(ids), nil)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("squeue: %v %s", err, r.Stderr)
	}
	recs, err := slurm.ParseSqueue(r.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	out := map[backends.JobID]string{}
	for _, rec := range recs {
		out[rec.Status.ID] = rec.Comment
	}
	return out
}

// countTags counts the login user's live jobs per tag.
func countTags(t *testing.T, c *transport.Client) map[string]int {
	t.Helper()
	r, err := c.Run(context.Background(), slurm.SqueueMineArgv(), nil)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("squeue --me: %v %s", err, r.Stderr)
	}
	recs, err := slurm.ParseSqueue(r.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, rec := range recs {
		n[rec.Comment]++
	}
	return n
}

// TestSubmitBatchPartialFailure: a batch of 8 with one job sbatch refuses
// (more nodes than the site has) and one the backend refuses before
// sending (an environment name that is no identifier): the 6 others get
// ids, each the job carrying its own tag, in ONE remote command; the two
// get their own clear errors.
func TestSubmitBatchPartialFailure(t *testing.T) {
	s := testSite(t, "siteB")
	c := dial(t, s)
	cnt := &counter{Runner: c}
	be := newBackend(t, s, c, cnt)
	var got []backends.JobID
	resv := pendingResv(t, be, c, func() []backends.JobID { return got })
	const n = 8
	specs := make([]*backends.JobSpec, n)
	for i := range specs {
		specs[i] = &backends.JobSpec{GridID: gridID("bp"), Name: fmt.Sprintf("batch $(touch /tmp/owned-%d) 'q'", i), Nodes: 1,
			CoresPerNode: 1, Walltime: time.Minute, Command: []string{"echo", "job", fmt.Sprint(i)}, Reservation: string(resv)}
	}
	specs[3].Nodes = 99
	specs[5].Env = map[string]string{"NOT AN IDENTIFIER": "x"}
	cnt.reset()
	res := be.SubmitBatch(context.Background(), specs)
	if calls := cnt.reset(); calls["batch"] != 1 || calls["mkdir"] != 1 || len(calls) != 2 {
		t.Errorf("remote commands: %v, want one mkdir and one batch", calls)
	}
	if len(res) != n {
		t.Fatalf("%d results for %d specs", len(res), n)
	}
	var ids []backends.JobID
	for i, r := range res {
		switch i {
		case 3:
			if r.Err == nil || !errors.Is(r.Err, backends.ErrRejected) || !strings.Contains(r.Err.Error(), "Batch job submission failed") {
				t.Errorf("job 3 (99 nodes): %v, want ErrRejected with sbatch's words", r.Err)
			}
			t.Logf("job 3: %v", r.Err)
		case 5:
			if r.Err == nil || !errors.Is(r.Err, backends.ErrInvalidSpec) || !strings.Contains(r.Err.Error(), "NOT AN IDENTIFIER") {
				t.Errorf("job 5 (bad env name): %v, want ErrInvalidSpec naming it", r.Err)
			}
		default:
			if r.Err != nil || r.ID == "" {
				t.Errorf("job %d: %v, want an id", i, r.Err)
				continue
			}
			ids = append(ids, r.ID)
		}
	}
	got = ids
	if len(ids) == 0 {
		t.FailNow()
	}
	tags := tagsOf(t, c, ids)
	for i, r := range res {
		if r.Err == nil && tags[r.ID] != slurm.GridTag(specs[i].GridID) {
			t.Errorf("job %d: remote job %s carries tag %q, want %q", i, r.ID, tags[r.ID], slurm.GridTag(specs[i].GridID))
		}
	}
	// The job names stayed literal text.
	if ok, _ := c.Run(context.Background(), []string{"test", "-e", "/tmp/owned-0"}, nil); ok.ExitCode == 0 {
		t.Error("a job name was run by a shell")
	}
}

// cutRunner runs batches with "create mark; sleep 30" put after the end of
// command `after`, and cuts the batch once mark exists: the session is
// closed (ctx ended, SIGTERM) mid-batch, as a dropped connection would,
// at the same point however slow the site.
// Every other command goes to the Runner unchanged.
type cutRunner struct {
	backends.Runner
	after int
	mark  string // remote file the shell creates when it reaches the sleep
}

func (r *cutRunner) Run(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	if len(argv) != 4 || argv[3] != sshbatch.Program {
		return r.Runner.Run(ctx, argv, stdin)
	}
	script := argv[2]
	mark := "printf '\\n#gridsub-rc "
	// Find the end line of command `after` and put the sleep after it.
	lines := strings.SplitAfter(script, "\n")
	seen := -1
	var sb strings.Builder
	for _, l := range lines {
		sb.WriteString(l)
		if strings.HasPrefix(l, "r=$?; "+mark) {
			seen++
			if seen == r.after {
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

// TestSubmitBatchCut: a batch of 10 is cut after its 4th submission.
// SubmitBatch finds the 4 submitted ones by their tags (ids matching the
// tags), and reports the 6 others as ErrOutcomeUnknown; looked up again a
// moment later they are not at the site, so they are submitted again — and
// in the end every tag is at the site exactly once.
func TestSubmitBatchCut(t *testing.T) {
	s := testSite(t, "siteB")
	c := dial(t, s)
	be := newBackend(t, s, c, c)
	var all []backends.JobID
	resv := pendingResv(t, be, c, func() []backends.JobID { return all })
	mark := s.scratch + "/cut-" + gridID("m")
	t.Cleanup(func() { _, _ = c.Run(context.Background(), []string{"rm", "-f", mark}, nil) })
	cutBe := newBackend(t, s, c, &cutRunner{Runner: c, after: 3, mark: mark})
	const n = 10
	specs := make([]*backends.JobSpec, n)
	for i := range specs {
		specs[i] = &backends.JobSpec{GridID: gridID("bc"), Nodes: 1, CoresPerNode: 1, Walltime: time.Minute,
			Command: []string{"true"}, Reservation: string(resv)}
	}
	ctx := context.Background()
	res := cutBe.SubmitBatch(ctx, specs)
	var again []*backends.JobSpec
	for i, r := range res {
		if i <= 3 {
			if r.Err != nil {
				t.Errorf("job %d (before the cut): %v, want found by its tag", i, r.Err)
				continue
			}
			all = append(all, r.ID)
			continue
		}
		if r.Err == nil {
			all = append(all, r.ID)
			t.Errorf("job %d (after the cut): got id %s, want outcome unknown", i, r.ID)
			continue
		}
		if !backends.OutcomeUnknown(r.Err) || !backends.Retryable(r.Err) {
			t.Errorf("job %d: %v, want ErrOutcomeUnknown and retryable", i, r.Err)
		}
		again = append(again, specs[i])
	}
	if t.Failed() {
		t.FailNow()
	}
	tags := tagsOf(t, c, all)
	for i := 0; i <= 3; i++ {
		if tags[res[i].ID] != slurm.GridTag(specs[i].GridID) {
			t.Errorf("job %d: id %s carries %q, want %q", i, res[i].ID, tags[res[i].ID], slurm.GridTag(specs[i].GridID))
		}
	}
	// Reconcile by tag, as the broker does before resubmitting.
	time.Sleep(time.Second)
	for _, sp := range again {
		found, err := be.FindByGridID(ctx, sp.GridID)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != 0 {
			t.Errorf("%s: found %v after the cut: the cut shell went on submitting", sp.GridID, found)
		}
	}
	for i, r := range be.SubmitBatch(ctx, again) {
		if r.Err != nil {
			t.Errorf("resubmitting %s: %v", again[i].GridID, r.Err)
			continue
		}
		all = append(all, r.ID)
	}
	count := countTags(t, c)
	for i, sp := range specs {
		if got := count[slurm.GridTag(sp.GridID)]; got != 1 {
			t.Errorf("job %d: %d remote jobs carry its tag, want exactly 1", i, got)
		}
	}
}

// TestSubmitBatchJobsRun: batched jobs really run as Submit's do: in their
// job directory (WorkDir), the wrapper read from the batch's here-document,
// each writing its output and exit-code file; exit codes come back per job.
func TestSubmitBatchJobsRun(t *testing.T) {
	s := testSite(t, "siteA")
	c := dial(t, s)
	be := newBackend(t, s, c, c)
	ctx := context.Background()
	specs := make([]*backends.JobSpec, 3)
	for i := range specs {
		specs[i] = &backends.JobSpec{GridID: gridID("br"), Nodes: 1, CoresPerNode: 1, Walltime: time.Minute,
			Command: []string{"sh", "-c", fmt.Sprintf("echo out-%d; exit %d", i, i)}}
	}
	var ids []backends.JobID
	for i, r := range be.SubmitBatch(ctx, specs) {
		if r.Err != nil {
			t.Fatalf("job %d: %v", i, r.Err)
		}
		ids = append(ids, r.ID)
	}
	t.Cleanup(func() { _, _ = c.Run(context.Background(), slurm.ScancelArgv(ids...), nil) })
	r, err := c.Run(ctx, slurm.ScontrolJobArgv(ids[0]), nil)
	if want := "WorkDir=" + s.scratch + "/" + slurm.JobDir(specs[0]) + " "; err != nil || !strings.Contains(string(r.Stdout), want) {
		t.Errorf("job 0: %v, scontrol does not show %q:\n%s", err, want, r.Stdout)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		st, err := be.Status(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, x := range st {
			if x.State.Final() {
				done++
			}
		}
		if done == len(ids) {
			for i, x := range st {
				if x.ExitCode != i {
					t.Errorf("job %d: %+v, want exit code %d", i, x, i)
				}
				out, err := c.Run(ctx, []string{"cat", s.scratch + "/" + slurm.JobDir(specs[i]) + "/" + slurm.StdoutFile}, nil)
				if err != nil || strings.TrimSpace(string(out.Stdout)) != fmt.Sprintf("out-%d", i) {
					t.Errorf("job %d: stdout %q %v", i, out.Stdout, err)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90 s: %+v", st)
		}
		time.Sleep(time.Second)
	}
}
