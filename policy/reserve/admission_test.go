package reserve

import (
	"slices"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// A book a resource shrank under keeps its bookings in booking order while
// they fit and drops the rest; a failed resource comes back with
// AddResource; Reservations lists by booked start.
func TestStaticBookOperations(t *testing.T) {
	two := []Resource{{Name: "A", Capacity: 2, Level: 1}}
	s := NewStatic(two, StaticMinCost, 1)
	for _, q := range []Request{req("q1", 20, 30, 10), req("q2", 0, 10, 10), req("q3", 0, 30, 10)} {
		if _, ok, why := s.Admit(q, at(0), nil); !ok {
			t.Fatalf("%s: %s", q.ID, why)
		}
	}
	if got := s.Reservations(); !slices.Equal(got, []string{"q2", "q3", "q1"}) {
		t.Fatalf("reservations %v, want by booked start", got)
	}
	if d := s.SetCapacity("A", 2); d != nil {
		t.Fatalf("unchanged capacity dropped %v", d)
	}
	if d := s.SetCapacity("A", 1); !slices.Equal(d, []string{"q3"}) {
		t.Fatalf("shrink dropped %v, want q3 (it overlaps q2, booked before it)", d)
	}
	if d := s.FailResource("A"); !slices.Equal(d, []string{"q1", "q2"}) {
		t.Fatalf("failure dropped %v", d)
	}
	if _, ok, _ := s.Admit(req("q4", 0, 10, 10), at(0), nil); ok {
		t.Fatal("admitted on a failed resource")
	}
	s.AddResource(Resource{Name: "A", Capacity: 1, Level: 1})
	if _, ok, why := s.Admit(req("q4", 0, 10, 10), at(0), nil); !ok {
		t.Fatalf("after the resource came back: %s", why)
	}
}

// The books of both mechanisms answer Admit with a Status that carries
// the mechanism's reason, as the broker shows it.
func TestBooksAnswerWithStatus(t *testing.T) {
	for _, a := range []policy.Admission{DRRM{}, SRRM{Mode: StaticMinCost}, SRRM{Mode: StaticRandom}} {
		b := a.NewBook(units("A"), 3)
		if st := b.Admit(req("q1", 0, 10, 10), at(0), nil); st.Code != policy.Success || st.Plugin != a.Name() || len(st.Reasons) != 1 {
			t.Fatalf("%s: %+v", a.Name(), st)
		}
		if st := b.Admit(req("q2", 0, 10, 10, "B"), at(0), nil); st.Code != policy.Unresolvable || st.Plugin != a.Name() ||
			st.Reasons[0] != "no candidate resource: none of the allowed resources [B] exists" {
			t.Fatalf("%s: %+v", a.Name(), st)
		}
	}
}

// BookedStart: SRRM reports the start it booked at admission, DRRM the
// request's ET until the binding decides, then the bound start.
func TestBookedStart(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	res := []policy.ResvResource{{Name: "A", Capacity: 1, Level: 1}}
	q1 := policy.ResvRequest{ID: "q1", ET: t0, LT: t0.Add(3 * time.Hour), Dur: time.Hour, Demand: 1}
	q2 := policy.ResvRequest{ID: "q2", ET: t0, LT: t0.Add(3 * time.Hour), Dur: time.Hour, Demand: 1}
	for _, name := range Names() {
		a, err := ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		b := a.NewBook(res, 1)
		bs, ok := b.(policy.BookedStart)
		if !ok {
			t.Fatalf("%s: its book has no BookedStart", name)
		}
		if _, ok := bs.Booked("q1"); ok {
			t.Errorf("%s: Booked of an unknown id says ok", name)
		}
		qs, last, want := []policy.ResvRequest{q1, q2}, "q2", t0.Add(time.Hour) // SRRM books q2 after q1 on the one node
		if name == DRRMName {
			qs, last, want = qs[:1], "q1", t0 // the graph holds one of them; unbound: its ET
		}
		for _, q := range qs {
			if st := b.Admit(q, t0, nil); st.Code != policy.Success {
				t.Fatalf("%s: %s refused: %s", name, q.ID, st)
			}
		}
		if got, ok := bs.Booked(last); !ok || !got.Equal(want) {
			t.Errorf("%s: Booked(%s) = %v, %v; want %v", name, last, got, ok, want)
		}
		bd, err := b.Bind("q1", t0, nil)
		if err != nil {
			t.Fatalf("%s: bind q1: %v", name, err)
		}
		if got, ok := bs.Booked("q1"); !ok || !got.Equal(bd.Start) {
			t.Errorf("%s: Booked(q1) after Bind = %v, %v; want %v", name, got, ok, bd.Start)
		}
	}
}
