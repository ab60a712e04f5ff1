package bridge

import (
	"context"
	"errors"
	"testing"
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
	if _, err := m.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
}
