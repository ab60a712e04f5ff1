package experiment

import (
	"context"
	"testing"
)

// TestReferenceKind replays all of CTC-SP2 under the reference-compatible
// EASY mode and checks it reproduces the pyss schedule (seconds of work;
// skipped with -short).
func TestReferenceKind(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 77,199 jobs")
	}
	needTraces(t)
	e, err := Load("testdata/reference.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Execute(context.Background(), e, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := s.Runs[0].Metrics
	t.Logf("%+v", m)
	if m["jobs"] != 77199 || m["start_match"] < 0.999 || m["bsld_dev_pct"] > 0.5 || m["bsld_dev_pct"] < -0.5 {
		t.Fatalf("reference not reproduced: %+v", m)
	}
}
