package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

// Durable runs the store.Store contract against the stores newStore makes
// (a fresh, empty one per call; the suite closes none it did not close
// itself — newStore registers its own cleanup).
func Durable(t *testing.T, newStore func(*testing.T) store.Store) {
	ctx := context.Background()
	t.Run("jobs", func(t *testing.T) {
		JobStore(t, func(t *testing.T) bridge.Store { return newStore(t) })
	})

	t.Run("values", func(t *testing.T) {
		s := newStore(t)
		for k, v := range map[string]string{"task/a": "1", "task/b": "2", "task_c": "3", "task%d": "4", "tas": "5", "u": ""} {
			if err := s.SetValue(ctx, k, []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SetValue(ctx, "", []byte("x")); err == nil {
			t.Error("SetValue with an empty key succeeded")
		}
		if err := s.SetValue(ctx, "task/a", []byte("one")); err != nil {
			t.Fatal(err)
		}
		v, ok, err := s.Value(ctx, "task/a")
		if err != nil || !ok || string(v) != "one" {
			t.Fatalf("Value(task/a) = %q %v %v, want one", v, ok, err)
		}
		if v, ok, err := s.Value(ctx, "u"); err != nil || !ok || len(v) != 0 {
			t.Fatalf("Value(u) = %q %v %v, want an empty value that exists", v, ok, err)
		}
		if _, ok, err := s.Value(ctx, "none"); err != nil || ok {
			t.Fatalf("Value(none) ok=%v err=%v, want not found and no error", ok, err)
		}
		got, err := s.Values(ctx, "task/")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || string(got["task/a"]) != "one" || string(got["task/b"]) != "2" {
			t.Fatalf("Values(task/) = %q", got)
		}
		if got, _ := s.Values(ctx, "task%"); len(got) != 1 {
			t.Fatalf("Values(task%%) = %q: %% must be literal", got)
		}
		if got, _ := s.Values(ctx, "task"); len(got) != 4 {
			t.Fatalf("Values(task) = %q, want the 4 keys starting with task", got)
		}
		if err := s.DeleteValue(ctx, "task/a"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteValue(ctx, "never"); err != nil {
			t.Fatalf("DeleteValue of a missing key: %v", err)
		}
		if _, ok, _ := s.Value(ctx, "task/a"); ok {
			t.Fatal("a deleted value is still there")
		}
	})

	t.Run("site health", func(t *testing.T) {
		s := newStore(t)
		at := T0
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(s.RecordProbe(ctx, store.SiteProbe{Site: "A", Time: at, Nodes: 10, FreeNodes: 4, Queued: 2, Running: 3,
			Link: &store.Link{BytesPerSec: 1e6, Latency: 5 * time.Millisecond}}))
		must(s.RecordProbe(ctx, store.SiteProbe{Site: "A", Time: at.Add(time.Minute), Err: "ssh: connection refused"}))
		must(s.RecordProbe(ctx, store.SiteProbe{Site: "A", Time: at.Add(2 * time.Minute), Err: "ssh: connection refused"}))
		must(s.RecordProbe(ctx, store.SiteProbe{Site: "B", Time: at, Err: "never answered"}))
		must(s.SetTrust(ctx, "A", 0.75, at))
		must(s.SetTrustRecent(ctx, "B", 0.5, store.Recent{Completed: 1.5, Failed: 0.25, At: at, Folded: store.Counts{Completed: 2, Failed: 1}}))
		for _, bad := range []error{
			s.RecordProbe(ctx, store.SiteProbe{Time: at}),
			s.RecordProbe(ctx, store.SiteProbe{Site: "A"}),
			s.RecordProbe(ctx, store.SiteProbe{Site: "A", Time: at, Nodes: -1}),
			s.RecordProbe(ctx, store.SiteProbe{Site: "A", Time: at, Link: &store.Link{}}),
			s.SetTrust(ctx, "A", -1, at),
			s.SetTrust(ctx, "", 1, at),
		} {
			if !errors.Is(bad, bridge.ErrBadRequest) {
				t.Errorf("a bad site write gave %v, want bridge.ErrBadRequest", bad)
			}
		}
		// Outcomes are counted once, by the Put that first stores them.
		j := Job("done1", "n", bridge.Running, "A", "C")
		MustPut(t, s, j)
		j.State = bridge.Completed
		MustPut(t, s, j)
		MustPut(t, s, j)
		f := Job("fail1", "n", bridge.Failed, "A")
		f.SiteFault = true
		MustPut(t, s, f)
		MustPut(t, s, Job("fail2", "n", bridge.Failed, "A")) // the command's fault: not counted
		hs, err := s.SiteHealth(ctx)
		must(err)
		by := map[string]store.SiteHealth{}
		for _, h := range hs {
			by[h.Site] = h
		}
		if len(hs) != 3 {
			t.Fatalf("SiteHealth = %+v, want A, B and C", hs)
		}
		a := by["A"]
		if a.Nodes != 10 || a.FreeNodes != 4 || a.Queued != 2 || a.Running != 3 || !a.LastOK.Equal(at) ||
			!a.LastProbe.Equal(at.Add(2*time.Minute)) || a.LastErr != "ssh: connection refused" || a.Outages != 1 {
			t.Errorf("A = %+v", a)
		}
		if a.Link == nil || a.Link.BytesPerSec != 1e6 || a.Link.Latency != 5*time.Millisecond || !a.LinkAt.Equal(at) {
			t.Errorf("A's link = %+v at %v", a.Link, a.LinkAt)
		}
		if a.Trust == nil || *a.Trust != 0.75 || !a.TrustAt.Equal(at) || a.Completed != 1 || a.Failed != 1 {
			t.Errorf("A's trust %v at %v, outcomes %d/%d; want 0.75, 1 completed, 1 failed", a.Trust, a.TrustAt, a.Completed, a.Failed)
		}
		b := by["B"]
		if b.Outages != 1 || !b.LastOK.IsZero() || b.Recent == nil || b.Recent.Completed != 1.5 || b.Recent.Folded.Failed != 1 || *b.Trust != 0.5 {
			t.Errorf("B = %+v recent %+v", b, b.Recent)
		}
		if c := by["C"]; c.Completed != 1 || !c.LastProbe.IsZero() || c.Trust != nil {
			t.Errorf("C = %+v", c)
		}
	})

	t.Run("reservations", func(t *testing.T) {
		s := newStore(t)
		j := Job("r1", "n", bridge.Queued)
		j.Req.Nodes = 8
		j.Resv = &bridge.Reservation{State: bridge.ResvAdmitted, Earliest: T0.Add(time.Hour), Latest: T0.Add(2 * time.Hour)}
		MustPut(t, s, j)
		k := Job("r0", "n", bridge.Queued)
		k.Resv = &bridge.Reservation{State: bridge.ResvReleased, Earliest: T0, Latest: T0.Add(time.Hour)}
		MustPut(t, s, k)
		all, err := s.Reservations(ctx, false)
		if err != nil || len(all) != 2 || all[0].Job != "r0" || all[1].Job != "r1" || all[1].Nodes != 8 {
			t.Fatalf("Reservations(all) = %+v %v", all, err)
		}
		j.Resv.State, j.Resv.Site, j.Resv.Start, j.Resv.Native = bridge.ResvBound, "A", T0.Add(90*time.Minute), "resv.7"
		MustPut(t, s, j)
		act, err := s.Reservations(ctx, true)
		if err != nil || len(act) != 1 || act[0].State != bridge.ResvBound || act[0].Site != "A" || !act[0].Start.Equal(T0.Add(90*time.Minute)) || act[0].Native != "resv.7" {
			t.Fatalf("Reservations(active) = %+v %v", act, err)
		}
	})

	t.Run("idempotency keys", func(t *testing.T) {
		s := newStore(t)
		k1 := Job("k1", "n", bridge.Queued)
		k1.Req.IdempotencyKey = "key-a"
		k2 := Job("k2", "n", bridge.Queued)
		k2.Req.IdempotencyKey = "key-a"
		k3 := Job("k3", "n", bridge.Queued)
		k3.Req.IdempotencyKey = "key-b"
		el := Job("k3_1", "n", bridge.Queued)
		el.Req.IdempotencyKey, el.Parent = "key-c", "k3"
		for _, j := range []*bridge.Job{k1, k2, k3, el, Job("k4", "n", bridge.Queued)} {
			MustPut(t, s, j)
		}
		got, err := s.IdempotencyKeys(ctx, time.Now().Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"key-a": "k1", "key-b": "k3"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("IdempotencyKeys = %v, want %v", got, want)
		}
		if got, _ := s.IdempotencyKeys(ctx, time.Now().Add(time.Hour)); len(got) != 0 {
			t.Fatalf("IdempotencyKeys since the future = %v", got)
		}
	})

	t.Run("match ids", func(t *testing.T) {
		s := newStore(t)
		for _, id := range []string{"gx-1", "gx-12", "gy-21", "g%_1"} {
			MustPut(t, s, Job(id, "n", bridge.Queued))
		}
		for q, want := range map[string][]string{"gx-": {"gx-1", "gx-12"}, "1": {"gx-1", "gy-21", "g%_1"}, "%_": nil, "g%_": {"g%_1"}, "zz": nil} {
			got, err := s.MatchIDs(ctx, q, 0)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("MatchIDs(%q) = %v %v, want %v", q, got, err, want)
			}
		}
		if got, _ := s.MatchIDs(ctx, "g", 2); len(got) != 2 {
			t.Errorf("MatchIDs limit 2 gave %v", got)
		}
	})

	t.Run("prune", func(t *testing.T) {
		s := newStore(t)
		MustPut(t, s, Job("old-done", "n", bridge.Completed, "A"))
		MustPut(t, s, Job("old-live", "n", bridge.Running, "A"))
		n, err := s.Prune(ctx, time.Now().Add(time.Hour))
		if err != nil || n != 1 {
			t.Fatalf("Prune = %d %v, want 1", n, err)
		}
		if got := IDs(MustList(t, s, bridge.Filter{})); !slices.Equal(got, []string{"old-live"}) {
			t.Fatalf("after Prune: %v", got)
		}
		if hs, _ := s.SiteHealth(ctx); len(hs) != 1 || hs[0].Completed != 1 {
			t.Fatalf("Prune lowered the outcome counts: %+v", hs)
		}
	})

	t.Run("health", func(t *testing.T) {
		s := newStore(t)
		if err := s.Health(ctx); err != nil {
			t.Fatalf("Health of a new store: %v", err)
		}
		if s.Where() == "" {
			t.Fatal("Where is empty")
		}
	})

	t.Run("concurrent puts", func(t *testing.T) {
		s := newStore(t)
		var wg sync.WaitGroup
		errc := make(chan error, 16)
		for w := range 16 {
			wg.Go(func() {
				for i := range 20 {
					j := Job(fmt.Sprintf("c%02d-%02d", w, i), "n", bridge.Queued)
					if err := s.Put(ctx, j); err != nil {
						errc <- err
						return
					}
					j.State = bridge.Running
					j.Comps = []bridge.Component{{Site: "A", Nodes: 1}}
					if err := s.Put(ctx, j); err != nil {
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
		if n := len(MustList(t, s, bridge.Filter{Site: "A", States: []bridge.JobState{bridge.Running}})); n != 320 {
			t.Fatalf("%d running jobs at A, want 320", n)
		}
	})

	t.Run("usage", func(t *testing.T) {
		Usage(t, newStore(t))
	})

	t.Run("dump and load", func(t *testing.T) {
		DumpAcross(t, newStore, newStore)
	})

	t.Run("closed", func(t *testing.T) {
		s := newStore(t)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, Job("x", "n", bridge.Queued)); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("Put after Close = %v, want ErrClosed", err)
		}
		if err := s.Health(ctx); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("Health after Close = %v, want ErrClosed", err)
		}
	})
}

// Fill puts a bit of everything into s: jobs in every kind of state with
// events, a reservation, values and site records.
func Fill(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	MustPut(t, s, FullJob("f-full"))
	for i := range 30 {
		st := []bridge.JobState{bridge.Queued, bridge.Running, bridge.Completed}[i%3]
		j := Job(fmt.Sprintf("f-%02d", i), fmt.Sprintf("n%d", i%4), st, "A")
		if i == 7 {
			j.Resv = &bridge.Reservation{State: bridge.ResvBound, Earliest: T0, Latest: T0.Add(time.Hour), Site: "A", Start: T0.Add(time.Minute), Native: "r.1"}
		}
		if st == bridge.Completed && i < 10 {
			// An ended job charged to its owner's account (bridge.UsageStore).
			if err := s.PutCharged(ctx, j, bridge.Charge{User: "alice", NodeSeconds: float64(100 * i), At: T0.Add(time.Duration(i) * time.Minute), HalfLife: time.Hour}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		MustPut(t, s, j)
	}
	for _, err := range []error{
		s.SetValue(ctx, "broker.id_prefix", []byte("gabc-")),
		s.SetValue(ctx, "bin", []byte{0, 1, 2, 255}),
		s.RecordProbe(ctx, store.SiteProbe{Site: "A", Time: T0, Nodes: 4, Link: &store.Link{BytesPerSec: 2e6}}),
		s.SetTrustRecent(ctx, "A", 0.9, store.Recent{Completed: 3, At: T0, Folded: store.Counts{Completed: 3}}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for range 150 {
		if _, err := s.NextID(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// DumpAcross fills a store made by from, dumps it, loads the dump into an
// empty store made by to, and checks that everything arrived: jobs with
// their events in order, values, site records, reservations, and job
// numbers that do not repeat. It also checks that a dump is refused by a
// store that is not empty and that a truncated dump loads nothing.
func DumpAcross(t *testing.T, from, to func(*testing.T) store.Store) {
	ctx := context.Background()
	a := from(t)
	Fill(t, a)
	var buf bytes.Buffer
	rep, err := a.Dump(ctx, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Jobs != 31 {
		t.Fatalf("dump report: %d jobs, want 31", rep.Jobs)
	}
	dump := buf.Bytes()

	// A truncated dump is refused and leaves nothing behind.
	b := to(t)
	cut := dump[:len(dump)*2/3]
	if _, err := b.LoadDump(ctx, bytes.NewReader(cut)); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("loading a truncated dump: %v, want ErrCorrupt", err)
	}
	if js := MustList(t, b, bridge.Filter{}); len(js) != 0 {
		t.Fatalf("a refused dump left %d jobs", len(js))
	}
	if _, err := b.LoadDump(ctx, bytes.NewReader([]byte("SQLite format 3\x00garbage"))); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("loading garbage: %v, want ErrCorrupt", err)
	}

	rep, err = b.LoadDump(ctx, bytes.NewReader(dump))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Jobs != 31 {
		t.Fatalf("load report: %d jobs, want 31", rep.Jobs)
	}
	wantJobs := MustList(t, a, bridge.Filter{Events: true})
	gotJobs := MustList(t, b, bridge.Filter{Events: true})
	if !reflect.DeepEqual(gotJobs, wantJobs) {
		t.Fatalf("jobs after the load differ:\n got %d %v\nwant %d %v", len(gotJobs), IDs(gotJobs), len(wantJobs), IDs(wantJobs))
	}
	wh, _ := a.SiteHealth(ctx)
	gh, _ := b.SiteHealth(ctx)
	if !reflect.DeepEqual(gh, wh) {
		t.Fatalf("site health after the load:\n got %+v\nwant %+v", gh, wh)
	}
	wv, _ := a.Values(ctx, "")
	gv, _ := b.Values(ctx, "")
	delete(wv, "store.health_probe")
	delete(gv, "store.health_probe")
	if !reflect.DeepEqual(gv, wv) {
		t.Fatalf("values after the load: got %q, want %q", gv, wv)
	}
	wu, err := a.Usage(ctx)
	if err != nil || len(wu) != 1 {
		t.Fatalf("the filled store's accounted use: %+v %v", wu, err)
	}
	if gu, err := b.Usage(ctx); err != nil || !reflect.DeepEqual(gu, wu) {
		t.Fatalf("accounted use after the load: got %+v %v, want %+v", gu, err, wu)
	}
	wr, _ := a.Reservations(ctx, false)
	gr, _ := b.Reservations(ctx, false)
	if len(wr) != 1 || !reflect.DeepEqual(gr, wr) {
		t.Fatalf("reservations after the load: got %+v, want %+v", gr, wr)
	}
	n, err := b.NextID(ctx)
	if err != nil || n <= 150 {
		t.Fatalf("NextID after the load = %d %v: the counter must carry over (150 were handed out)", n, err)
	}
	// A new job goes after the loaded ones.
	MustPut(t, b, Job("after-load", "n", bridge.Queued))
	if js := MustList(t, b, bridge.Filter{Newest: true, Limit: 1}); len(js) != 1 || js[0].ID != "after-load" {
		t.Fatalf("newest job after the load = %v", IDs(js))
	}
	if _, err := b.LoadDump(ctx, bytes.NewReader(dump)); !errors.Is(err, store.ErrNotEmpty) {
		t.Fatalf("loading into a store with jobs: %v, want ErrNotEmpty", err)
	}
}
