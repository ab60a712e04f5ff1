package pgstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
	"github.com/gridsub/gridsub/bridge/store/pgstore"
	"github.com/gridsub/gridsub/bridge/store/pgstore/pgtest"
	"github.com/gridsub/gridsub/bridge/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// openPG opens a store on a fresh database of the test server.
func openPG(t *testing.T) *pgstore.Postgres {
	t.Helper()
	db := pgtest.DB(t)
	s, err := pgstore.Open(context.Background(), pgstore.Config{DSN: db.DSN(), PasswordFile: db.Server.PasswordFile}, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "gridsub.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformancePostgres is store.Store's suite (the one SQLite passes in
// bridge/store) against a real PostgreSQL.
func TestConformancePostgres(t *testing.T) {
	storetest.Durable(t, func(t *testing.T) store.Store { return openPG(t) })
}

// TestDumpAcrossKinds: a dump of either store loads into the other.
func TestDumpAcrossKinds(t *testing.T) {
	t.Run("postgres to sqlite", func(t *testing.T) {
		storetest.DumpAcross(t, func(t *testing.T) store.Store { return openPG(t) }, openSQLite)
	})
	t.Run("sqlite to postgres", func(t *testing.T) {
		storetest.DumpAcross(t, openSQLite, func(t *testing.T) store.Store { return openPG(t) })
	})
}

// TestPasswordNeverInConfig: a DSN with a password is refused with an
// error saying where the password goes, and the password is not echoed;
// the password comes from password_file (mode 0600 only) or password_env.
func TestPasswordNeverInConfig(t *testing.T) {
	ctx := context.Background()
	db := pgtest.DB(t)
	const secret = "s3cr3t-Pa55"
	for _, dsn := range []string{
		db.DSN() + " password=" + secret,
		db.DSN() + " PassWord = " + secret,
		"postgres://gridsub:" + secret + "@127.0.0.1/x",
		"postgresql://gridsub@127.0.0.1/x?password=" + secret,
	} {
		_, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn}, pgstore.Options{})
		if !errors.Is(err, pgstore.ErrPasswordInConfig) {
			t.Errorf("Open(%q) = %v, want ErrPasswordInConfig", dsn, err)
			continue
		}
		if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "password_file") {
			t.Errorf("error %q echoes the password or does not say where it goes", err)
		}
	}
	// A wrong password: a clear error naming the database, not the password.
	bad := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(bad, []byte("wrong-"+secret+"\n"), 0o600)
	_, err := pgstore.Open(ctx, pgstore.Config{DSN: db.DSN(), PasswordFile: bad}, pgstore.Options{})
	if !errors.Is(err, store.ErrUnavailable) || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "password_file") {
		t.Errorf("wrong password: %v", err)
	}
	// A password file others can read is refused.
	os.Chmod(bad, 0o644)
	if _, err := pgstore.Open(ctx, pgstore.Config{DSN: db.DSN(), PasswordFile: bad}, pgstore.Options{}); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a 0644 password file: %v", err)
	}
	// Not a password: a named pipe (which must not block the daemon) and a
	// file far larger than any password.
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(t.TempDir(), "big")
	os.WriteFile(big, make([]byte, 1<<20), 0o600)
	for _, f := range []string{fifo, big} {
		if _, err := pgstore.Open(ctx, pgstore.Config{DSN: db.DSN(), PasswordFile: f}, pgstore.Options{}); err == nil || !strings.Contains(err.Error(), "password_file") {
			t.Errorf("password_file %s: %v, want an error naming password_file", f, err)
		}
	}
	// From the environment.
	t.Setenv("GRIDSUB_TEST_PGPW", db.Server.Password())
	s, err := pgstore.Open(ctx, pgstore.Config{DSN: db.DSN(), PasswordEnv: "GRIDSUB_TEST_PGPW"}, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s.Where(), db.Server.Password()) {
		t.Errorf("Where() = %q shows the password", s.Where())
	}
	s.Close()
	if _, err := pgstore.Open(ctx, pgstore.Config{DSN: db.DSN(), PasswordEnv: "GRIDSUB_TEST_UNSET_VAR"}, pgstore.Options{}); err == nil || !strings.Contains(err.Error(), "not set") {
		t.Errorf("an unset password_env: %v", err)
	}
}

