package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gridsub/gridsub/bridge/daemon"
	"github.com/gridsub/gridsub/bridge/store"
	"github.com/gridsub/gridsub/bridge/store/pgstore"
	"github.com/gridsub/gridsub/internal/config"
)

// storeConfig is the configuration's store section as the daemon takes it.
func storeConfig(cfg *config.Config) daemon.StoreConfig {
	return daemon.StoreConfig{Kind: cfg.Store.Kind, DSN: cfg.Store.DSN, PasswordFile: cfg.Store.PasswordFile, PasswordEnv: cfg.Store.PasswordEnv}
}

// sharedOptions are the store section's several-brokers options, or nil.
func sharedOptions(cfg *config.Config) *daemon.SharedOptions {
	if !cfg.Store.Shared {
		return nil
	}
	return &daemon.SharedOptions{Lease: cfg.Store.Lease}
}

// pgStoreOf returns the configuration's PostgreSQL store section, or nil
// when the store is SQLite.
func pgStoreOf(g *globals) (*config.Store, error) {
	cfg, err := loadConfig(g)
	if err != nil {
		return nil, usageErr(err)
	}
	if cfg.Store.Kind != daemon.StorePostgres {
		return nil, nil
	}
	return &cfg.Store, nil
}

func openPG(ctx context.Context, st *config.Store, opts pgstore.Options) (*pgstore.Postgres, error) {
	s, err := pgstore.Open(ctx, pgstore.Config{DSN: st.DSN, PasswordFile: st.PasswordFile, PasswordEnv: st.PasswordEnv}, opts)
	if err != nil && (errors.Is(err, pgstore.ErrPasswordInConfig) || errors.Is(err, store.ErrNewerSchema)) {
		return nil, usageErr(err)
	}
	return s, err
}

// pgCheck is gridsub store check of a PostgreSQL store: Verify, read-only
// (a database of an older schema is reported, not migrated).
func pgCheck(ctx context.Context, st *config.Store) (*store.Report, error) {
	s, err := openPG(ctx, st, pgstore.Options{NoMigrate: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Verify(ctx)
}

// pgBackup dumps a PostgreSQL store into dst (a snapshot: brokers keep
// running).
func pgBackup(ctx context.Context, st *config.Store, dst string) (*store.Report, error) {
	s, err := openPG(ctx, st, pgstore.Options{NoMigrate: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Backup(ctx, dst)
}

// pgRestore loads a dump into the PostgreSQL store, which must hold no job.
func pgRestore(ctx context.Context, st *config.Store, file string) (*store.Report, error) {
	if !store.IsDump(file) {
		return nil, usageErr(fmt.Errorf("%s is not a gridsub dump (a PostgreSQL store restores from the JSON-lines dump \"gridsub store backup\" writes; a SQLite backup file converts with \"gridsub store backup --dump\" on a SQLite configuration)", file))
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, usageErr(err)
	}
	defer f.Close()
	s, err := openPG(ctx, st, pgstore.Options{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	rep, err := s.LoadDump(ctx, f)
	if errors.Is(err, store.ErrNotEmpty) {
		return nil, usageErr(fmt.Errorf("%w: restore a dump into an empty database (create a new one and point store.dsn at it)", err))
	}
	return rep, err
}

// sqliteDump writes the portable dump of the state directory's SQLite
// file (daemon stopped: its lock is held meanwhile).
func sqliteDump(ctx context.Context, stateDir, db, dst string) (*store.Report, error) {
	lock, err := daemon.LockStateDir(stateDir)
	if err != nil {
		if errors.Is(err, daemon.ErrLocked) {
			return nil, usageErr(fmt.Errorf("backup --dump reads the file directly: stop the daemon first (or make a plain backup while it runs): %w", err))
		}
		return nil, err
	}
	defer lock.Release()
	if _, err := os.Stat(db); err != nil {
		return nil, fmt.Errorf("no database to dump: %w", err)
	}
	s, err := store.Open(ctx, db, store.Options{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return store.DumpToFile(ctx, s, dst)
}

// sqliteRestoreDump loads a dump into a new SQLite file at db (which must
// not exist: a dump fills an empty database).
func sqliteRestoreDump(ctx context.Context, file, db string) (*store.Report, error) {
	if _, err := os.Lstat(db); err == nil {
		return nil, usageErr(fmt.Errorf("a dump restores into an empty database, and %s exists: move it aside first (mv %s %s.bak)", db, db, db))
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, usageErr(err)
	}
	defer f.Close()
	s, err := store.Open(ctx, db, store.Options{})
	if err != nil {
		return nil, err
	}
	rep, err := s.LoadDump(ctx, f)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// Nothing of the dump was committed: leave no empty database.
		for _, p := range []string{db, db + "-wal", db + "-shm"} {
			os.Remove(p)
		}
		return nil, err
	}
	rep.Path = filepath.Clean(db)
	return rep, nil
}

// serviceStatus is gridsub status without a job id: who leads the shared
// store, asked of the daemon on the socket.
func serviceStatus(ctx context.Context, g *globals) error {
	cfg, err := loadConfig(g)
	if err != nil {
		return usageErr(err)
	}
	_, socket, err := daemonPaths(cfg)
	if err != nil {
		return usageErr(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://gridsub"+strings.TrimPrefix(daemon.ServiceRoute, "GET "), nil)
	resp, err := hc.Do(req)
	if err != nil {
		return &exitError{exitInternal, fmt.Errorf("no gridsub daemon answers at %s: %w (start one: gridsub serve &)", socket, err)}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == http.StatusNotFound {
		if g.json() {
			return writeJSON(g.stdout, map[string]any{"shared": false, "role": "leader"})
		}
		fmt.Fprintf(g.stdout, "the daemon at %s is the only broker of its store (store.shared is off); give a job id for a job's status\n", socket)
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		return &exitError{exitInternal, fmt.Errorf("the daemon at %s: HTTP %d: %s", socket, resp.StatusCode, strings.TrimSpace(string(b)))}
	}
	var l daemon.Leadership
	if err := json.Unmarshal(b, &l); err != nil {
		return &exitError{exitInternal, fmt.Errorf("the daemon at %s answered %q: %w", socket, b, err)}
	}
	if g.json() {
		return writeJSON(g.stdout, l)
	}
	leader := l.Leader
	if leader == "" {
		leader = "none (the lease has lapsed; a broker takes over within a lease)"
	}
	fmt.Fprintf(g.stdout, "this broker  %s (%s)\nleader       %s\nepoch        %d\nfollowers    %d", l.Broker, l.Role, leader, l.Epoch, len(l.Followers))
	for _, f := range l.Followers {
		fmt.Fprintf(g.stdout, "\n  %s", f)
	}
	fmt.Fprintln(g.stdout)
	return nil
}
