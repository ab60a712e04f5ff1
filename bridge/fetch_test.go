package bridge

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// hangSite is a real (not simulated) site whose output fetch hangs, until
// its context ends, for the remote jobs listed in hang; other fetches
// return at once.
type hangSite struct {
	*fakeSite
	mu      sync.Mutex
	hang    map[backends.JobID]bool
	started chan backends.JobID
	calls   atomic.Int32
}

func (h *hangSite) FetchOutputs(ctx context.Context, id backends.JobID, spec *backends.JobSpec, dir string) ([]string, error) {
	h.calls.Add(1)
	h.mu.Lock()
	hang := h.hang[id]
	h.mu.Unlock()
	if h.started != nil {
		h.started <- id
	}
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return []string{dir + "/stdout.txt"}, nil
}

func newHangSite(name string, nodes int) *hangSite {
	return &hangSite{fakeSite: newFake(name, nodes), hang: map[backends.JobID]bool{}}
}

// waitState cycles b (one cycle every few milliseconds, the clock moving a
// second each) until job id is in state want, or fails after d.
func waitState(t *testing.T, b *Broker, id string, want JobState, now *time.Time, d time.Duration) *Job {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		*now = now.Add(time.Second)
		mustCycle(t, b, *now)
		j, err := b.Job(id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == want {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s after %s, want %s", id, j.State, d, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHangingFetchDoesNotStallOthers: one job's output fetch hangs (a
// stalled site, a job directory that never ends); the cycles go on, other
// jobs dispatch, complete and get their outputs in the following cycles,
// and the hung fetch ends at its own deadline with the job failed-to-fetch
// but completed, its error recorded.
func TestHangingFetchDoesNotStallOthers(t *testing.T) {
	s := newHangSite("A", 8)
	outRoot := t.TempDir()
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: s, H: 1}}, Planner: scriptPlanner{firstFit}, OutputRoot: outRoot,
		FetchTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := req(1)
	r.OutputDir = outRoot + "/" + IDPlaceholder
	hung, err := b.Submit(ctx, r, t0)
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	mustCycle(t, b, now)
	j, _ := b.Job(hung.ID)
	s.mu.Lock()
	s.hang[j.Comps[0].RemoteID] = true
	s.mu.Unlock()
	s.set(hung.ID, backends.StateCompleted, 0)

	t1 := time.Now()
	mustCycle(t, b, now.Add(time.Second)) // starts the hanging fetch
	if d := time.Since(t1); d > time.Second {
		t.Fatalf("the cycle that started the hanging fetch took %s", d)
	}
	// Three more jobs run and complete while it hangs.
	var others []string
	for i := 0; i < 3; i++ {
		o, err := b.Submit(ctx, r, now)
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, o.ID)
	}
	now = now.Add(2 * time.Second)
	mustCycle(t, b, now)
	for _, id := range others {
		s.set(id, backends.StateCompleted, 0)
	}
	for _, id := range others {
		got := waitState(t, b, id, Completed, &now, time.Second)
		if len(got.Outputs) != 1 || len(got.FetchErrors) != 0 {
			t.Errorf("%s: outputs %v, errors %v", id, got.Outputs, got.FetchErrors)
		}
	}
	if got, _ := b.Job(hung.ID); got.State.Final() {
		t.Fatalf("the hung job is %s before its fetch deadline", got.State)
	}
	// The hung fetch ends at its deadline (2 s): the job completes (its
	// exit code was 0) with the fetch error recorded.
	got := waitState(t, b, hung.ID, Completed, &now, 10*time.Second)
	if len(got.FetchErrors) != 1 || !strings.Contains(got.FetchErrors[0], "fetch timeout") {
		t.Errorf("fetch errors %q, want the fetch deadline", got.FetchErrors)
	}
	if d := time.Since(t1); d < 2*time.Second {
		t.Errorf("the hung fetch ended after %s, before its 2 s deadline", d)
	}
}

// TestFetchPoolIsBounded: with 2 workers and 5 hanging fetches, only 2 run
// at once; the cycle never waits for them.
func TestFetchPoolIsBounded(t *testing.T) {
	s := newHangSite("A", 8)
	s.started = make(chan backends.JobID, 10)
	outRoot := t.TempDir()
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: s, H: 1}}, Planner: scriptPlanner{firstFit}, OutputRoot: outRoot,
		FetchWorkers: 2, FetchTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := req(1)
	r.OutputDir = outRoot + "/" + IDPlaceholder
	var ids []string
	for i := 0; i < 5; i++ {
		j, err := b.Submit(ctx, r, t0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	mustCycle(t, b, t0)
	s.mu.Lock()
	for id := range s.jobs {
		s.hang[id] = true
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.set(id, backends.StateCompleted, 0)
	}
	mustCycle(t, b, t0.Add(time.Second))
	<-s.started
	<-s.started
	select {
	case id := <-s.started:
		t.Fatalf("a third fetch (%s) started while two hang", id)
	case <-time.After(100 * time.Millisecond):
	}
	now := t0.Add(time.Second)
	for _, id := range ids {
		waitState(t, b, id, Completed, &now, 5*time.Second)
	}
	if n := s.calls.Load(); n != 5 {
		t.Errorf("%d fetches, want 5", n)
	}
}

// TestRestartFetchesWhatWasUnfinished: the daemon stops while a fetch
// runs (its context is cancelled); the store still holds the job live with
// its component ended, no outputs and no final state. A new broker on the
// same store recovers it and fetches again, and the job completes with its
// outputs: nothing lost, nothing stuck.
func TestRestartFetchesWhatWasUnfinished(t *testing.T) {
	st := NewMemStore()
	s := newHangSite("A", 4)
	outRoot := t.TempDir()
	b1, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: s, H: 1}}, Planner: scriptPlanner{firstFit}, Store: st, OutputRoot: outRoot})
	if err != nil {
		t.Fatal(err)
	}
	r := req(1)
	r.OutputDir = outRoot + "/" + IDPlaceholder
	j, err := b1.Submit(context.Background(), r, t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b1, t0)
	got, _ := b1.Job(j.ID)
	s.mu.Lock()
	s.hang[got.Comps[0].RemoteID] = true
	s.mu.Unlock()
	s.set(j.ID, backends.StateCompleted, 0)
	daemon, stop := context.WithCancel(context.Background())
	if _, err := b1.Cycle(daemon, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	stop() // the daemon stops mid-fetch
	if err := b1.WaitFetches(context.Background()); err != nil {
		t.Fatal(err)
	}
	stored, err := st.Get(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.State.Final() || stored.Outputs != nil || len(stored.FetchErrors) != 0 || !stored.Comps[0].State.Final() {
		t.Fatalf("stored after the interrupted fetch: %s, outputs %v, errors %v, component %s",
			stored.State, stored.Outputs, stored.FetchErrors, stored.Comps[0].State)
	}

	s.mu.Lock()
	s.hang = map[backends.JobID]bool{}
	s.mu.Unlock()
	b2, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: s, H: 1}}, Planner: scriptPlanner{firstFit}, Store: st, OutputRoot: outRoot})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b2.Recover(context.Background(), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Minute)
	done := waitState(t, b2, j.ID, Completed, &now, 5*time.Second)
	if len(done.Outputs) != 1 || len(done.FetchErrors) != 0 {
		t.Fatalf("after the restart: outputs %v, errors %v", done.Outputs, done.FetchErrors)
	}
	stored, _ = st.Get(context.Background(), j.ID)
	if stored.State != Completed || len(stored.Outputs) != 1 {
		t.Fatalf("stored: %s with outputs %v", stored.State, stored.Outputs)
	}
}
