package sshbatchtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/transport"
)

// carries reports whether FindByGridID of spec's grid id lists exactly the
// job id (no other job carries its tag).
func carries(t *testing.T, b *sshbatch.Backend, spec *backends.JobSpec, id backends.JobID) bool {
	t.Helper()
	found, err := b.FindByGridID(context.Background(), spec.GridID)
	if err != nil {
		t.Fatalf("FindByGridID(%s): %v", spec.GridID, err)
	}
	return len(found) == 1 && found[0].ID == id
}

// BatchPartialFailure: a batch of 8 with one job the batch system refuses
// (a reservation it does not have), one that asks for more nodes than the
// site has, and one the backend refuses before sending (an environment
// name that is no identifier): the 5 others get ids, each the job carrying
// its own tag, in ONE batch (and one mkdir where the dialect makes the
// directories first); the three get their own clear errors. Job names stay
// literal text.
func BatchPartialFailure(t *testing.T, s Site) {
	cnt := s.counter()
	b := s.New(cnt)
	var got []backends.JobID
	resv := pendingResv(t, s, b, func() []backends.JobID { return got })
	mark := filepath.Join(os.TempDir(), "owned-"+s.GridID("b"))
	specs := make([]*backends.JobSpec, 8)
	for i := range specs {
		specs[i] = &backends.JobSpec{GridID: s.GridID("bp"), Name: fmt.Sprintf("batch $(touch %s) 'q'", mark), Nodes: 1,
			CoresPerNode: 1, Walltime: time.Minute, Command: []string{"echo", "job", fmt.Sprint(i)}, Reservation: string(resv)}
	}
	specs[2].Reservation = s.UnknownResv
	specs[3].Nodes = 99
	specs[5].Env = map[string]string{"NOT AN IDENTIFIER": "x"}
	batchName := b.Exec().Command([]string{sshbatch.Shell, "-c", "", sshbatch.Program})
	cnt.Reset()
	res := b.SubmitBatch(context.Background(), specs)
	calls := cnt.Reset()
	want := map[string]int{batchName: 1}
	if b.MkdirBatch() {
		want["mkdir"] = 1
	}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("remote commands: %v, want %v", calls, want)
	}
	if len(res) != len(specs) {
		t.Fatalf("%d results for %d specs", len(res), len(specs))
	}
	for i, r := range res {
		switch i {
		case 2, 3:
			if !errors.Is(r.Err, backends.ErrRejected) || r.ID != "" {
				t.Errorf("job %d: %v, want ErrRejected", i, r.Err)
			}
			t.Logf("job %d: %v", i, r.Err)
		case 5:
			if !errors.Is(r.Err, backends.ErrInvalidSpec) || !strings.Contains(r.Err.Error(), "NOT AN IDENTIFIER") {
				t.Errorf("job 5 (bad env name): %v, want ErrInvalidSpec naming it", r.Err)
			}
		default:
			if r.Err != nil || r.ID == "" {
				t.Errorf("job %d: %v, want an id", i, r.Err)
				continue
			}
			got = append(got, r.ID)
			if !carries(t, b, specs[i], r.ID) {
				t.Errorf("job %d: %s is not the one job tagged %s", i, r.ID, specs[i].GridID)
			}
		}
	}
	if _, err := os.Stat(mark); err == nil {
		os.Remove(mark)
		t.Error("a job name was run by a shell")
	}
}

// cutRunner runs batches with "create mark; sleep 30" put after the end of
// command `after`, and cuts the batch once mark exists (ctx ended: the
// session is closed, SIGTERM) as a dropped connection would, at the same
// point however slow the site. Every other command goes to the Runner
// unchanged.
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

