package reserve

import (
	"slices"
	"strings"
	"testing"
)

// SRRM's failure rule: everything booked on the failed resource fails,
// running or waiting, however much room the other resources have; DRRM's
// rule (figure 2) moves the unbound ones that still fit.
func TestStaticFailResource(t *testing.T) {
	s := NewStatic(units("A", "B"), StaticMinCost, 1)
	for _, q := range []Request{req("q1", 0, 10, 10, "A"), req("q2", 20, 40, 10, "A"), req("q3", 0, 10, 10, "B")} {
		if _, ok, why := s.Admit(q, at(0), nil); !ok {
			t.Fatalf("Admit(%s): %s", q.ID, why)
		}
	}
	if got := s.FailResource("A"); !slices.Equal(got, []string{"q1", "q2"}) {
		t.Errorf("FailResource(A) = %v, want [q1 q2] (both booked there)", got)
	}
	if got := s.FailResource("A"); got != nil {
		t.Errorf("failing A twice = %v, want nil", got)
	}
	if got := s.FailResource("C"); got != nil {
		t.Errorf("failing an unknown resource = %v, want nil", got)
	}
	if _, err := s.Bind("q1", at(0), nil); err == nil {
		t.Error("a failed reservation could still be bound")
	}
	// A dead resource takes no bookings; the live one still does.
	if _, ok, why := s.Admit(req("q4", 50, 60, 10, "A"), at(1), nil); ok || !strings.Contains(why, "no candidate") {
		t.Errorf("a request only A could hold was %v (%s), want refused: no candidate", ok, why)
	}
	if b, ok, why := s.Admit(req("q5", 50, 60, 10), at(1), nil); !ok || b.Resource != "B" {
		t.Errorf("Admit(q5) = %+v %v %s, want booked on B", b, ok, why)
	}
	if got := s.FailResource("B"); !slices.Equal(got, []string{"q3", "q5"}) {
		t.Errorf("FailResource(B) = %v, want [q3 q5]", got)
	}

	// The same bookings under DRRM: q2 is unbound and B is free over its
	// window, so it survives A's failure.
	g := New(units("A", "B"))
	for _, q := range []Request{req("q1", 0, 10, 10), req("q2", 20, 40, 10)} {
		mustAdmit(t, g, q)
	}
	if _, err := g.Bind("q1", at(0), nil); err != nil {
		t.Fatal(err)
	}
	r, _, _, _ := g.Bound("q1")
	if got := g.FailResource(r); !slices.Equal(got, []string{"q1"}) {
		t.Errorf("DRRM: FailResource(%s) = %v, want only the bound q1", r, got)
	}
}
