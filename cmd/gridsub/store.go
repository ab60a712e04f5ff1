package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/daemon"
	"github.com/gridsub/gridsub/bridge/store"
)

func newStoreCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "store",
		Short: "Check, back up and restore the daemon's database",
		Long: `The daemon keeps every job in its store: by default one SQLite file,
<state_dir>/gridsub.db (the state directory comes from broker.state_dir,
overridden by GRIDSUB_STATE_DIR), or a PostgreSQL database that several
brokers may share (store: {kind: postgres, dsn: ..., password_file: ...}).
These commands look after it:

  check            SQLite: integrity_check of the whole file; PostgreSQL:
                   the schema version, every job's body and its events
                   (read-only; with or without the daemon running)
  backup FILE      SQLite: a consistent copy into FILE (VACUUM INTO), made by
                   the running daemon or directly from the file; with --dump
                   (daemon stopped) the portable dump instead. PostgreSQL:
                   the portable dump, a snapshot taken while brokers run
  restore FILE     SQLite: put a backup in place of the database (the daemon
                   must be stopped; the replaced file is kept as
                   gridsub.db.bak-<time>), or load a dump into a new file.
                   PostgreSQL: load a dump into an empty database

The portable dump is JSON lines (one header, a line per row of every table,
a trailer with the counts): it restores into an empty SQLite or PostgreSQL
store, so it also moves a broker from one to the other.

The daemon checks the file whenever it starts (quick_check) and refuses an
empty or damaged one, leaving it untouched: restore a backup then, or move the
file aside to start with an empty database. While it runs, GET /v1/health
answers 503 with reason database_corrupt, database_read_only or disk_full
when the file is damaged, cannot be written or its disk is full.

Exit status: 0 done (the file is sound); 1 the check found damage; 2 a usage
error or a daemon in the way; 3 the command could not do its work.`,
		Example: `  gridsub store check
  gridsub store backup ~/gridsub-$(date +%F).db     # daemon running or not
  gridsub store check --file ~/gridsub-2026-11-24.db
  kill $(cat ~/.local/state/gridsub/gridsub.lock)   # stop the daemon, then
  gridsub store restore ~/gridsub-2026-11-24.db
  gridsub store backup --dump ~/gridsub.jsonl        # SQLite -> portable dump
  GRIDSUB_CONFIG=pg.yaml gridsub store restore ~/gridsub.jsonl   # into an empty PostgreSQL`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	c.AddCommand(newStoreCheckCmd(g), newStoreBackupCmd(g), newStoreRestoreCmd(g))
	return c
}

// storePaths returns the state directory, its database file and the
// daemon's socket.
func storePaths(g *globals) (stateDir, db, socket string, err error) {
	cfg, err := loadConfig(g)
	if err != nil {
		return "", "", "", usageErr(err)
	}
	stateDir, socket, err = daemonPaths(cfg)
	if err != nil {
		return "", "", "", usageErr(err)
	}
	return stateDir, filepath.Join(stateDir, daemon.DBName), socket, nil
}

