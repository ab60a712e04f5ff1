package reserve

import (
	"slices"
	"testing"

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
