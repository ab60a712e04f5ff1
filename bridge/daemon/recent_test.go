package daemon

import (
	"math"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/store"
	"github.com/gridsub/gridsub/policy/trust"
)

// recent folds new outcomes in at full weight and ages the old ones by the
// half-life; a store whose counts went backwards starts over.
func TestRecentDecaysAndFolds(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	h := store.SiteHealth{Completed: 4, Failed: 2, Outages: 1}
	first := recent(trust.Policy{Model: trust.DefaultModel()}, h, t0, day)
	if first.Completed != 4 || first.Failed != 2 || first.Outages != 1 || !first.At.Equal(t0) || first.Folded != (store.Counts{Completed: 4, Failed: 2, Outages: 1}) {
		t.Fatalf("first fold: %+v", first)
	}
	// A day later, one more failure.
	h.Recent, h.Failed = &first, 3
	second := recent(trust.Policy{Model: trust.DefaultModel()}, h, t0.Add(day), day)
	if second.Completed != 2 || second.Failed != 2 || second.Outages != 0.5 || second.Folded.Failed != 3 {
		t.Fatalf("a day later: %+v; want completed 2, failed 1+1, outages 0.5", second)
	}
	// No half-life: nothing ages.
	if r := recent(trust.Policy{Model: trust.DefaultModel()}, h, t0.Add(30*day), -1); r.Completed != 4 || r.Failed != 3 {
		t.Fatalf("without ageing: %+v", r)
	}
	// Half a half-life.
	if r := recent(trust.Policy{Model: trust.DefaultModel()}, h, t0.Add(day/2), day); math.Abs(r.Completed-4/math.Sqrt2) > 1e-12 {
		t.Fatalf("half a day: completed %v, want %v", r.Completed, 4/math.Sqrt2)
	}
	// The counts went backwards (another database): start over from them.
	h = store.SiteHealth{Completed: 1, Recent: &second}
	if r := recent(trust.Policy{Model: trust.DefaultModel()}, h, t0.Add(2*day), day); r.Completed != 1 || r.Failed != 0 || r.Folded.Completed != 1 {
		t.Fatalf("after a reset: %+v", r)
	}
}
