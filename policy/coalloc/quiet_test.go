package coalloc

import (
	"context"
	"reflect"
	"testing"

	"github.com/gridsub/gridsub/policy"
	"pgregory.net/rapid"
)

// TestPropertyQuietChangesNoDecision: Snapshot.Quiet only drops the
// explanation of waiting jobs, (some) Reserve decisions and the reasons and
// runner-ups of Start decisions; every decision that acts stays the same,
// in the same order, and a Reject keeps its reasons.
func TestPropertyQuietChangesNoDecision(t *testing.T) {
	explained := 0 // cases where the loud plan had waiting jobs to explain
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		name := rapid.SampledFrom(Names()).Draw(t, "planner")
		pl, err := ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		loud, err := pl.Plan(context.Background(), s)
		if err != nil {
			t.Skip(err)
		}
		if len(loud.Pending) > 0 {
			explained++
		}
		q := *s
		q.Quiet = true
		quiet, err := pl.Plan(context.Background(), &q)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(acting(loud.Decisions), acting(quiet.Decisions)) {
			t.Fatalf("%s: decisions differ with Quiet", name)
		}
		if name != "sabin" && len(quiet.Pending) != 0 {
			t.Fatalf("%s: %d pending entries despite Quiet", name, len(quiet.Pending))
		}
	})
	if explained == 0 {
		t.Fatal("no generated case had a waiting job: the property was not exercised")
	}
}

// acting is the decisions other than Reserve, Start decisions without
// their explanation (reasons, runner-ups).
func acting(ds []policy.Decision) []policy.Decision {
	var out []policy.Decision
	for _, d := range ds {
		switch d.Action {
		case policy.Reserve:
			continue
		case policy.Start:
			d.Beaten, d.Status.Reasons = nil, nil
		}
		out = append(out, d)
	}
	return out
}
