package bridge

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// TestCycleWritesJobsTogether: a cycle writes its dispatch intents, the
// settled submissions and the status changes of many jobs concurrently,
// so a store with group commit shares commits among them (the 10,000-job
// load test spent a minute on one fsync per intent), and what it stores
// is each job's latest state (in chunks of writeChunk copies).
func TestCycleWritesJobsTogether(t *testing.T) {
	st := &slowStore{MemStore: NewMemStore()}
	a := newFake("A", 400)
	b := brokerOn(t, st, a)
	const n = 300 // more than one writeChunk
	var ids []string
	for range n {
		j, err := b.Submit(context.Background(), req(1), t0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	check := func(phase string, want JobState) {
		t.Helper()
		st.mu.Lock()
		m := st.max
		st.max = 0
		st.mu.Unlock()
		if m < 8 {
			t.Errorf("%s: at most %d store writes at once, want the cycle's jobs written together", phase, m)
		}
		for _, id := range ids {
			got, err := st.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			mem, _ := b.Job(id)
			if got.State != want || len(got.Events) != len(mem.Events) || (want == Dispatched && got.Comps[0].RemoteID == "") {
				t.Fatalf("%s: job %s stored %s with %d events %+v, want %s as in memory (%d events)", phase, id, got.State,
					len(got.Events), got.Comps, want, len(mem.Events))
			}
		}
	}
	st.mu.Lock()
	st.max = 0
	st.mu.Unlock()
	t1 := time.Now()
	mustCycle(t, b, t0.Add(time.Second))
	t.Logf("dispatch cycle of %d jobs with 5 ms writes: %s (one write at a time: over %s)", n, time.Since(t1).Round(time.Millisecond),
		time.Duration(2*n)*5*time.Millisecond)
	check("dispatch", Dispatched)
	for _, id := range ids {
		a.set(id, backends.StateCompleted, 0)
	}
	mustCycle(t, b, t0.Add(2*time.Second))
	check("completion", Completed)
}

// slowSubmitSite is a fake site whose Submit takes 50 ms, counting how
// many of the sites submit at once.
type slowSubmitSite struct {
	*fakeSite
	now, max *int
	mu       *sync.Mutex
}

func (s slowSubmitSite) Submit(ctx context.Context, spec *backends.JobSpec) (backends.JobID, error) {
	s.mu.Lock()
	*s.now++
	*s.max = max(*s.max, *s.now)
	s.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	s.mu.Lock()
	*s.now--
	s.mu.Unlock()
	return s.fakeSite.Submit(ctx, spec)
}

// TestCycleSubmitsToSitesConcurrently: a cycle with jobs for several real
// sites submits to them at the same time (bounded by MaxSiteSubmits), not
// one site after the other; each job still lands at its planned site.
func TestCycleSubmitsToSitesConcurrently(t *testing.T) {
	var mu sync.Mutex
	var now, most int
	var sc []SiteConfig
	var fakes []*fakeSite
	for i := range 6 {
		f := newFake(fmt.Sprintf("S%d", i), 1)
		fakes = append(fakes, f)
		sc = append(sc, SiteConfig{Name: f.name, Backend: slowSubmitSite{f, &now, &most, &mu}, H: 1})
	}
	b, err := New(Options{Sites: sc, Planner: scriptPlanner{firstFit}, Store: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if _, err := b.Submit(context.Background(), req(1), t0); err != nil {
			t.Fatal(err)
		}
	}
	mustCycle(t, b, t0.Add(time.Second))
	if most < 2 {
		t.Errorf("at most %d sites submitted to at once, want them concurrent", most)
	}
	for _, j := range b.Jobs() {
		if j.State != Dispatched {
			t.Errorf("job %s is %s, want dispatched", j.ID, j.State)
		}
	}
	for _, f := range fakes {
		if len(f.jobs) != 1 {
			t.Errorf("site %s got %d jobs, want 1", f.name, len(f.jobs))
		}
	}
}
