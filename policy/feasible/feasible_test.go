package feasible

import (
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/policytest"
)

var t0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

func sites() *policy.Snapshot {
	return &policy.Snapshot{Now: t0, MultiSite: 1, Sites: []policy.Site{
		{Name: "A", Nodes: 8, H: 2, Shape: policy.NodeShape{Cores: 4}},
		{Name: "B", Nodes: 4, H: 0.5, Shape: policy.NodeShape{Cores: 16}},
	}}
}

func TestContract(t *testing.T) { policytest.Feasibility(t, Check{}) }

func TestRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		d     policy.Demand
		cause policy.Cause
		say   string
	}{
		{"fits", policy.Demand{Width: 4, Estimate: time.Hour}, policy.CauseNone, ""},
		{"split over both", policy.Demand{Width: 12, Estimate: time.Hour}, policy.CauseNone, ""},
		{"too wide", policy.Demand{Width: 13, Estimate: time.Hour}, policy.CauseCapacity, "needs 13 nodes; the eligible sites have 12 in all (A 8, B 4)"},
		{"no split", policy.Demand{Width: 9, Estimate: time.Hour, NoSplit: true}, policy.CauseCapacity, "largest eligible site is A with 8"},
		{"cores", policy.Demand{Width: 1, Estimate: time.Hour, PerNode: policy.NodeShape{Cores: 32}}, policy.CauseSites, "no allowed site has nodes with what the job asks per node"},
		{"cores rule A out", policy.Demand{Width: 5, Estimate: time.Hour, PerNode: policy.NodeShape{Cores: 8}}, policy.CauseCapacity, "(not eligible: A:"},
		{"not allowed", policy.Demand{Width: 1, Estimate: time.Hour, Sites: []string{"C"}}, policy.CauseSites, "no site is allowed"},
		{"deadline", policy.Demand{Width: 1, Estimate: 2 * time.Hour, Deadline: t0.Add(50 * time.Minute)}, policy.CauseDeadline, "B:1 (h 0.5)"},
		{"deadline met on B", policy.Demand{Width: 1, Estimate: 2 * time.Hour, Deadline: t0.Add(time.Hour)}, policy.CauseNone, ""},
		{"window: size left to admission", policy.Demand{Width: 100, Estimate: time.Hour, Window: true}, policy.CauseNone, ""},
	} {
		v, err := Check{}.Feasible(&tc.d, sites())
		if err != nil {
			t.Fatal(err)
		}
		if v.Cause != tc.cause || (tc.cause == policy.CauseNone) != v.Feasible() {
			t.Fatalf("%s: %+v, want cause %s", tc.name, v, tc.cause)
		}
		if tc.say != "" && !strings.Contains(v.Status.String(), tc.say) {
			t.Fatalf("%s: %q does not say %q", tc.name, v.Status, tc.say)
		}
	}
	// Best effort: feasible, with a warning saying how late.
	d := policy.Demand{Width: 1, Estimate: 2 * time.Hour, Deadline: t0.Add(50 * time.Minute), BestEffort: true}
	v, _ := Check{}.Feasible(&d, sites())
	if !v.Feasible() || !strings.Contains(v.Warning, "10m0s late") {
		t.Fatalf("best effort: %+v", v)
	}
	// Late is the same rule on a waiting job.
	if why, _ := (Check{}).Late(&d, sites()); !strings.Contains(why, "10m0s late") {
		t.Fatalf("late: %q", why)
	}
	// A site not known yet rules nothing out.
	s := sites()
	s.Sites[1].Nodes = 0
	if v, _ := (Check{}).Feasible(&policy.Demand{Width: 100, Estimate: time.Hour}, s); !v.Feasible() {
		t.Fatalf("unknown size: %+v", v)
	}
}
