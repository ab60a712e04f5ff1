package pgstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
	"github.com/gridsub/gridsub/bridge/store/pgstore"
	"github.com/gridsub/gridsub/bridge/store/pgstore/pgtest"
	"github.com/gridsub/gridsub/bridge/store/storetest"
)

// TestLeaseFencing: one leader at a time; a follower takes over once the
// lease expires, with a higher epoch; the former leader (paused: it did not
// renew) can then write nothing — no job, no value, no id block — and
// cannot renew; a follower's submissions are handed to the leader.
func TestLeaseFencing(t *testing.T) {
	ctx := context.Background()
	db := pgtest.DB(t)
	open := func() *pgstore.Postgres {
		s, err := pgstore.Open(ctx, pgstore.Config{DSN: db.DSN(), PasswordFile: db.Server.PasswordFile}, pgstore.Options{IDBlock: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	const ttl = 2 * time.Second
	la, lb := a.NewLease("A", ttl), b.NewLease("B", ttl)
	if ok, err := la.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("A's first campaign: %v %v", ok, err)
	}
	if ok, err := lb.TryAcquire(ctx); ok || err != nil {
		t.Fatalf("B took a held lease: %v %v", ok, err)
	}
	if err := la.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	// B is a follower: its submissions are handed off.
	b.SetHandoff(true)
	storetest.MustPut(t, b, storetest.Job("from-b", "n", bridge.Queued))
	j := storetest.Job("from-b2", "n", bridge.Queued)
	j.Resv = &bridge.Reservation{State: bridge.ResvAdmitted, Earliest: storetest.T0, Latest: storetest.T0.Add(time.Hour)} // the transactional path
	storetest.MustPut(t, b, j)
	storetest.MustPut(t, a, storetest.Job("from-a", "n", bridge.Queued)) // the leader's own: not handed off
	ids, err := a.Handoffs(ctx)
	if err != nil || !slices.Equal(ids, []string{"from-b", "from-b2"}) {
		t.Fatalf("Handoffs = %v %v", ids, err)
	}
	if err := a.DoneHandoffs(ctx, ids); err != nil {
		t.Fatal(err)
	}
	if ids, _ := a.Handoffs(ctx); len(ids) != 0 {
		t.Fatalf("handoffs left after DoneHandoffs: %v", ids)
	}
	st, err := lb.Status(ctx)
	if err != nil || st.Leader != "A" || st.Epoch != la.Epoch() {
		t.Fatalf("Status = %+v %v", st, err)
	}
	lb.Heartbeat(ctx, "/b.sock")
	la.Heartbeat(ctx, "/a.sock")
	if st, _ := la.Status(ctx); !slices.Equal(st.Followers, []string{"B"}) {
		t.Fatalf("followers = %v, want [B]", st.Followers)
	}

	// A pauses (no renewal) past its lease; B takes over.
	epochA := la.Epoch()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := lb.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B never took the expired lease")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lb.Epoch() <= epochA {
		t.Fatalf("B's epoch %d, A's %d: a takeover must raise it", lb.Epoch(), epochA)
	}
	b.SetHandoff(false)
	// A resumes: every write is refused, nothing of it lands.
	for what, err := range map[string]error{
		"put":       a.Put(ctx, storetest.Job("late-a", "n", bridge.Queued)),
		"update":    a.Put(ctx, storetest.Job("from-a", "n", bridge.Running, "X")),
		"set value": a.SetValue(ctx, "k", []byte("v")),
		"probe":     a.RecordProbe(ctx, store.SiteProbe{Site: "X", Time: time.Now()}),
		"renew":     la.Renew(ctx),
	} {
		if !errors.Is(err, pgstore.ErrFenced) || !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("A's %s after the takeover: %v, want ErrFenced", what, err)
		}
	}
	if _, err := a.NextID(ctx); !errors.Is(err, pgstore.ErrFenced) {
		t.Errorf("A's NextID after the takeover: %v, want ErrFenced", err)
	}
	if _, err := b.Get(ctx, "late-a"); !errors.Is(err, bridge.ErrNotFound) {
		t.Fatalf("the fenced leader's job was stored: %v", err)
	}
	if got, _ := b.Get(ctx, "from-a"); got.State != bridge.Queued {
		t.Fatalf("the fenced leader's update was stored: %s", got.State)
	}
	// The new leader writes.
	storetest.MustPut(t, b, storetest.Job("by-b", "n", bridge.Queued))
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := la.TryAcquire(ctx); !ok || err != nil || la.Epoch() <= lb.Epoch() {
		t.Fatalf("A after B released: %v %v epoch %d", ok, err, la.Epoch())
	}
	storetest.MustPut(t, a, storetest.Job("by-a-again", "n", bridge.Queued))
}