// BatchCut: a batch of 8 is cut after its 4th submission. SubmitBatch
// finds the 4 submitted ones by their tags and reports the others as
// ErrOutcomeUnknown; looked up again a moment later they are not at the
// site, so they are submitted again, and in the end every tag is at the
// site exactly once.
func BatchCut(t *testing.T, s Site) {
	b := s.New(s.Client)
	var all []backends.JobID
	resv := pendingResv(t, s, b, func() []backends.JobID { return all })
	mark := filepath.Join(s.Root, "cut-"+s.GridID("m"))
	t.Cleanup(func() { os.Remove(mark) })
	cut := s.New(&cutRunner{Runner: s.Client, after: 3, mark: mark})
	specs := PendingSpecs(s.GridID, "bc", 8, resv)
	ctx := context.Background()
	res := cut.SubmitBatch(ctx, specs)
	var again []*backends.JobSpec
	for i, r := range res {
		if r.ID != "" {
			all = append(all, r.ID)
		}
		switch {
		case i <= 3 && r.Err != nil:
			t.Errorf("job %d (before the cut): %v, want found by its tag", i, r.Err)
		case i > 3 && r.Err == nil:
			t.Errorf("job %d (after the cut): got id %s, want outcome unknown", i, r.ID)
		case i > 3 && (!backends.OutcomeUnknown(r.Err) || !backends.Retryable(r.Err)):
			t.Errorf("job %d: %v, want ErrOutcomeUnknown and retryable", i, r.Err)
		case i > 3:
			again = append(again, specs[i])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	for i := 0; i <= 3; i++ {
		if !carries(t, b, specs[i], res[i].ID) {
			t.Errorf("job %d: %s is not the one job tagged %s", i, res[i].ID, specs[i].GridID)
		}
	}
	// Reconcile by tag, as the broker does before resubmitting.
	time.Sleep(time.Second)
	for _, sp := range again {
		if found, err := b.FindByGridID(ctx, sp.GridID); err != nil || len(found) != 0 {
			t.Errorf("%s: found %v (%v) after the cut: the cut shell went on submitting", sp.GridID, found, err)
		}
	}
	for i, r := range b.SubmitBatch(ctx, again) {
		if r.Err != nil {
			t.Errorf("resubmitting %s: %v", again[i].GridID, r.Err)
			continue
		}
		all = append(all, r.ID)
		if !carries(t, b, again[i], r.ID) {
			t.Errorf("resubmitted %s: %s is not the one job carrying its tag", again[i].GridID, r.ID)
		}
	}
}

// BatchJobsRun: batched jobs really run as Submit's do: in their job
// directory, the wrapper read from the batch's here-document, each
// writing its output and exit-code file; exit codes come back per job.
func BatchJobsRun(t *testing.T, s Site) {
	b := s.New(s.Client)
	ctx := context.Background()
	specs := make([]*backends.JobSpec, 3)
	for i := range specs {
		specs[i] = &backends.JobSpec{GridID: s.GridID("br"), Nodes: 1, CoresPerNode: 1, Walltime: time.Minute,
			Command: []string{"sh", "-c", fmt.Sprintf("echo out-%d; exit %d", i, i)}}
	}
	var ids []backends.JobID
	for i, r := range b.SubmitBatch(ctx, specs) {
		if r.Err != nil {
			t.Fatalf("job %d: %v", i, r.Err)
		}
		ids = append(ids, r.ID)
	}
	t.Cleanup(func() {
		for _, id := range ids {
			b.Cancel(context.Background(), id)
		}
	})
	for i, x := range waitFinal(t, b, ids, 3*time.Minute) {
		if x.ExitCode != i {
			t.Errorf("job %d: %+v, want exit code %d", i, x, i)
		}
		dir := filepath.Join(s.Root, sshbatch.JobDir(specs[i]))
		deadline := time.Now().Add(30 * time.Second) // PBS copies the output back after the end
		for {
			out, err := os.ReadFile(filepath.Join(dir, sshbatch.StdoutFile))
			if err == nil && strings.TrimSpace(string(out)) == fmt.Sprintf("out-%d", i) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("job %d: stdout %q %v", i, out, err)
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
		if code, err := os.ReadFile(filepath.Join(dir, sshbatch.ExitFile)); err != nil || strings.TrimSpace(string(code)) != fmt.Sprint(i) {
			t.Errorf("job %d: exit-code file %q %v", i, code, err)
		}
	}
}
