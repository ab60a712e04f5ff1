package bridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/backends"
)

// batchSite is a fakeSite with the batch capability. refuse names grid
// tags SubmitBatch refuses; cut names tags whose outcome it reports as
// unknown, submitting the job anyway when arrive[tag] (the batch was cut
// after sbatch ran) or not.
type batchSite struct {
	*fakeSite
	batches [][]string // the tags of each SubmitBatch call
	submits int        // Submit calls
	refuse  map[string]bool
	cut     map[string]bool
	arrive  map[string]bool
}

func (s *batchSite) Submit(ctx context.Context, spec *backends.JobSpec) (backends.JobID, error) {
	s.submits++
	return s.fakeSite.Submit(ctx, spec)
}

func (s *batchSite) SubmitBatch(ctx context.Context, specs []*backends.JobSpec) []backends.SubmitResult {
	var tags []string
	out := make([]backends.SubmitResult, len(specs))
	for i, sp := range specs {
		tags = append(tags, sp.GridID)
		switch {
		case s.refuse[sp.GridID]:
			out[i].Err = fmt.Errorf("%w: sbatch: invalid partition", backends.ErrRejected)
		case s.cut[sp.GridID]:
			if s.arrive[sp.GridID] {
				_, _ = s.fakeSite.Submit(ctx, sp)
			}
			out[i].Err = fmt.Errorf("%w: %w: batch cut", backends.ErrUnavailable, backends.ErrOutcomeUnknown)
		default:
			out[i].ID, out[i].Err = s.fakeSite.Submit(ctx, sp)
		}
	}
	s.batches = append(s.batches, tags)
	return out
}

var _ backends.BatchSubmitter = (*batchSite)(nil)

