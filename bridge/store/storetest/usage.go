package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

// Usage checks bridge.UsageStore on s (empty): a charge is added by the
// write that first stores a job final and by no other (not a write of a
// state that is not final, not a second write of a final job, not a job
// stored final before), charges decay to the latest of their times
// whatever order they arrive in, concurrent charges of one user are all
// kept, and a damaged account is an error naming it — which the next
// charge replaces without failing the job's write.
func Usage(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	const h = time.Hour
	charge := func(user string, ns float64, at time.Time) bridge.Charge {
		return bridge.Charge{User: user, NodeSeconds: ns, At: at, HalfLife: h}
	}
	want := func(user string, ns float64, at time.Time) {
		t.Helper()
		u, err := s.Usage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := u[user]
		if math.Abs(got.NodeSeconds-ns) > 1e-9*math.Max(1, ns) || !got.At.Equal(at) {
			t.Fatalf("%s's use is %v node-seconds at %v, want %v at %v (all: %+v)", user, got.NodeSeconds, got.At, ns, at, u)
		}
	}
	if u, err := s.Usage(ctx); err != nil || len(u) != 0 {
		t.Fatalf("an empty store's use: %v %v", u, err)
	}
	j := Job("u1", "n", bridge.Queued, "A")
	MustPut(t, s, j)
	j.State = bridge.Running
	if err := s.PutCharged(ctx, j, charge("alice", 100, T0.Add(h))); err != nil {
		t.Fatal(err)
	}
	if u, _ := s.Usage(ctx); len(u) != 0 {
		t.Fatalf("a running job was charged: %+v", u)
	}
	j.State = bridge.Completed
	if err := s.PutCharged(ctx, j, charge("alice", 100, T0.Add(h))); err != nil {
		t.Fatal(err)
	}
	want("alice", 100, T0.Add(h))
	j.Events = append(j.Events, bridge.Event{Time: T0.Add(h), Kind: "fetched"})
	if err := s.PutCharged(ctx, j, charge("alice", 100, T0.Add(h))); err != nil {
		t.Fatal(err)
	}
	want("alice", 100, T0.Add(h)) // the second write of a final job charges nothing
	// A job stored final at once; an hour later than the account.
	if err := s.PutCharged(ctx, Job("u2", "n", bridge.Failed), charge("alice", 50, T0.Add(2*h))); err != nil {
		t.Fatal(err)
	}
	want("alice", 100*0.5+50, T0.Add(2*h))
	// A job stored final before and charged now: nothing.
	MustPut(t, s, Job("u3", "n", bridge.Cancelled))
	if err := s.PutCharged(ctx, Job("u3", "n", bridge.Cancelled), charge("alice", 1e6, T0.Add(2*h))); err != nil {
		t.Fatal(err)
	}
	want("alice", 100*0.5+50, T0.Add(2*h))
	// Out of order: the later charge first.
	if err := s.PutCharged(ctx, Job("b1", "n", bridge.Completed), charge("bob", 10, T0.Add(3*h))); err != nil {
		t.Fatal(err)
	}
	if err := s.PutCharged(ctx, Job("b2", "n", bridge.Completed), charge("bob", 8, T0.Add(h))); err != nil {
		t.Fatal(err)
	}
	want("bob", 10+8*0.25, T0.Add(3*h))
	// Concurrent charges of one user: none lost.
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := range 10 {
				if err := s.PutCharged(ctx, Job(fmt.Sprintf("c%d-%d", w, i), "n", bridge.Completed), charge("carol", 1, T0)); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	want("carol", 80, T0)
	// A damaged account.
	if err := s.SetValue(ctx, bridge.UsageKeyPrefix+"dave", []byte("not a use")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Usage(ctx); !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), bridge.UsageKeyPrefix+"dave") {
		t.Fatalf("a damaged account: %v, want ErrCorrupt naming it", err)
	}
	if err := s.PutCharged(ctx, Job("d1", "n", bridge.Completed), charge("dave", 5, T0)); err != nil {
		t.Fatalf("a charge over a damaged account: %v", err)
	}
	want("dave", 5, T0)
	want("alice", 100*0.5+50, T0.Add(2*h))
}
