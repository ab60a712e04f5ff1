package daemon

import (
	"slices"
	"testing"
	"time"
)

// The schedules are evaluated on the virtual time handed in, never on the
// wall clock: "@every 10s" is due after ten virtual seconds however little
// wall time passed, and a task due several times over is run once.
func TestVClockDueOnVirtualTime(t *testing.T) {
	scheds, _, err := schedules(map[string]string{TaskBind: "@every 10s", TaskHealth: "@every 1m", TaskCleanup: "0 3 * * *"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	v0 := time.Date(2030, 5, 1, 0, 0, 0, 0, time.UTC) // nowhere near the wall clock
	v := newVClock(scheds, v0)
	if got := v.due(v0.Add(500 * time.Millisecond)); len(got) != 0 {
		t.Fatalf("at +0.5s: %v due", got)
	}
	if got := v.due(v0.Add(time.Second)); !slices.Equal(got, []string{TaskCycle}) {
		t.Fatalf("at +1s: %v, want the cycle (broker.interval 1s of virtual time)", got)
	}
	if got := v.due(v0.Add(10 * time.Second)); !slices.Equal(got, []string{TaskCycle, TaskBind}) {
		t.Fatalf("at +10s: %v", got)
	}
	// Ten virtual minutes in one step (one wall tick at a large scale):
	// each task once, next runs counted from now.
	got := v.due(v0.Add(10 * time.Minute))
	if !slices.Equal(got, []string{TaskCycle, TaskBind, TaskHealth, TaskTrust}) {
		t.Fatalf("at +10m: %v", got)
	}
	if got := v.due(v0.Add(10*time.Minute + 5*time.Second)); !slices.Equal(got, []string{TaskCycle}) {
		t.Fatalf("at +10m5s: %v", got)
	}
	// A cron spec on the virtual calendar: 03:00 of the virtual day.
	if got := v.due(v0.Add(3 * time.Hour)); !slices.Contains(got, TaskCleanup) {
		t.Fatalf("at virtual 03:00: %v lacks %s", got, TaskCleanup)
	}
	if got := v.due(v0.Add(4 * time.Hour)); slices.Contains(got, TaskCleanup) {
		t.Fatalf("at virtual 04:00 the daily cleanup ran again: %v", got)
	}
}
