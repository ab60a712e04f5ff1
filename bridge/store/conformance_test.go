package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
	"github.com/gridsub/gridsub/bridge/store/storetest"
)

// The bridge.Store contract, run against every implementation.
func TestConformanceMemStore(t *testing.T) {
	storetest.JobStore(t, func(t *testing.T) bridge.Store { return bridge.NewMemStore() })
}

// TestConformanceSQLite is the store.Store suite; pgstore runs the same
// against PostgreSQL.
func TestConformanceSQLite(t *testing.T) {
	storetest.Durable(t, func(t *testing.T) store.Store { return openTemp(t) })
}

func openTemp(t testing.TB) *store.SQLite {
	t.Helper()
	s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "gridsub.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

var t0 = time.Date(2026, 11, 22, 3, 0, 0, 123456789, time.UTC)

// The package's other tests build jobs with the conformance suite's helpers.
var (
	fullJob  = storetest.FullJob
	job      = storetest.Job
	ids      = storetest.IDs
	mustPut  = storetest.MustPut
	mustList = storetest.MustList
)