func newStoreCheckCmd(g *globals) *cobra.Command {
	var quick bool
	var file string
	c := &cobra.Command{
		Use:   "check",
		Short: "Verify the database file (SQLite integrity_check), read-only",
		Long: `Check verifies <state_dir>/gridsub.db (or --file) without writing it: its
header, that it is a gridsub database this gridsub can read, and SQLite's
integrity_check (every page, every index against its table; about 0.7 s per
100,000 jobs). --quick runs quick_check instead (what the daemon runs at
start: the pages and their structure, not the indexes; about three times
faster).

It works with the daemon running (it then reads through SQLite's locks, as
the daemon's own readers do) or stopped (the file is then read as immutable:
nothing is created beside it). On damage it lists what SQLite found and exits
with status 1.`,
		Example: `  gridsub store check
  gridsub store check --quick --output json
  gridsub store check --file backup.db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pg, err := pgStoreOf(g); err != nil {
				return err
			} else if pg != nil && file == "" {
				rep, err := pgCheck(cmd.Context(), pg)
				return reportCheck(g, rep, err)
			}
			stateDir, db, _, err := storePaths(g)
			if err != nil {
				return err
			}
			live := false
			if file == "" {
				if live, _, err = daemon.LockHolder(stateDir); err != nil {
					return &exitError{exitInternal, err}
				}
			} else {
				db = file
			}
			rep, err := store.Check(cmd.Context(), db, store.CheckOptions{Full: !quick, Live: live})
			return reportCheck(g, rep, err)
		},
	}
	c.Flags().BoolVar(&quick, "quick", false, "run quick_check (no index contents) instead of integrity_check")
	c.Flags().StringVar(&file, "file", "", "check this database file (a backup) instead of the state directory's")
	return c
}

// checkJSON is the JSON output of store check, backup and restore.
type checkJSON struct {
	OK bool `json:"ok"`
	*store.Report
	Error string `json:"error,omitempty"`
	Kept  string `json:"kept,omitempty"` // restore: the replaced database
}

// reportCheck prints a check's report and gives its exit status.
func reportCheck(g *globals, rep *store.Report, err error) error {
	if rep == nil {
		return storeErr(g, err)
	}
	if g.json() {
		out := checkJSON{OK: err == nil, Report: rep}
		if err != nil {
			out.Error = err.Error()
		}
		if werr := writeJSON(g.stdout, out); werr != nil {
			return werr
		}
	} else {
		if err != nil && len(rep.Problems) == 0 {
			rep.Problems = []string{err.Error()} // never "ok" beside a failure
		}
		fmt.Fprintln(g.stdout, reportText(rep))
		for _, p := range rep.Problems {
			fmt.Fprintln(g.stdout, "  "+strings.ReplaceAll(p, "\n", "\n  "))
		}
	}
	return storeErr(g, err)
}

func reportText(rep *store.Report) string {
	verdict := "ok"
	if len(rep.Problems) > 0 {
		verdict = fmt.Sprintf("FAILED (%d problems)", len(rep.Problems))
	}
	return fmt.Sprintf("%s: %s %s — schema %d, %d jobs, %d bytes, %s", rep.Path, rep.Check, verdict,
		rep.Schema, rep.Jobs, rep.Bytes, rep.Took.Round(time.Millisecond))
}

// storeErr gives a store error its exit status (damage: 1, said on
// stderr here, as run does not print the errors of status 1).
func storeErr(g *globals, err error) error {
	var ee *exitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		return err
	case errors.Is(err, store.ErrCorrupt):
		fmt.Fprintln(g.stderr, "gridsub:", err)
		return &exitError{exitJobFailed, err}
	case errors.Is(err, daemon.ErrLocked), errors.Is(err, fs.ErrNotExist), errors.Is(err, store.ErrNewerSchema):
		return usageErr(err)
	}
	return &exitError{exitInternal, err}
}

func newStoreBackupCmd(g *globals) *cobra.Command {
	var dump bool
	c := &cobra.Command{
		Use:   "backup FILE",
		Short: "Copy the database into FILE (VACUUM INTO), daemon running or not",
		Long: `Backup writes a consistent copy of <state_dir>/gridsub.db into FILE, which
must not exist (a backup never overwrites); it is created with mode 0600, as
job requests may carry secrets in their environment.

When the daemon runs, it makes the copy itself (POST /v1/store/backup on its
unix socket: SQLite's VACUUM INTO, a snapshot that does not stop the
daemon). When none runs, backup takes the state directory's lock (so no
daemon starts meanwhile) and copies the file directly. Either way the copy is
checked with integrity_check before backup says it is done; a copy that
fails is removed.

The copy is compact (VACUUM INTO leaves free pages out) and a single file:
move it anywhere, check it with "gridsub store check --file FILE", put it
back with "gridsub store restore FILE".`,
		Example: `  gridsub store backup /backups/gridsub-$(date +%F).db
  gridsub store backup b.db --output json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stateDir, db, socket, err := storePaths(g)
			if err != nil {
				return err
			}
			dst, err := filepath.Abs(args[0])
			if err != nil {
				return usageErr(err)
			}
			if _, err := os.Lstat(dst); err == nil {
				return usageErr(fmt.Errorf("%s already exists; choose a new file name (a backup never overwrites)", dst))
			}
			pg, err := pgStoreOf(g)
			if err != nil {
				return err
			}
			var rep *store.Report
			switch {
			case pg != nil:
				rep, err = pgBackup(cmd.Context(), pg, dst)
			case dump:
				rep, err = sqliteDump(cmd.Context(), stateDir, db, dst)
			default:
				rep, err = backupViaDaemon(cmd.Context(), socket, dst)
				if errors.Is(err, api.ErrNoDaemon) {
					rep, err = backupDirect(cmd.Context(), stateDir, db, socket, dst)
				}
			}
			if err != nil {
				return storeErr(g, err)
			}
			if g.json() {
				return writeJSON(g.stdout, checkJSON{OK: true, Report: rep})
			}
			if pg != nil || dump {
				fmt.Fprintf(g.stdout, "dumped %d jobs from %s into %s (%d bytes)\n", rep.Jobs, rep.Path, dst, rep.Bytes)
				return nil
			}
			fmt.Fprintf(g.stdout, "backed up %d jobs into %s (%d bytes, integrity_check ok)\n", rep.Jobs, rep.Path, rep.Bytes)
			return nil
		},
	}
	c.Flags().BoolVar(&dump, "dump", false, "write the portable JSON-lines dump (restorable into SQLite or PostgreSQL) instead of a SQLite file; the daemon must be stopped")
	return c
}

