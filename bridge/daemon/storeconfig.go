package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/gridsub/gridsub/bridge/store"
	"github.com/gridsub/gridsub/bridge/store/pgstore"
)

// Store kinds (the configuration's store.kind).
const (
	StoreSQLite   = "sqlite"   // one file, <state_dir>/gridsub.db (the default)
	StorePostgres = "postgres" // a PostgreSQL database, which several brokers may share
)

// StoreConfig is the configuration's store section. The password of a
// PostgreSQL store is never in it: DSN must not carry one (Open refuses
// it), PasswordFile or PasswordEnv say where it is.
type StoreConfig struct {
	Kind         string // StoreSQLite ("" too) or StorePostgres
	DSN          string // postgres: libpq keyword/value string or postgres:// URL, no password
	PasswordFile string // postgres: a file (mode 0600) whose first line is the password
	PasswordEnv  string // postgres: the environment variable holding the password
}

// OpenStore opens the store cfg describes: the SQLite file in stateDir,
// or the PostgreSQL database (migrated to this binary's schema).
func OpenStore(ctx context.Context, cfg StoreConfig, stateDir string, log *slog.Logger) (store.Store, error) {
	switch cfg.Kind {
	case "", StoreSQLite:
		if cfg.DSN != "" || cfg.PasswordFile != "" || cfg.PasswordEnv != "" {
			return nil, fmt.Errorf("store: dsn, password_file and password_env are for kind %q; the sqlite store is %s",
				StorePostgres, filepath.Join(stateDir, DBName))
		}
		// A failed Open's nil *SQLite must not become a non-nil Store.
		s, err := store.Open(ctx, filepath.Join(stateDir, DBName), store.Options{Logger: log})
		if err != nil {
			return nil, err
		}
		return s, nil
	case StorePostgres:
		s, err := pgstore.Open(ctx, pgstore.Config{DSN: cfg.DSN, PasswordFile: cfg.PasswordFile, PasswordEnv: cfg.PasswordEnv},
			pgstore.Options{Logger: log})
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("store: kind %q is unknown; use %q (the default) or %q", cfg.Kind, StoreSQLite, StorePostgres)
}