func batchBroker(t *testing.T, sites ...*batchSite) *Broker {
	t.Helper()
	var sc []SiteConfig
	for _, s := range sites {
		sc = append(sc, SiteConfig{Name: s.name, Backend: s, H: 1})
	}
	b, err := New(Options{Sites: sc, Planner: scriptPlanner{firstFit}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// liveByJob counts the live remote jobs of each grid job at a site.
func liveByJob(f *fakeSite) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := map[string]int{}
	for _, st := range f.jobs {
		if !st.State.Final() {
			id, _, _ := strings.Cut(st.GridID, "-a")
			n[id]++
		}
	}
	return n
}

// TestBatchDispatchOneCallPerSite: a cycle's jobs for a batch-capable site
// go in one SubmitBatch, each matched to its own remote id; the one the
// site refuses is refused alone (and goes on at the other site: refused.go).
func TestBatchDispatchOneCallPerSite(t *testing.T) {
	a := &batchSite{fakeSite: newFake("A", 8), refuse: map[string]bool{}}
	c := &batchSite{fakeSite: newFake("C", 8)}
	b := batchBroker(t, a, c)
	ctx := context.Background()
	var ids []string
	for i := 0; i < 10; i++ { // 8 fit on A, 2 go to C
		j, err := b.Submit(ctx, req(1), t0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	a.refuse[RemoteTag(ids[3], 1)] = true
	rep := mustCycle(t, b, t0)
	if len(a.batches) != 1 || len(a.batches[0]) != 8 || a.submits != 0 {
		t.Fatalf("site A: batches %v and %d single submits, want one batch of 8", a.batches, a.submits)
	}
	if len(c.batches) != 1 || len(c.batches[0]) != 2 {
		t.Fatalf("site C: batches %v, want one batch of 2", c.batches)
	}
	if rep.Started != 9 || len(rep.Errors) != 1 {
		t.Errorf("report: started %d, errors %v; want 9 and the one refusal", rep.Started, rep.Errors)
	}
	for i, id := range ids {
		j, _ := b.Job(id)
		if i == 3 {
			if j.State != Queued || len(j.Refused) != 1 || j.Refused[0].Site != "A" || !strings.Contains(j.Refused[0].Why, "invalid partition") {
				t.Errorf("refused job: %s %+v, want queued again with A's refusal in the site's words", j.State, j.Refused)
			}
			continue
		}
		if j.State != Dispatched || len(j.Comps) != 1 {
			t.Fatalf("job %d: %s %+v", i, j.State, j.Comps)
		}
		site := a.fakeSite
		if j.Comps[0].Site == "C" {
			site = c.fakeSite
		}
		if got := site.jobs[j.Comps[0].RemoteID].GridID; got != RemoteTag(id, 1) {
			t.Errorf("job %d: remote job %s carries %q, want its own tag %q", i, j.Comps[0].RemoteID, got, RemoteTag(id, 1))
		}
	}
}

// TestBatchCutReconciledByTag: two jobs of a batch have an unknown outcome;
// one had reached the site, one had not. Neither is resubmitted blindly:
// the next cycle finds the first by its tag and adopts it, queues the
// second again and submits it under its next attempt — each job ends with
// exactly one live remote job.
func TestBatchCutReconciledByTag(t *testing.T) {
	a := &batchSite{fakeSite: newFake("A", 8), cut: map[string]bool{}, arrive: map[string]bool{}}
	b := batchBroker(t, a)
	ctx := context.Background()
	var ids []string
	for i := 0; i < 4; i++ {
		j, err := b.Submit(ctx, req(1), t0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	a.cut[RemoteTag(ids[2], 1)], a.arrive[RemoteTag(ids[2], 1)] = true, true
	a.cut[RemoteTag(ids[3], 1)] = true
	mustCycle(t, b, t0)
	for _, i := range []int{2, 3} {
		j, _ := b.Job(ids[i])
		if j.State != Submitting {
			t.Fatalf("job %d after a cut: %s, want submitting (held for reconciliation)", i, j.State)
		}
		if !hasEventKind(j, "reconcile-pending") {
			t.Errorf("job %d: no reconcile-pending event", i)
		}
	}
	mustCycle(t, b, t0.Add(10e9))
	j2, _ := b.Job(ids[2])
	if j2.State != Dispatched || j2.Attempts != 1 || a.jobs[j2.Comps[0].RemoteID].GridID != RemoteTag(ids[2], 1) {
		t.Errorf("job 2 (had arrived): %s attempt %d %+v, want adopted as attempt 1", j2.State, j2.Attempts, j2.Comps)
	}
	j3, _ := b.Job(ids[3])
	if j3.State != Dispatched || j3.Attempts != 2 {
		t.Errorf("job 3 (never arrived): %s attempt %d, want queued again and dispatched as attempt 2", j3.State, j3.Attempts)
	}
	live := liveByJob(a.fakeSite)
	for i, id := range ids {
		if live[id] != 1 {
			t.Errorf("job %d: %d live remote jobs, want exactly 1", i, live[id])
		}
	}
}

// TestSubmitOutcomeUnknownHeld: the single-Submit path holds a job whose
// submission may have reached the site the same way.
func TestSubmitOutcomeUnknownHeld(t *testing.T) {
	a := newFake("A", 4)
	b := newTestBroker(t, firstFit, a)
	j, _ := b.Submit(context.Background(), req(1), t0)
	a.submitErr = fmt.Errorf("%w: %w: session lost", backends.ErrUnavailable, backends.ErrOutcomeUnknown)
	rep := mustCycle(t, b, t0)
	if got, _ := b.Job(j.ID); got.State != Submitting || len(rep.Errors) != 1 || !errors.Is(rep.Errors[0], backends.ErrOutcomeUnknown) {
		t.Fatalf("%s %v, want held in submitting", got.State, rep.Errors)
	}
	a.submitErr = nil
	mustCycle(t, b, t0.Add(10e9))
	if got, _ := b.Job(j.ID); got.State != Dispatched || got.Attempts != 2 {
		t.Errorf("%s attempt %d, want reconciled (not found), queued and dispatched as attempt 2", got.State, got.Attempts)
	}
}

func hasEventKind(j *Job, kind string) bool {
	for _, e := range j.Events {
		if e.Kind == kind {
			return true
		}
	}
	return false
}