// backupViaDaemon asks the daemon on socket to back its store up into
// dst. It returns an error wrapping api.ErrNoDaemon when none answers.
func backupViaDaemon(ctx context.Context, socket, dst string) (*store.Report, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
	body, _ := json.Marshal(daemon.BackupRequest{Path: dst})
	route := strings.TrimPrefix(daemon.BackupRoute, "POST ")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://gridsub"+route, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		var ne *net.OpError
		if errors.As(err, &ne) && ne.Op == "dial" {
			return nil, fmt.Errorf("%w on %s: %w", api.ErrNoDaemon, socket, err)
		}
		return nil, fmt.Errorf("asking the daemon at %s for a backup: %w", socket, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("the daemon at %s: %w", socket, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		err := fmt.Errorf("the daemon at %s could not back up: %s (HTTP %d)", socket, e.Error, resp.StatusCode)
		if resp.StatusCode == http.StatusBadRequest {
			return nil, usageErr(err)
		}
		return nil, err
	}
	var rep store.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("the daemon at %s answered the backup with %q: %w", socket, b, err)
	}
	return &rep, nil
}

// backupDirect backs db up with no daemon running, holding the state
// directory's lock meanwhile.
func backupDirect(ctx context.Context, stateDir, db, socket, dst string) (*store.Report, error) {
	if _, err := os.Stat(db); err != nil {
		return nil, fmt.Errorf("no database to back up: %w", err)
	}
	lock, err := daemon.LockStateDir(stateDir)
	if err != nil {
		if errors.Is(err, daemon.ErrLocked) {
			return nil, fmt.Errorf("no daemon answers on %s, but %w", socket, err)
		}
		return nil, err
	}
	defer lock.Release()
	return store.BackupFile(ctx, db, dst)
}

func newStoreRestoreCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "restore FILE",
		Short: "Replace the database with a backup (the daemon must be stopped)",
		Long: `Restore puts a copy of FILE (made by "gridsub store backup") in place of
<state_dir>/gridsub.db:

  1. it refuses while a daemon holds the state directory (stop it first), and
     holds the lock itself until done, so none starts meanwhile;
  2. it checks FILE with integrity_check and refuses a damaged file, one that
     is not a gridsub database, or one of a newer gridsub — nothing changes;
  3. it keeps the database it replaces (with its -wal and -shm, if a crash
     left them) as gridsub.db.bak-<UTC time> beside it, so a restore can be
     undone by moving that file back;
  4. it copies FILE in under a temporary name and renames it into place.

FILE itself is only read. The next "gridsub serve" starts from the restored
jobs: the ones submitted after the backup are only in the kept file.`,
		Example: `  gridsub store restore /backups/gridsub-2026-11-24.db
  gridsub store restore b.db --output json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pg, err := pgStoreOf(g); err != nil {
				return err
			} else if pg != nil {
				rep, err := pgRestore(cmd.Context(), pg, args[0])
				if err != nil {
					return storeErr(g, err)
				}
				if g.json() {
					return writeJSON(g.stdout, checkJSON{OK: true, Report: rep})
				}
				fmt.Fprintf(g.stdout, "restored %d jobs (schema %d) from %s into %s\n", rep.Jobs, rep.Schema, args[0], rep.Path)
				return nil
			}
			stateDir, db, _, err := storePaths(g)
			if err != nil {
				return err
			}
			lock, err := daemon.LockStateDir(stateDir)
			if err != nil {
				if errors.Is(err, daemon.ErrLocked) {
					return usageErr(fmt.Errorf("restore needs the daemon stopped: %w", err))
				}
				return storeErr(g, err)
			}
			defer lock.Release()
			if store.IsDump(args[0]) {
				rep, err := sqliteRestoreDump(cmd.Context(), args[0], db)
				if err != nil {
					return storeErr(g, err)
				}
				if g.json() {
					return writeJSON(g.stdout, checkJSON{OK: true, Report: rep})
				}
				fmt.Fprintf(g.stdout, "restored %d jobs (schema %d) from the dump %s into %s\n", rep.Jobs, rep.Schema, args[0], db)
				return nil
			}
			kept, rep, err := store.Restore(cmd.Context(), args[0], db, time.Now())
			if err != nil {
				if rep != nil && len(rep.Problems) > 0 && !g.json() {
					fmt.Fprintln(g.stdout, reportText(rep))
				}
				return storeErr(g, err)
			}
			if g.json() {
				return writeJSON(g.stdout, checkJSON{OK: true, Report: rep, Kept: kept})
			}
			fmt.Fprintf(g.stdout, "restored %s (%d jobs, schema %d) into %s\n", rep.Path, rep.Jobs, rep.Schema, db)
			if kept != "" {
				fmt.Fprintf(g.stdout, "the replaced database is kept as %s\n", kept)
			}
			return nil
		},
	}
}
