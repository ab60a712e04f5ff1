package store_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

// A version-1 file (jobs, no values) with jobs in it opens in this binary:
// migrated to the current schema in place, jobs intact, values usable.
func TestMigrateFromVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	if err := store.CreateAtVersion(ctx, path, 1); err != nil {
		t.Fatal(err)
	}
	// Rows as gridsub with schema 1 wrote them, through raw SQL (the store
	// would migrate the file on Open).
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO jobs(id, state, name, sites, updated, n_events, body) VALUES ('g000001', 'completed', 'old', '', 0, 1, '{"ID":"g000001","State":"completed","Req":{"Name":"old","Nodes":2}}');
		INSERT INTO events(seq, n, time, kind, site, msg) VALUES (1, 0, '2026-01-01T00:00:00Z', 'submitted', '', 'from v1');
		UPDATE counters SET value = 500 WHERE name = 'next_id'`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if v := fileVersion(t, path); v != 1 {
		t.Fatalf("the old file has version %d, want 1", v)
	}

	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatalf("opening a version-1 file: %v", err)
	}
	defer s.Close()
	j, err := s.Get(ctx, "g000001")
	if err != nil || j.Req.Name != "old" || j.Req.Nodes != 2 || len(j.Events) != 1 || j.Events[0].Msg != "from v1" {
		t.Fatalf("the v1 job after migration: %+v, %v", j, err)
	}
	if n, err := s.NextID(ctx); err != nil || n != 501 {
		t.Fatalf("NextID after migration = %d, %v; want 501 (the v1 counter kept)", n, err)
	}
	if err := s.SetValue(ctx, "trust/Beijing", []byte(`0.9`)); err != nil {
		t.Fatalf("values after migration: %v", err)
	}
	if err := s.Health(ctx); err != nil {
		t.Fatalf("Health after migration: %v", err)
	}
	if v := fileVersion(t, path); v != store.SchemaVersion {
		t.Fatalf("version after Open %d, want %d", v, store.SchemaVersion)
	}
}

// fileVersion reads the schema version a database file records, through a
// connection of its own (not the store's).
func fileVersion(t *testing.T, path string) int {
	t.Helper()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var v int
	if err := raw.QueryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil {
		t.Fatalf("reading the schema version of %s: %v", path, err)
	}
	return v
}

func TestValues(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v.db")
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Value(ctx, "trust/Beijing"); ok || err != nil {
		t.Fatalf("Value of a missing key: ok %v, %v", ok, err)
	}
	val := []byte(`{"trust":0.8}`)
	for _, kv := range [][2]string{{"trust/Beijing", string(val)}, {"trust/Shanghai", "0.5"}, {"trust_x", "not in the family"}, {"health/Beijing", "up"}, {"trust/Beijing", `{"trust":0.9}`}} {
		if err := s.SetValue(ctx, kv[0], []byte(kv[1])); err != nil {
			t.Fatal(err)
		}
	}
	val[2] = 'X' // the caller's slice changes after SetValue
	got, ok, err := s.Value(ctx, "trust/Beijing")
	if err != nil || !ok || string(got) != `{"trust":0.9}` {
		t.Fatalf("Value = %q, %v, %v", got, ok, err)
	}
	fam, err := s.Values(ctx, "trust/")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"trust/Beijing": []byte(`{"trust":0.9}`), "trust/Shanghai": []byte("0.5")}
	if !reflect.DeepEqual(fam, want) {
		t.Fatalf("Values(trust/) = %q, want %q", fam, want)
	}
	if err := s.DeleteValue(ctx, "trust/Shanghai"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fam, _ = s.Values(ctx, "")
	if len(fam) != 3 || string(fam["health/Beijing"]) != "up" {
		t.Fatalf("after reopen, values %q", fam)
	}
	if err := s.SetValue(ctx, "", nil); err == nil {
		t.Fatal("SetValue with an empty key succeeded")
	}
	if len(mustList(t, s, bridge.Filter{})) != 0 {
		t.Fatal("values leaked into the job list")
	}
}
