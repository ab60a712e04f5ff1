package coalloc

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// twoSites is two 16-node sites, all free; site 0 is A, site 1 is B.
func twoSites(hA, trustA float64) *policy.Snapshot {
	return &policy.Snapshot{Now: t0, MultiSite: 1.1, Sites: []policy.Site{
		{Name: "A", Nodes: 16, Free: 16, H: hA, Trust: trustA},
		{Name: "B", Nodes: 16, Free: 16, H: 1},
	}}
}

// TestTrustWeighsEnds: trust divides the predicted end (SPEC §3), so a job
// leaves a distrusted site unless that site ends it enough earlier, and
// waits for a trusted one rather than start now on a distrusted one.
func TestTrustWeighsEnds(t *testing.T) {
	// The non-adaptive and Sabin baselines have orders of their own.
	for _, name := range []string{"greedy-easy", "optimal-easy", "greedy-conservative", "optimal-none", "single-site-easy"} {
		t.Run(name, func(t *testing.T) {
			sites := func(d *policy.Decision) []int {
				var out []int
				for _, p := range d.Chosen.Parts {
					out = append(out, p.Site)
				}
				return out
			}
			plan1 := func(s *policy.Snapshot) *policy.Decision {
				t.Helper()
				s.Queue = []policy.Job{job("j", 8, time.Hour)}
				d := decisionFor(mustPlan(t, name, s), "j")
				if d == nil {
					t.Fatal("no decision for the job")
				}
				return d
			}
			// Equal sites: the tie goes to the lower index, A, unless A is distrusted.
			if d := plan1(twoSites(1, 0)); d.Action != policy.Start || sites(d)[0] != 0 {
				t.Fatalf("all trusted: %v on %v, want start on A", d.Action, sites(d))
			}
			d := plan1(twoSites(1, 0.5))
			if d.Action != policy.Start || len(sites(d)) != 1 || sites(d)[0] != 1 {
				t.Fatalf("A at trust 0.5: %v on %v, want start on B", d.Action, sites(d))
			}
			// A 2.5 times faster ends at 0.4 h; weighed by 0.5, 0.8 h: still better than B's 1 h.
			if d := plan1(twoSites(0.4, 0.5)); d.Action != policy.Start || sites(d)[0] != 0 {
				t.Fatalf("fast A at trust 0.5: %v on %v, want start on A", d.Action, sites(d))
			}
			// B busy for 20 minutes: B ends at 80 min, A now at 60 min, weighed 120.
			s := twoSites(1, 0.5)
			busy(s, 1, 16, 20*time.Minute)
			d = plan1(s)
			if d.Action != policy.Reserve || sites(d)[0] != 1 || !d.Chosen.Start.Equal(t0.Add(20*time.Minute)) {
				t.Fatalf("B busy 20 min, A at trust 0.5: %v on %v from %v, want a reservation on B at +20m", d.Action, sites(d), d.Chosen.Start)
			}
			if r := strings.Join(d.Status.Reasons, "; "); !strings.Contains(r, "trust (A 0.5)") {
				t.Errorf("the reasons do not say trust made the difference: %s", r)
			}
			// The same at trust 0.8: 60/0.8 = 75 min beats 80, so it starts on A.
			s = twoSites(1, 0.8)
			busy(s, 1, 16, 20*time.Minute)
			if d := plan1(s); d.Action != policy.Start || sites(d)[0] != 0 {
				t.Fatalf("B busy 20 min, A at trust 0.8: %v on %v, want start on A", d.Action, sites(d))
			}
		})
	}
}

// TestTrustOutOfRangeIsRefused: trust is in (0,1], 0 meaning unset.
func TestTrustOutOfRangeIsRefused(t *testing.T) {
	for _, tr := range []float64{-0.1, 1.5, math.NaN(), math.Inf(1)} {
		pl, err := ByName("greedy-easy")
		if err != nil {
			t.Fatal(err)
		}
		s := twoSites(1, tr)
		s.Queue = []policy.Job{job("j", 8, time.Hour)}
		if _, err := pl.Plan(t.Context(), s); !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), "trust") {
			t.Errorf("trust %v: err %v, want ErrBadSnapshot naming trust", tr, err)
		}
	}
}
