package bridge

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// FindByGridID makes the fake site a backends.Finder.
func (f *fakeSite) FindByGridID(_ context.Context, tag string) ([]backends.JobStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.findErr != nil {
		return nil, f.findErr
	}
	var out []backends.JobStatus
	for _, st := range f.jobs {
		if st.GridID == tag {
			out = append(out, *st)
		}
	}
	return out, nil
}

// crashStore stops recording after n successful Puts: what a process killed
// at that instant leaves on disk.
type crashStore struct {
	*MemStore
	mu sync.Mutex
	n  int
}

func (c *crashStore) Put(ctx context.Context, j *Job) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		return errors.New("crashed")
	}
	c.n--
	return c.MemStore.Put(ctx, j)
}

func brokerOn(t *testing.T, st Store, sites ...*fakeSite) *Broker {
	t.Helper()
	var sc []SiteConfig
	for _, s := range sites {
		sc = append(sc, SiteConfig{Name: s.name, Backend: s, H: 1})
	}
	b, err := New(Options{Sites: sc, Planner: scriptPlanner{firstFit}, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRecoverAdoptsSubmissionTheCrashHid(t *testing.T) {
	mem := NewMemStore()
	a := newFake("A", 4)
	// Puts: the submission, then the intent; the crash comes before the
	// remote id is recorded.
	b1 := brokerOn(t, &crashStore{MemStore: mem, n: 2}, a)
	j, err := b1.Submit(context.Background(), req(2), t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b1, t0)
	if stored, _ := mem.Get(context.Background(), j.ID); stored.State != Submitting || stored.Comps[0].RemoteID != "" {
		t.Fatalf("stored %s %+v, want the bare intent", stored.State, stored.Comps)
	}

	b2 := brokerOn(t, mem, a)
	rep, err := b2.Recover(context.Background(), t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Adopted != 1 || rep.Live != 1 || rep.Queued != 0 {
		t.Fatalf("report %+v", rep)
	}
	a.set(j.ID, backends.StateCompleted, 0)
	mustCycle(t, b2, t0.Add(2*time.Second))
	got, _ := b2.Job(j.ID)
	if got.State != Completed || len(a.jobs) != 1 {
		t.Fatalf("state %s, %d remote jobs (want completed, exactly 1)", got.State, len(a.jobs))
	}
	if !strings.Contains(got.Events[len(got.Events)-2].Msg, "attempt 1 found at A:2") {
		t.Fatalf("events %+v", got.Events)
	}
}

func TestRecoverRequeuesSubmissionThatNeverArrived(t *testing.T) {
	mem := NewMemStore()
	a, c := newFake("A", 4), newFake("B", 4)
	c.submitErr = errors.New("the process died before this call")
	b1 := brokerOn(t, &crashStore{MemStore: mem, n: 2}, a, c)
	j, _ := b1.Submit(context.Background(), req(6), t0) // co-allocated: A:4 + B:2
	mustCycle(t, b1, t0)
	c.submitErr = nil
	a.mu.Lock()
	for _, st := range a.jobs { // the killed process never cancelled A's part
		st.State = backends.StatePending
	}
	a.cancels = nil
	a.mu.Unlock()

	b2 := brokerOn(t, mem, a, c)
	rep, err := b2.Recover(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Adopted != 1 || rep.NeverReached != 1 || rep.Queued != 1 || len(a.cancels) != 1 {
		t.Fatalf("report %+v, cancels at A %v: want A's part adopted then cancelled, B's missing, job queued", rep, a.cancels)
	}
	mustCycle(t, b2, t0.Add(time.Second))
	got, _ := b2.Job(j.ID)
	if got.State != Dispatched || got.Attempts != 2 || got.Sites() != "A:4+B:2" {
		t.Fatalf("after recovery: %s attempt %d on %s", got.State, got.Attempts, got.Sites())
	}
	if spec := c.specs["1"]; spec.GridID != RemoteTag(j.ID, 2) {
		t.Fatalf("second attempt tagged %q", spec.GridID)
	}
}

func TestRecoverHoldsJobWhileSiteUnreachable(t *testing.T) {
	mem := NewMemStore()
	a := newFake("A", 4)
	b1 := brokerOn(t, &crashStore{MemStore: mem, n: 3}, a) // submit, queued job 2, intent of job 1
	j, _ := b1.Submit(context.Background(), req(1), t0)
	// Too wide: rejected in the cycle, but the crash hides the rejection, so
	// the store still has it queued.
	if _, err := b1.Submit(context.Background(), req(9), t0); err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b1, t0)

	a.findErr = errors.New("connection refused")
	b2 := brokerOn(t, mem, a)
	rep, err := b2.Recover(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unresolved != 1 || rep.Queued != 1 {
		t.Fatalf("report %+v", rep)
	}
	if got, _ := b2.Job(j.ID); got.State != Submitting {
		t.Fatalf("held job is %s", got.State)
	}
	a.findErr = nil
	mustCycle(t, b2, t0.Add(time.Second))
	if got, _ := b2.Job(j.ID); got.State != Dispatched || len(a.jobs) != 1 {
		t.Fatalf("after the site answered: %s, %d remote jobs", got.State, len(a.jobs))
	}
}

func TestRecoverRefusesStoredJobOnUnknownSite(t *testing.T) {
	mem := NewMemStore()
	_ = mem.Put(context.Background(), &Job{ID: "g000001", State: Dispatched, Comps: []Component{{Site: "Gone", Nodes: 1, RemoteID: "7"}}})
	b := brokerOn(t, mem, newFake("A", 1))
	if _, err := b.Recover(context.Background(), t0); !errors.Is(err, ErrUnknownSite) || !strings.Contains(err.Error(), "Gone") {
		t.Fatalf("got %v", err)
	}
}

// TestRecoverFinishesJobThatEndedDuringTheCrash: the crash hid a submission
// whose remote job has since completed; Recover adopts it and the job must
// complete, not wait for a poll that skips final components.
func TestRecoverFinishesJobThatEndedDuringTheCrash(t *testing.T) {
	mem := NewMemStore()
	a := newFake("A", 4)
	b1 := brokerOn(t, &crashStore{MemStore: mem, n: 2}, a)
	j, _ := b1.Submit(context.Background(), req(2), t0)
	mustCycle(t, b1, t0)
	a.set(j.ID, backends.StateCompleted, 0) // it ran and ended while nobody watched

	b2 := brokerOn(t, mem, a)
	if _, err := b2.Recover(context.Background(), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b2, t0.Add(time.Minute+time.Second))
	got, _ := b2.Job(j.ID)
	if got.State != Completed || got.ExitCode != 0 {
		t.Fatalf("state %s exit %d; events %+v", got.State, got.ExitCode, got.Events)
	}
	if !b2.Idle() {
		t.Fatal("the job is still tracked as live")
	}
	if stored, _ := mem.Get(context.Background(), j.ID); stored.State != Completed {
		t.Fatalf("stored as %s", stored.State)
	}
}
