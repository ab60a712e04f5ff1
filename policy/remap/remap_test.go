package remap

import (
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/policytest"
)

var t0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

func TestContracts(t *testing.T) {
	policytest.Remap(t, Gain{})
	policytest.Remap(t, Benefit{})
}

// Two jobs wait at A (busy for two hours); B has room for one. Gain moves
// the older; Benefit moves the one whose deadline the move saves.
func TestBenefitMovesThePressedJobFirst(t *testing.T) {
	s := &policy.Snapshot{Now: t0, Sites: []policy.Site{
		{Name: "A", Nodes: 2, Free: 0, H: 1, Busy: []policy.Hold{{Nodes: 2, Until: t0.Add(2 * time.Hour)}}},
		{Name: "B", Nodes: 2, Free: 2, H: 1},
	}}
	older := policy.Job{ID: "older", Width: 2, Estimate: 30 * time.Minute, Submit: t0.Add(-time.Hour), Origin: -1}
	pressed := policy.Job{ID: "pressed", Width: 2, Estimate: 30 * time.Minute, Submit: t0.Add(-time.Hour), Origin: -1,
		Deadline: t0.Add(time.Hour)}
	in := &policy.RemapInput{Now: t0, Snapshot: s, Free: []int{0, 2}, MinGain: 10 * time.Minute, Waiting: []policy.Waiting{
		{Job: older, Parts: []policy.Part{{Site: 0, Nodes: 2}}},
		{Job: pressed, Parts: []policy.Part{{Site: 0, Nodes: 2}}},
	}}
	for _, tc := range []struct {
		r    policy.Remap
		want string
	}{{Gain{}, "older"}, {Benefit{}, "pressed"}} {
		m, err := tc.r.Moves(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(m) != 1 || m[0].Job != tc.want || m[0].To.Parts[0].Site != 1 || m[0].Gain != 2*time.Hour {
			t.Fatalf("%s: moves %+v, want %s to B gaining 2h", tc.r.Name(), m, tc.want)
		}
	}
}
