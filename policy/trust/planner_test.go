package trust

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
)

var pnow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func snap() *policy.Snapshot {
	return &policy.Snapshot{
		Now: pnow,
		Sites: []policy.Site{
			{Name: "a", Nodes: 8, Free: 8, H: 1},
			{Name: "b", Nodes: 8, Free: 8, H: 1, Trust: 0.3},
			{Name: "c", Nodes: 2, Free: 0, H: 0.5, Busy: []policy.Hold{{Nodes: 2, Until: pnow.Add(time.Hour)}}},
		},
		Queue: []policy.Job{
			{ID: "j1", Width: 4, Estimate: time.Hour, Submit: pnow, Origin: 0},
			{ID: "j2", Width: 4, Estimate: time.Hour, Submit: pnow, Origin: 0},
			{ID: "j3", Width: 4, Estimate: time.Hour, Submit: pnow, Origin: 0},
			{ID: "wide", Width: 9, Estimate: time.Minute, Submit: pnow, Origin: -1},
			{ID: "onlyc", Width: 2, Estimate: time.Minute, Submit: pnow, Origin: -1, Allowed: []int{2}},
		},
	}
}

func TestPlannerTrustAndCapacity(t *testing.T) {
	s := snap()
	before := snap()
	p := &Planner{}
	plan, err := p.Plan(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, before) {
		t.Error("Plan modified the snapshot")
	}
	again, _ := p.Plan(context.Background(), s)
	if !reflect.DeepEqual(plan, again) {
		t.Error("two passes over one snapshot differ")
	}
	got := map[string]policy.Decision{}
	used := map[int]int{}
	for _, d := range plan.Decisions {
		got[d.Job] = d
		if d.Action == policy.Start {
			for _, pt := range d.Chosen.Parts {
				used[pt.Site] += pt.Nodes
			}
		}
	}
	for i, n := range used {
		if n > s.Sites[i].Free {
			t.Errorf("site %s: %d nodes started, %d free", s.Sites[i].Name, n, s.Sites[i].Free)
		}
	}
	// a (trust 1) takes the first two; the third would wait for a rather
	// than go to b at trust 0.3: 2h on a, against 1h / 0.3 on b.
	for _, j := range []string{"j1", "j2"} {
		if d := got[j]; d.Action != policy.Start || d.Chosen.Parts[0].Site != 0 {
			t.Errorf("%s: %+v, want started on a", j, d)
		}
	}
	if _, ok := got["j3"]; ok {
		t.Errorf("j3: %+v, want it left waiting for a (b is distrusted)", got["j3"])
	}
	if d := got["wide"]; d.Action != policy.Reject || !strings.Contains(d.Status.String(), "needs 9 nodes on one site; the largest it may use has 8") {
		t.Errorf("wide: %+v, want rejected with the reason", d)
	}
	if _, ok := got["onlyc"]; ok {
		t.Errorf("onlyc: %+v, want waiting (c is full)", got["onlyc"])
	}
	// With b trusted again Min-min spreads the jobs: j2 goes to b (free at
	// once) and all three start.
	s.Sites[1].Trust = 1
	plan, _ = p.Plan(context.Background(), s)
	started := map[string]int{}
	for _, d := range plan.Decisions {
		if d.Action == policy.Start {
			started[d.Job] = d.Chosen.Parts[0].Site
		}
	}
	if len(started) != 3 || started["j2"] != 1 {
		t.Errorf("with b trusted: started %v, want j1, j2 (on b) and j3", started)
	}
}

func TestPlannerDownSites(t *testing.T) {
	s := snap()
	for i := range s.Sites {
		s.Sites[i].Down = true
	}
	plan, err := (&Planner{}).Plan(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Decisions) != 0 || len(plan.Pending) != len(s.Queue) {
		t.Errorf("all sites down: %d decisions, %d pending; want none and all waiting", len(plan.Decisions), len(plan.Pending))
	}
}
