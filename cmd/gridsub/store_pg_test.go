package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
	"github.com/gridsub/gridsub/bridge/store/pgstore/pgtest"
)

// TestServeOnPostgres: gridsub serve on a real PostgreSQL (store: {kind:
// postgres}) runs a job; gridsub store check, backup (a dump, daemon
// running), restore into an empty PostgreSQL database and into a SQLite
// state directory all work, and restore refuses a database with jobs.
func TestServeOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and the daemon")
	}
	pg := pgtest.StartT(t)
	bin := buildBinary(t)
	t.Chdir("../..")
	d := t.TempDir()
	writeCfg := func(name, storeSection string) string {
		p := filepath.Join(d, name)
		src := "sites: [{name: local, kind: local, nodes: 2}]\nnetwork: {default: {bandwidth: 1GB/s, latency: 1ms}}\n" +
			"broker: {policy: greedy-easy, interval: 200ms, poll_interval: 200ms}\n" + storeSection
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pgSection := func(dsn string) string {
		return fmt.Sprintf("store: {kind: postgres, dsn: %q, password_file: %s}\n", dsn, pg.PasswordFile)
	}
	cfgA := writeCfg("a.yaml", pgSection(pg.CreateDB(t, "gs_a")))
	t.Setenv("GRIDSUB_CONFIG", cfgA)
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	t.Setenv(envSocket, sock)
	t.Setenv(envStateDir, state)
	p := startServe(t, bin, state, sock)
	if strings.Contains(p.logs.String(), pg.Password()) {
		t.Fatal("the daemon logged the database password")
	}
	if !strings.Contains(p.logs.String(), "postgres://gridsub@127.0.0.1:") {
		t.Errorf("the daemon's log does not say which database it uses:\n%s", p.logs)
	}
	code, stdout, stderr := cli("submit", "examples/hello.yaml", "--wait", "--out-dir", filepath.Join(d, "out"), "-o", "json")
	var j listedJob
	if err := json.Unmarshal([]byte(stdout), &j); err != nil || code != 0 || j.State != "completed" {
		t.Fatalf("submit --wait on postgres: exit %d %v\nstdout %s\nstderr %s\nlogs %s", code, err, stdout, stderr, p.logs)
	}

	o := storeJSON(t, 0, "store", "check")
	if !o.OK || o.Jobs != 1 || !strings.HasPrefix(o.Path, "postgres://") {
		t.Fatalf("store check on postgres: %+v", o)
	}
	dump := filepath.Join(d, "backup.jsonl")
	o = storeJSON(t, 0, "store", "backup", dump) // the daemon keeps running
	if !o.OK || o.Jobs != 1 {
		t.Fatalf("store backup on postgres: %+v", o)
	}
	if fi, err := os.Stat(dump); err != nil || fi.Mode().Perm() != 0o600 || !store.IsDump(dump) {
		t.Fatalf("the dump %v %v", fi, err)
	}
	if b, _ := os.ReadFile(dump); strings.Contains(string(b), pg.Password()) {
		t.Fatal("the dump holds the database password")
	}
	// Restoring over the running store (it has a job) is refused.
	code, _, stderr = cli("store", "restore", dump)
	if code != exitUsage || !strings.Contains(stderr, "empty database") {
		t.Fatalf("restore into a store with jobs: exit %d %s", code, stderr)
	}
	p.term(t, sock)

	// Into an empty PostgreSQL database.
	t.Setenv("GRIDSUB_CONFIG", writeCfg("b.yaml", pgSection(pg.CreateDB(t, "gs_b"))))
	o = storeJSON(t, 0, "store", "restore", dump)
	if !o.OK || o.Jobs != 1 {
		t.Fatalf("restore into an empty postgres: %+v", o)
	}
	if o := storeJSON(t, 0, "store", "check"); o.Jobs != 1 {
		t.Fatalf("check after the restore: %+v", o)
	}

	// Into a SQLite state directory, and the job is there.
	state2 := filepath.Join(d, "state2")
	t.Setenv(envStateDir, state2)
	t.Setenv("GRIDSUB_CONFIG", writeCfg("c.yaml", ""))
	o = storeJSON(t, 0, "store", "restore", dump)
	if !o.OK || o.Jobs != 1 {
		t.Fatalf("restore into sqlite: %+v", o)
	}
	s, err := store.Open(context.Background(), filepath.Join(state2, "gridsub.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(context.Background(), j.ID)
	s.Close()
	if err != nil || got.State != bridge.Completed || len(got.Events) == 0 {
		t.Fatalf("the restored job in sqlite: %+v %v", got, err)
	}
	if o := storeJSON(t, 0, "store", "check"); !o.OK || o.Jobs != 1 {
		t.Fatalf("check of the restored sqlite: %+v", o)
	}
	// And back: a SQLite dump (daemon stopped) restores into PostgreSQL.
	dump2 := filepath.Join(d, "from-sqlite.jsonl")
	if o := storeJSON(t, 0, "store", "backup", "--dump", dump2); o.Jobs != 1 {
		t.Fatalf("backup --dump of sqlite: %+v", o)
	}
	t.Setenv("GRIDSUB_CONFIG", writeCfg("e.yaml", pgSection(pg.CreateDB(t, "gs_e"))))
	if o := storeJSON(t, 0, "store", "restore", dump2); o.Jobs != 1 {
		t.Fatalf("restore of a sqlite dump into postgres: %+v", o)
	}
}
