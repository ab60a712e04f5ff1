package coalloc

import (
	"context"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// TestPropertyQuietChangesNoDecision: Snapshot.Quiet only drops the
// explanation of waiting jobs; every decision stays the same.
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
		if !reflect.DeepEqual(loud.Decisions, quiet.Decisions) {
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
