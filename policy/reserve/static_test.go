package reserve

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestStaticRoom(t *testing.T) {
	s := NewStatic(units("A"), StaticMinCost, 1)
	cases := []struct {
		q      Request
		ok     bool
		start  int
		reason string
	}{
		{req("q1", 0, 10, 10), true, 0, "A: booked from"},
		{req("q2", 5, 15, 10), false, 0, "no room: the reservation queues of A are full over the window"},
		{req("q3", 5, 25, 10), true, 10, "A: booked from"}, // waits for q1's hold
		{req("q4", 5, 25, 10, "B"), false, 0, "no candidate resource: none of the allowed resources [B] exists"},
		{req("q1", 50, 60, 5), false, 0, "invalid request: id q1 is already admitted"},
	}
	for _, c := range cases {
		b, ok, why := s.Admit(c.q, at(0), nil)
		if ok != c.ok || !strings.HasPrefix(why, c.reason) || (ok && (!b.Start.Equal(at(c.start)) || b.Resource != "A")) {
			t.Errorf("Admit(%s) = %+v %v %q, want %v from %d %q", c.q.ID, b, ok, why, c.ok, c.start, c.reason)
		}
	}
	s.Remove("q1")
	s.Remove("q3")
	s.Remove("q3")
	if _, ok, why := s.Admit(req("q2", 5, 15, 10), at(0), nil); !ok {
		t.Errorf("after q1 and q3 left: %s", why)
	}
}

func TestStaticMinCost(t *testing.T) {
	run := func(r, j string, exp, el int) Running {
		return Running{Resource: r, Job: j, Expected: sec(exp), Elapsed: sec(el)}
	}
	// At 0, A's job has run 10 s and B's 3 s, both due at 90+: at the start
	// (50) preempting them would cost 60 and 53; B is booked.
	s := NewStatic(units("A", "B"), StaticMinCost, 1)
	b, ok, why := s.Admit(req("q", 50, 70, 15), at(0), []Running{run("A", "a", 100, 10), run("B", "b", 100, 3)})
	if !ok || b.Resource != "B" || b.Cost != 53 || !slices.Equal(b.Preempt, []string{"b"}) {
		t.Fatalf("Admit = %+v %v %s", b, ok, why)
	}
	// At 50 B runs another job, 3 s from its end: it waits (slack 5).
	got, err := s.Bind("q", at(50), []Running{run("A", "a2", 100, 1), run("B", "b2", 10, 7)})
	if err != nil || got.Resource != "B" || !got.Start.Equal(at(53)) || got.Cost != 0 || len(got.Preempt) != 0 {
		t.Errorf("Bind = %+v %v", got, err)
	}
	// A job due to end before the start costs nothing: A is booked.
	s = NewStatic(units("A", "B"), StaticMinCost, 1)
	b, ok, _ = s.Admit(req("q", 50, 70, 15), at(0), []Running{run("A", "a", 30, 10), run("B", "b", 100, 3)})
	if !ok || b.Resource != "A" || b.Cost != 0 {
		t.Errorf("Admit = %+v", b)
	}
	if _, err := s.Bind("zz", at(50), nil); !errors.Is(err, ErrUnknown) {
		t.Errorf("unknown: %v", err)
	}
	if _, err := s.Bind("q", at(56), nil); !errors.Is(err, ErrTooLate) {
		t.Errorf("late: %v", err)
	}
}

func TestStaticRandomSeeded(t *testing.T) {
	rs := units("A", "B", "C", "D", "E", "F", "G", "H")
	picks := func(mode StaticMode, seed uint64) []string {
		s := NewStatic(rs, mode, seed)
		var out []string
		for i := range 20 {
			b, ok, why := s.Admit(req(fmt.Sprintf("q%d", i), 10*i, 10*i+10, 5), at(0), nil)
			if !ok {
				t.Fatalf("Admit: %s", why)
			}
			out = append(out, b.Resource)
		}
		return out
	}
	a, b, c := picks(StaticRandom, 7), picks(StaticRandom, 7), picks(StaticRandom, 8)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different picks: %v %v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 7 and 8 picked alike: %v", a)
	}
	distinct := map[string]bool{}
	for _, r := range a {
		distinct[r] = true
	}
	if len(distinct) < 3 {
		t.Errorf("r_schedule picked only %v in 20 tries", a)
	}
	// m_schedule, with nothing running, takes the lowest index every time.
	for _, r := range picks(StaticMinCost, 7) {
		if r != "A" {
			t.Fatalf("m_schedule picked %s", r)
		}
	}
	// r_schedule only picks among resources with room.
	s := NewStatic(units("A", "B"), StaticRandom, 3)
	s.Admit(req("x", 0, 10, 10, "A"), at(0), nil)
	for i := range 10 {
		b, ok, _ := s.Admit(req(fmt.Sprintf("y%d", i), 0, 10, 10), at(0), nil)
		if ok && b.Resource != "B" || i == 0 && !ok {
			t.Fatalf("y%d: %+v %v", i, b, ok)
		}
	}
	if StaticRandom.String() != "SRRM_r" || StaticMinCost.String() != "SRRM_m" {
		t.Error("mode names")
	}
}
