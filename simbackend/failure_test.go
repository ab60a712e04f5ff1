package simbackend

import (
	"errors"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// TestSiteFail: a failure loses the running jobs (one inside a reservation
// too) and the queued ones, starts nothing on the dead nodes, refuses work
// until Repair, keeps the reservation, and reports every change.
func TestSiteFail(t *testing.T) {
	var changes []backends.JobStatus
	e, s := newTestSite(t, 4, EASYOptions{}, func(st backends.JobStatus) { changes = append(changes, st) })
	run := mustSubmit(t, s, spec("run", 2, time.Hour, time.Hour))
	rid, err := s.CreateReservation(bg, &backends.ReservationSpec{Name: "r", Start: at(10), Duration: time.Hour, Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	in := spec("in", 2, time.Hour, time.Hour)
	in.Reservation = string(rid)
	inID := mustSubmit(t, s, in)
	queued := mustSubmit(t, s, spec("queued", 4, time.Minute, time.Minute))
	e.RunUntil(at(20))
	if got := st(t, s, inID); got.State != backends.StateRunning {
		t.Fatalf("reservation job: %+v", got)
	}
	changes = nil
	ids := s.Fail("power cut")
	if len(ids) != 3 || ids[0] != run || ids[1] != inID || ids[2] != queued {
		t.Fatalf("Fail failed %v, want %v %v %v", ids, run, inID, queued)
	}
	if _, err := s.Status(bg, []backends.JobID{run}); !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("a failed site answers: %v", err)
	}
	if down, why := s.Failed(); !down || why != "power cut" {
		t.Fatalf("Failed() = %v %q", down, why)
	}
	s.Repair()
	want := map[backends.JobID]string{run: "NodeFail", inID: "NodeFail", queued: "SiteFailed"}
	for id, why := range want {
		got := st(t, s, id)
		if got.State != backends.StateFailed || got.Reason != why || got.ExitCode != -1 || !got.End.Equal(at(20)) {
			t.Errorf("job %s: %+v, want failed %s at 20 s", id, got, why)
		}
	}
	if len(changes) != 3 {
		t.Fatalf("%d changes reported, want 3: %+v", len(changes), changes)
	}
	for _, c := range changes {
		if c.State != backends.StateFailed {
			t.Fatalf("a job changed to %v during the failure (nothing may start on dead nodes)", c.State)
		}
	}
	info, err := s.Info(bg)
	if err != nil || info.FreeNodes != 2 { // the active reservation still holds 2
		t.Fatalf("after repair: %+v %v", info, err)
	}
	again := spec("again", 2, time.Minute, time.Minute)
	again.Reservation = string(rid)
	id := mustSubmit(t, s, again)
	e.RunUntil(at(21))
	if got := st(t, s, id); got.State != backends.StateRunning {
		t.Fatalf("a job in the kept reservation after repair: %+v", got)
	}
	if ids := s.Fail(""); len(ids) != 1 || ids[0] != id {
		t.Fatalf("second failure: %v", ids)
	}
	if ids := s.Fail(""); len(ids) != 0 {
		t.Fatalf("failing a failed site failed %v", ids)
	}
}
