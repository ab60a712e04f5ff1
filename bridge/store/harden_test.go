package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

// TestCheckFailureAlwaysHasProblems: whatever part of the file is damaged
// — a page SQLite's check lists, or one that makes the check itself fail
// (the schema page, an interior page) — a failed Check reports at least one
// problem, so that `store check` never prints "ok" beside an error.
func TestCheckFailureAlwaysHasProblems(t *testing.T) {
	ctx := context.Background()
	for _, where := range []string{"schema", "middle", "last"} {
		t.Run(where, func(t *testing.T) {
			p := populated(t, 300)
			n := map[string]int{"schema": 1, "middle": pages(t, p) / 2, "last": pages(t, p)}[where]
			if n == 1 {
				// Keep the 100-byte header (checkHeader's part): damage
				// the schema table behind it.
				f, err := os.OpenFile(p, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteAt([]byte(strings.Repeat("\xa5", 3996)), 100)
				f.Close()
			} else {
				damagePage(t, p, n)
			}
			for _, full := range []bool{false, true} {
				rep, err := store.Check(ctx, p, store.CheckOptions{Full: full})
				if err == nil {
					t.Skipf("damage of page %d not found by the check (full=%v)", n, full)
				}
				if rep == nil || len(rep.Problems) == 0 {
					t.Fatalf("Check(full=%v) of page %d damaged = %+v, %v: a failed check with no problem listed", full, n, rep, err)
				}
			}
		})
	}
}

// TestDamagedStoreRefusesWrites: once a run-time check has found damage,
// every write is refused with ErrCorrupt and the reason, and nothing more
// is written into the file.
func TestDamagedStoreRefusesWrites(t *testing.T) {
	ctx := context.Background()
	p := populated(t, 300)
	s, err := store.Open(ctx, p, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	damagePage(t, p, pages(t, p)/2)
	if err := s.QuickCheck(ctx); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("QuickCheck = %v, want ErrCorrupt", err)
	}
	before := sum(t, p)
	j := &bridge.Job{ID: "after-damage", State: bridge.Queued, Req: bridge.Request{Name: "x", Nodes: 1, Command: []string{"true"}}}
	err = s.Put(ctx, j)
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "refusing writes") || !strings.Contains(err.Error(), p) {
		t.Fatalf("Put into a damaged store = %v, want ErrCorrupt refusing writes, naming the file", err)
	}
	if _, err := s.NextID(ctx); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("NextID in a damaged store = %v, want ErrCorrupt", err)
	}
	if err := s.SetValue(ctx, "k", []byte("v")); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("SetValue in a damaged store = %v, want ErrCorrupt", err)
	}
	if after := sum(t, p); after != before {
		t.Fatal(fmt.Sprintf("the damaged file changed after its damage was found"))
	}
}

// TestIdempotencyKeys: the keys of jobs written since a time, each to its
// oldest job; group elements (which copy their parent's request) and jobs
// without a key are left out.
func TestIdempotencyKeys(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(id, key, parent string) {
		j := &bridge.Job{ID: id, State: bridge.Queued, Parent: parent,
			Req: bridge.Request{Name: "x", Nodes: 1, Command: []string{"true"}, IdempotencyKey: key}}
		if err := s.Put(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	before := time.Now()
	put("a1", "k1", "")
	put("a2", "k1", "") // a second job of a key (never made by the daemon): the first wins
	put("b1", "k2", "")
	put("b1_1", "k2", "b1")
	put("c1", "", "")
	got, err := s.IdempotencyKeys(ctx, before)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["k1"] != "a1" || got["k2"] != "b1" {
		t.Fatalf("IdempotencyKeys = %v", got)
	}
	if got, _ := s.IdempotencyKeys(ctx, time.Now().Add(time.Hour)); len(got) != 0 {
		t.Fatalf("keys of jobs written before since: %v", got)
	}
}
