package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// maxProblems bounds the lines an integrity check reports.
const maxProblems = 20

// restoreHint tells an operator what to do with a database that is refused.
const restoreHint = "the file was left untouched — restore a backup (gridsub store restore FILE) or move it aside to start with an empty database"

// CheckOptions tune Check.
type CheckOptions struct {
	// Full runs PRAGMA integrity_check (every index against its table:
	// about three times the cost) instead of quick_check.
	Full bool
	// Live says another process (a running daemon) may be writing the file:
	// the check then reads it through SQLite's locks (mode=ro), which may
	// update SQLite's shared-memory index (-shm) but never the database or
	// its WAL. Without Live, a file with no WAL to replay is read as
	// immutable: no lock taken and no file created beside it.
	Live bool
}

// Report is what Check found in a database file.
type Report struct {
	Path     string        `json:"path"`
	Bytes    int64         `json:"bytes"`
	Schema   int           `json:"schema"`
	Jobs     int           `json:"jobs"`
	Check    string        `json:"check"`              // "quick_check" or "integrity_check"
	Problems []string      `json:"problems,omitempty"` // what SQLite found (at most 20 lines); none: sound
	Took     time.Duration `json:"took_ns"`
}

// Check verifies the gridsub database at path without writing it: its
// header, that it is a gridsub database this binary can read, and SQLite's
// quick_check (or integrity_check with opts.Full). A damaged file gives a
// report with the problems and an error wrapping ErrCorrupt; a missing one
// an error wrapping fs.ErrNotExist; a newer schema ErrNewerSchema.
func Check(ctx context.Context, path string, opts CheckOptions) (*Report, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: check %s: %w", path, err)
	}
	t0 := time.Now()
	rep := &Report{Path: abs, Check: "quick_check"}
	if opts.Full {
		rep.Check = "integrity_check"
	}
	fi, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("store: check: no database at %s: %w", abs, err)
		}
		return nil, fmt.Errorf("store: check: %w: %s: %w", ErrUnavailable, abs, err)
	}
	rep.Bytes = fi.Size()
	db, err := openVerify(abs, opts.Live)
	if err != nil {
		return failed(rep, err), fmt.Errorf("store: %w", err)
	}
	defer db.Close()
	rep.Schema, rep.Problems, err = verify(ctx, db, abs, opts.Full)
	if err == nil && rep.Schema > 0 {
		if qerr := db.QueryRowContext(ctx, `SELECT count(*) FROM jobs`).Scan(&rep.Jobs); qerr != nil {
			err = classify(abs, "counting the jobs of", qerr)
		}
	}
	rep.Took = time.Since(t0)
	if err != nil {
		return failed(rep, err), fmt.Errorf("store: %w", err)
	}
	return rep, nil
}

// failed makes sure a report of a failed check lists at least one
// problem: damage that makes SQLite's check fail outright (a damaged
// schema page, a header SQLite refuses) lists none of its own, and a
// report without problems reads as a sound file.
func failed(rep *Report, err error) *Report {
	if len(rep.Problems) == 0 {
		rep.Problems = []string{err.Error()}
	}
	return rep
}

// openVerify checks the header of the existing file at path and opens a
// connection that cannot write it. A file with no WAL to replay (a clean
// shutdown) is opened immutable unless live: SQLite then takes no lock and
// creates no -wal or -shm beside a file it may refuse. With a WAL (a crash,
// or a live writer) it must be read through SQLite's locking (mode=ro),
// which never writes the database or the WAL.
func openVerify(path string, live bool) (*sql.DB, error) {
	if err := checkHeader(path); err != nil {
		return nil, err
	}
	params := []string{"mode=ro", "_pragma=busy_timeout(5000)"}
	if wi, err := os.Stat(path + "-wal"); !live && (err != nil || wi.Size() == 0) {
		params = append(params, "immutable=1")
	}
	db, err := sql.Open("sqlite", dsn(path, params...))
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// verify reads the schema version (probe) and runs quick_check or
// integrity_check on db. A damaged file gives ErrCorrupt naming it, with
// what SQLite found.
func verify(ctx context.Context, db *sql.DB, path string, full bool) (version int, problems []string, err error) {
	version, err = probe(ctx, db, path)
	if err != nil {
		return version, nil, err
	}
	pragma := "quick_check"
	if full {
		pragma = "integrity_check"
	}
	rows, err := db.QueryContext(ctx, fmt.Sprintf(`PRAGMA %s(%d)`, pragma, maxProblems))
	if err != nil {
		return version, nil, corruptOr(path, pragma, err)
	}
	defer rows.Close()
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return version, problems, corruptOr(path, pragma, err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return version, problems, corruptOr(path, pragma, err)
	}
	if len(problems) > 0 {
		return version, problems, fmt.Errorf("%w: %s failed its %s (%s)", ErrCorrupt, path, pragma,
			strings.Join(problems[:min(len(problems), 3)], "; "))
	}
	return version, nil, nil
}

// corruptOr classifies an error of an integrity check: SQLite's own
// corruption codes become ErrCorrupt.
func corruptOr(path, pragma string, err error) error {
	return classify(path, "running "+pragma+" on", err)
}

// withHint adds hint to an ErrCorrupt error that does not tell yet how to
// restore a backup.
func withHint(err error, hint string) error {
	if errors.Is(err, ErrCorrupt) && !strings.Contains(err.Error(), "gridsub store restore") {
		return fmt.Errorf("%w; %s", err, hint)
	}
	return err
}

// createNew makes a new, empty gridsub database at path (which must not
// exist): built and migrated under a temporary name beside it, then linked
// into place, so a crash never leaves a half-made database at path — only a
// missing file ever becomes a new database, never an empty or damaged one.
// If another process creates path first, its database is kept.
func createNew(ctx context.Context, path, busy string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w: creating the directory of %s: %w", ErrUnavailable, path, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".new-*") // mode 0600
	if err != nil {
		return fmt.Errorf("%w: creating %s: %w", ErrUnavailable, path, err)
	}
	tmp := f.Name()
	f.Close()
	defer func() {
		for _, p := range []string{tmp, tmp + "-wal", tmp + "-shm", tmp + "-journal"} {
			os.Remove(p)
		}
	}()
	db, err := sql.Open("sqlite", dsn(tmp, busy, "_pragma=journal_mode(WAL)", "_pragma=synchronous(FULL)", "_txlock=immediate"))
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	err = migrate(ctx, db, tmp)
	if cerr := db.Close(); err == nil && cerr != nil {
		err = classify(tmp, "closing", cerr)
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: creating %s: %w", ErrUnavailable, path, err)
	}
	return syncDir(dir)
}

// syncDir makes the entries of dir durable (a new or renamed file).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("%w: syncing %s: %w", ErrUnavailable, dir, err)
	}
	return nil
}
