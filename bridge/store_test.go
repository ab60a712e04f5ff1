package bridge

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestMemStoreFilterAndCopies(t *testing.T) {
	ctx := context.Background()
	m := NewMemStore()
	mk := func(id string, st JobState, site string) *Job {
		j := &Job{ID: id, State: st, Req: Request{Name: "n" + id}, Events: []Event{{Kind: "submitted"}}}
		if site != "" {
			j.Comps = []Component{{Site: site, Nodes: 1}}
		}
		if err := m.Put(ctx, j); err != nil {
			t.Fatal(err)
		}
		return j
	}
	a := mk("g1", Running, "A")
	mk("g2", Queued, "")
	mk("g3", Running, "B")
	a.State = Failed // a caller's later change must not leak into the store
	got, _ := m.List(ctx, Filter{States: []JobState{Running}})
	if len(got) != 2 || got[0].ID != "g1" || got[1].ID != "g3" || got[0].Events != nil {
		t.Fatalf("running: %+v", got)
	}
	if got, _ = m.List(ctx, Filter{Site: "B", Events: true}); len(got) != 1 || got[0].ID != "g3" || len(got[0].Events) != 1 {
		t.Fatalf("site B: %+v", got)
	}
	if got, _ = m.List(ctx, Filter{After: "g1", Limit: 1}); len(got) != 1 || got[0].ID != "g2" {
		t.Fatalf("paging: %+v", got)
	}
	if got, _ = m.List(ctx, Filter{Newest: true, Limit: 2}); len(got) != 2 || got[0].ID != "g3" || got[1].ID != "g2" {
		t.Fatalf("newest first: %+v", got)
	}
	if got, _ = m.List(ctx, Filter{Newest: true, After: "g2", States: []JobState{Running}}); len(got) != 1 || got[0].ID != "g1" {
		t.Fatalf("newest first after g2, running: %+v", got)
	}
	if _, err := m.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	if _, err := m.List(ctx, Filter{After: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown cursor: %v", err)
	}
	// Deep copies: a caller changing what it put or got never reaches the store.
	r := &Job{ID: "g9", Req: Request{Command: []string{"a"}, Env: map[string]string{"K": "v"}}}
	_ = m.Put(ctx, r)
	r.Req.Command[0], r.Req.Env["K"] = "changed", "changed"
	got2, _ := m.Get(ctx, "g9")
	got2.Req.Env["K"] = "also changed"
	again, _ := m.Get(ctx, "g9")
	if again.Req.Command[0] != "a" || again.Req.Env["K"] != "v" {
		t.Fatalf("store shares the request with callers: %+v", again.Req)
	}
}

// slowStore records how many Puts run at once.
type slowStore struct {
	*MemStore
	mu       sync.Mutex
	now, max int
}

func (s *slowStore) Put(ctx context.Context, j *Job) error {
	s.mu.Lock()
	s.now++
	s.max = max(s.max, s.now)
	s.mu.Unlock()
	time.Sleep(5 * time.Millisecond) // an fsync
	s.mu.Lock()
	s.now--
	s.mu.Unlock()
	return s.MemStore.Put(ctx, j)
}

// TestConcurrentSubmitsReachTheStoreTogether: Submit does not hold the
// broker's lock across Store.Put, so a store that batches commits can batch
// concurrent submissions; none is lost.
func TestConcurrentSubmitsReachTheStoreTogether(t *testing.T) {
	st := &slowStore{MemStore: NewMemStore()}
	b := brokerOn(t, st, newFake("A", 4))
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Submit(context.Background(), req(1), t0); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if st.max < 2 {
		t.Fatalf("at most %d Put at a time: submissions are serialised", st.max)
	}
	jobs, _ := st.List(context.Background(), Filter{})
	if len(jobs) != 16 || len(b.Jobs()) != 16 {
		t.Fatalf("stored %d, broker knows %d, want 16", len(jobs), len(b.Jobs()))
	}
}
