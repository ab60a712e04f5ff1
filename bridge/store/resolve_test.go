package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

// MatchIDs finds stored ids by prefix or suffix, literally (LIKE's % and _
// in what was typed match only themselves), in submission order, bounded.
func TestMatchIDs(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, filepath.Join(t.TempDir(), "gs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{"gabc-000001", "gabc-000002", "gxyz-000012", "g_x%-000003"} {
		if err := s.Put(ctx, &bridge.Job{ID: id, State: bridge.Queued, Submit: t0, Req: bridge.Request{Name: "n", Nodes: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	for q, want := range map[string][]string{
		"000002": {"gabc-000002"},
		"2":      {"gabc-000002", "gxyz-000012"},
		"gabc":   {"gabc-000001", "gabc-000002"},
		"g":      {"gabc-000001", "gabc-000002", "gxyz-000012", "g_x%-000003"},
		"g_":     {"g_x%-000003"},
		"%":      nil,
		"x%-":    nil, // neither a prefix nor a suffix
		"zzz":    nil,
	} {
		got, err := s.MatchIDs(ctx, q, 0)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("MatchIDs(%q) = %v, %v; want %v", q, got, err, want)
		}
	}
	if got, _ := s.MatchIDs(ctx, "g", 2); len(got) != 2 {
		t.Errorf("limit 2: %v", got)
	}
	// Through the one resolver.
	exists := func(id string) error { _, err := s.Get(ctx, id); return err }
	for q, want := range map[string]string{"gabc-000001": "gabc-000001", "000012": "gxyz-000012", "gxyz": "gxyz-000012"} {
		if got, err := bridge.ResolveID(ctx, q, exists, s); err != nil || got != want {
			t.Errorf("ResolveID(%q) = %q, %v; want %q", q, got, err, want)
		}
	}
	_, err = bridge.ResolveID(ctx, "gabc", exists, s)
	if !errors.Is(err, bridge.ErrAmbiguous) || !errors.Is(err, bridge.ErrBadRequest) || err.Error() != `bad request: ambiguous job id: "gabc" is ambiguous: matches gabc-000001, gabc-000002; give more of the id` {
		t.Errorf("ambiguous: %v", err)
	}
	if _, err := bridge.ResolveID(ctx, "nope", exists, s); !errors.Is(err, bridge.ErrNotFound) {
		t.Errorf("no match: %v", err)
	}
}
