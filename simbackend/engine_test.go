package simbackend

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

var epoch0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestEngineOrdersByTimeThenClassThenInsertion(t *testing.T) {
	e := NewEngine(epoch0, 1)
	var got []string
	add := func(sec int, class int, name string) {
		e.AtClass(epoch0.Add(time.Duration(sec)*time.Second), class, func() { got = append(got, name) })
	}
	add(5, ClassDefault, "c")
	add(1, ClassDefault, "a")
	add(5, ClassDefault, "d")
	add(5, ClassLate, "e")
	add(5, ClassEarly, "b")
	add(9, ClassDefault, "f")
	e.Run()
	if s := strings.Join(got, ""); s != "abcdef" {
		t.Fatalf("order = %q, want abcdef", s)
	}
	if now := e.Now(); !now.Equal(epoch0.Add(9 * time.Second)) {
		t.Fatalf("clock = %v, want epoch+9s", now)
	}
}

func TestEngineCancel(t *testing.T) {
	e := NewEngine(epoch0, 1)
	var got []int
	var evs []*Event
	for i := 0; i < 10; i++ {
		evs = append(evs, e.After(time.Duration(10-i)*time.Second, func() { got = append(got, i) }))
	}
	if !evs[3].Cancel() || !e.Cancel(evs[7]) {
		t.Fatal("first cancel should succeed")
	}
	if evs[3].Cancel() {
		t.Fatal("second cancel should be a no-op")
	}
	e.Run()
	want := []int{9, 8, 6, 5, 4, 2, 1, 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	if evs[0].Cancel() {
		t.Fatal("cancel after run should report false")
	}
}

func TestEngineCallbackMaySchedule(t *testing.T) {
	e := NewEngine(epoch0, 1)
	n := 0
	var tick func()
	tick = func() {
		n++
		if n < 5 {
			e.After(time.Second, tick)
		}
	}
	e.After(0, tick)
	e.Run()
	if n != 5 || !e.Now().Equal(epoch0.Add(4*time.Second)) {
		t.Fatalf("n=%d now=%v", n, e.Now())
	}
	// Scheduling in the past runs at the current time.
	var at time.Time
	e.At(epoch0, func() { at = e.Now() })
	e.Run()
	if !at.Equal(epoch0.Add(4 * time.Second)) {
		t.Fatalf("past event ran at %v", at)
	}
}

func TestEngineRunUntilAndPeek(t *testing.T) {
	e := NewEngine(epoch0, 1)
	ran := 0
	e.After(2*time.Second, func() { ran++ })
	e.After(4*time.Second, func() { ran++ })
	e.RunUntil(epoch0.Add(3 * time.Second))
	if ran != 1 || !e.Now().Equal(epoch0.Add(3*time.Second)) {
		t.Fatalf("ran=%d now=%v", ran, e.Now())
	}
	if next, ok := e.Peek(); !ok || !next.Equal(epoch0.Add(4*time.Second)) {
		t.Fatalf("peek = %v %v", next, ok)
	}
	e.RunUntil(epoch0.Add(4 * time.Second))
	if ran != 2 {
		t.Fatalf("event at the limit did not run")
	}
	if _, ok := e.Peek(); ok {
		t.Fatal("peek on empty engine")
	}
}

// randomSchedule builds a random cascade of events from the engine's seeded
// source and logs every firing.
func randomSchedule(seed uint64) string {
	e := NewEngine(epoch0, seed)
	var b strings.Builder
	var spawn func(id, depth int)
	spawn = func(id, depth int) {
		d := time.Duration(e.Rand().IntN(5)) * time.Second
		ev := e.After(d, func() {
			fmt.Fprintf(&b, "%d %d\n", e.Now().Sub(epoch0)/time.Second, id)
			if depth < 4 {
				for k := 0; k < e.Rand().IntN(3); k++ {
					spawn(id*10+k, depth+1)
				}
			}
		})
		if e.Rand().IntN(7) == 0 {
			ev.Cancel()
		}
	}
	for i := 1; i <= 20; i++ {
		spawn(i, 0)
	}
	e.Run()
	return b.String()
}

func TestEngineDeterministic(t *testing.T) {
	a, b := randomSchedule(42), randomSchedule(42)
	if a != b {
		t.Fatal("same seed gave different schedules")
	}
	if a == randomSchedule(43) {
		t.Fatal("different seeds gave the same schedule (suspicious)")
	}
	if strings.Count(a, "\n") < 20 {
		t.Fatalf("schedule too short: %q", a)
	}
}

func TestEngineFollowAdvancesScaledWallTime(t *testing.T) {
	e := NewEngine(epoch0, 1)
	fired := false
	e.After(10*time.Second, func() { fired = true })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	ticks := 0
	err := e.Follow(ctx, 1000, 20*time.Millisecond, func(time.Time) { ticks++ })
	if err == nil {
		t.Fatal("Follow should return ctx.Err()")
	}
	// 300 ms of wall time at ×1000 is ~300 s of virtual time.
	if !fired || ticks == 0 || e.Now().Sub(epoch0) < 100*time.Second {
		t.Fatalf("fired=%v ticks=%d virtual elapsed=%v", fired, ticks, e.Now().Sub(epoch0))
	}
}
