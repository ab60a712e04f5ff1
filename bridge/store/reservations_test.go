package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

// A job's reservation is kept in the reservations table in step with the
// job, survives a reopen, and --active leaves out the ended ones; the probe
// counters count good and failed probes.
func TestReservationsTable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gridsub.db")
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	mk := func(id string, et time.Duration) *bridge.Job {
		return &bridge.Job{ID: id, State: bridge.Reserved, Submit: t0, Req: bridge.Request{Name: id, Nodes: 4},
			Resv: &bridge.Reservation{Earliest: t0.Add(et), Latest: t0.Add(et + time.Hour), State: bridge.ResvAdmitted, Name: bridge.ResvName(id)}}
	}
	late, early, plain := mk("g2", 2*time.Hour), mk("g1", time.Hour), &bridge.Job{ID: "g3", State: bridge.Queued, Submit: t0}
	for _, j := range []*bridge.Job{late, early, plain} {
		if err := s.Put(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	early.Resv.State, early.Resv.Site, early.Resv.Start, early.Resv.Native = bridge.ResvBound, "A", t0.Add(time.Hour+time.Minute), "resv7"
	late.State, late.Resv.State, late.Resv.Reason = bridge.Failed, bridge.ResvFailed, "site A failed"
	for _, j := range []*bridge.Job{early, late} {
		if err := s.Put(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	// Two outages: one of two failed probes, then (after a good probe)
	// one of one; a site first seen failing starts with one.
	for _, e := range []string{"", "refused", "refused", "", "timeout"} {
		if err := s.RecordProbe(ctx, store.SiteProbe{Site: "A", Time: t0, Nodes: 8, Err: e}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordProbe(ctx, store.SiteProbe{Site: "B", Time: t0, Err: "refused"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := s.Reservations(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Job != "g1" || all[1].Job != "g2" {
		t.Fatalf("all reservations %+v; want g1 then g2 (earliest window first), no row for the plain job", all)
	}
	g1 := all[0]
	if g1.State != bridge.ResvBound || g1.Site != "A" || g1.Native != "resv7" || g1.Nodes != 4 ||
		!g1.Start.Equal(t0.Add(time.Hour+time.Minute)) || !g1.Earliest.Equal(t0.Add(time.Hour)) || !g1.Latest.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("g1 row %+v", g1)
	}
	if all[1].State != bridge.ResvFailed || all[1].Reason != "site A failed" || !all[1].Start.IsZero() {
		t.Fatalf("g2 row %+v", all[1])
	}
	active, err := s.Reservations(ctx, true)
	if err != nil || len(active) != 1 || active[0].Job != "g1" {
		t.Fatalf("active reservations %+v, %v; want g1 only", active, err)
	}
	if a, b := health(t, s, "A"), health(t, s, "B"); a.Outages != 2 || b.Outages != 1 {
		t.Fatalf("outages A %d B %d; want 2 and 1", a.Outages, b.Outages)
	}
	got, err := s.Get(ctx, "g1")
	if err != nil || got.Resv == nil || got.Resv.Native != "resv7" {
		t.Fatalf("g1 from the jobs table: %+v, %v", got, err)
	}
}
