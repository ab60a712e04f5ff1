package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

// TestUsageSurvivesReopen: the accounted use written with a job's final
// state is there when the file is opened again (a restarted daemon).
func TestUsageSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gridsub.db")
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j := job("j1", "n", bridge.Running, "A")
	mustPut(t, s, j)
	j.State = bridge.Completed
	if err := s.PutCharged(ctx, j, bridge.Charge{User: "alice", NodeSeconds: 7200, At: t0, HalfLife: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	u, err := s.Usage(ctx)
	if err != nil || len(u) != 1 || u["alice"].NodeSeconds != 7200 || !u["alice"].At.Equal(t0) {
		t.Fatalf("after reopening: %+v %v", u, err)
	}
}