// TestMigrations: a new database gets every migration once (two stores
// opening it at once included); a database of a newer gridsub is refused
// and left untouched; a database with foreign tables is refused.
func TestMigrations(t *testing.T) {
	ctx := context.Background()
	db := pgtest.DB(t)
	cfg := pgstore.Config{DSN: db.DSN(), PasswordFile: db.Server.PasswordFile}
	errc := make(chan error, 3)
	for range 3 {
		go func() {
			s, err := pgstore.Open(ctx, cfg, pgstore.Options{})
			if err == nil {
				s.Close()
			}
			errc <- err
		}()
	}
	for range 3 {
		if err := <-errc; err != nil {
			t.Fatalf("concurrent Open: %v", err)
		}
	}
	c, err := pgx.Connect(ctx, db.DSN()+" password="+db.Server.Password())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n, v int
	if err := c.QueryRow(ctx, `SELECT count(*), max(version) FROM gridsub_migrations`).Scan(&n, &v); err != nil || n != pgstore.SchemaVersion || v != pgstore.SchemaVersion {
		t.Fatalf("gridsub_migrations: %d rows, version %d, %v; want %d", n, v, err, pgstore.SchemaVersion)
	}
	if _, err := c.Exec(ctx, `INSERT INTO gridsub_migrations(version, what) VALUES ($1, 'from the future')`, pgstore.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	_, err = pgstore.Open(ctx, cfg, pgstore.Options{})
	if !errors.Is(err, store.ErrNewerSchema) || !strings.Contains(err.Error(), "upgrade gridsub") {
		t.Fatalf("Open of a newer schema = %v, want ErrNewerSchema telling to upgrade", err)
	}
	if err := c.QueryRow(ctx, `SELECT count(*) FROM gridsub_migrations`).Scan(&n); err != nil || n != pgstore.SchemaVersion+1 {
		t.Fatalf("the refused database changed: %d migrations", n)
	}

	other := pgtest.DB(t)
	c2, err := pgx.Connect(ctx, other.DSN()+" password="+other.Server.Password())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(ctx)
	c2.Exec(ctx, `CREATE TABLE jobs (x int)`)
	_, err = pgstore.Open(ctx, pgstore.Config{DSN: other.DSN(), PasswordFile: other.Server.PasswordFile}, pgstore.Options{})
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "database of its own") {
		t.Fatalf("Open of a database with foreign tables = %v", err)
	}
}

// TestVerify: gridsub store check for PostgreSQL finds a job whose events
// were lost and a body that does not decode.
func TestVerify(t *testing.T) {
	ctx := context.Background()
	db := pgtest.DB(t)
	s, err := pgstore.Open(ctx, pgstore.Config{DSN: db.DSN(), PasswordFile: db.Server.PasswordFile}, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.Fill(t, s)
	rep, err := s.Verify(ctx)
	if err != nil || rep.Jobs != 31 || len(rep.Problems) != 0 || rep.Schema != pgstore.SchemaVersion {
		t.Fatalf("Verify of a sound store = %+v %v", rep, err)
	}
	c, err := pgx.Connect(ctx, db.DSN()+" password="+db.Server.Password())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	c.Exec(ctx, `DELETE FROM events WHERE seq = (SELECT seq FROM jobs WHERE id = 'f-03')`)
	c.Exec(ctx, `UPDATE jobs SET body = 'not json' WHERE id = 'f-04'`)
	rep, err = s.Verify(ctx)
	if !errors.Is(err, store.ErrCorrupt) || len(rep.Problems) != 2 {
		t.Fatalf("Verify of a damaged store = %+v %v, want 2 problems and ErrCorrupt", rep, err)
	}
	if _, err := s.Get(ctx, "f-04"); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Get of an unreadable body = %v, want ErrCorrupt", err)
	}
	if _, err := s.Get(ctx, "f-03"); err != nil {
		t.Fatal(err)
	}
	_ = bridge.Queued
}

// TestServerGone: with the server unreachable, writes fail with
// ErrUnavailable naming the database, not the password.
func TestServerGone(t *testing.T) {
	ctx := context.Background()
	s, err := pgstore.Open(ctx, pgstore.Config{DSN: "host=127.0.0.1 port=1 user=gridsub dbname=x sslmode=disable connect_timeout=2"}, pgstore.Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open of an unreachable server succeeded")
	}
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("Open of an unreachable server = %v, want ErrUnavailable naming it", err)
	}
}

// TestUsageAcrossBrokers: the accounted use one store wrote is what
// another store opened on the same database reads (a restarted broker, or
// a follower that takes over), and charges from both add up.
func TestUsageAcrossBrokers(t *testing.T) {
	ctx := context.Background()
	db := pgtest.DB(t)
	open := func() *pgstore.Postgres {
		s, err := pgstore.Open(ctx, pgstore.Config{DSN: db.DSN(), PasswordFile: db.Server.PasswordFile}, pgstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := open()
	c := bridge.Charge{User: "alice", NodeSeconds: 3600, At: storetest.T0, HalfLife: time.Hour}
	if err := a.PutCharged(ctx, storetest.Job("j1", "n", bridge.Completed), c); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b := open()
	defer b.Close()
	u, err := b.Usage(ctx)
	if err != nil || u["alice"].NodeSeconds != 3600 || !u["alice"].At.Equal(storetest.T0) {
		t.Fatalf("after reopening: %+v %v", u, err)
	}
	c.At = c.At.Add(time.Hour)
	if err := b.PutCharged(ctx, storetest.Job("j2", "n", bridge.Completed), c); err != nil {
		t.Fatal(err)
	}
	if u, _ := b.Usage(ctx); u["alice"].NodeSeconds != 3600*1.5 {
		t.Fatalf("two charges an hour apart: %+v, want 5400 node-seconds", u)
	}
}
