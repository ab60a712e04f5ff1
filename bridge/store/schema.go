package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
)

// migration is one step of the schema. Steps are applied in order, each
// exactly once, all pending ones in one transaction at Open.
type migration struct {
	version int
	what    string
	sql     string
}

// migrations is the schema history. Append only: never edit a step that has
// shipped, add a new one.
var migrations = []migration{
	{1, "jobs, their sites and events; the id sequence", `
CREATE TABLE jobs (
	seq      INTEGER PRIMARY KEY,          -- submission order (first Put)
	id       TEXT    NOT NULL UNIQUE,      -- the grid job id
	state    TEXT    NOT NULL,
	name     TEXT    NOT NULL,
	sites    TEXT    NOT NULL,             -- display form "A:32+B:16"
	updated  INTEGER NOT NULL,             -- unix nanoseconds of the last Put
	n_events INTEGER NOT NULL,             -- events of this job stored in events
	body     BLOB    NOT NULL              -- bridge.Job as JSON, Events left out
);
CREATE INDEX jobs_state ON jobs(state, seq);
CREATE INDEX jobs_name ON jobs(name, seq);
CREATE INDEX jobs_updated ON jobs(updated);
CREATE TABLE job_sites (
	site TEXT    NOT NULL,
	seq  INTEGER NOT NULL REFERENCES jobs(seq) ON DELETE CASCADE,
	PRIMARY KEY (site, seq)
) WITHOUT ROWID;
CREATE INDEX job_sites_seq ON job_sites(seq);
CREATE TABLE events (
	seq  INTEGER NOT NULL REFERENCES jobs(seq) ON DELETE CASCADE,
	n    INTEGER NOT NULL,                 -- index in Job.Events
	time TEXT    NOT NULL,                 -- RFC 3339 with nanoseconds, offset kept
	kind TEXT    NOT NULL,
	site TEXT    NOT NULL,
	msg  TEXT    NOT NULL,
	PRIMARY KEY (seq, n)
) WITHOUT ROWID;
CREATE TABLE counters (
	name  TEXT PRIMARY KEY,
	value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO counters(name, value) VALUES ('next_id', 0);
`},
	{2, "broker values: site health, trust and other state beside the jobs", `
CREATE TABLE kv (
	key     TEXT    PRIMARY KEY,
	value   BLOB    NOT NULL,
	updated INTEGER NOT NULL               -- unix nanoseconds of the last write
) WITHOUT ROWID;
`},
	{3, "site health: last probe, last good numbers, measured link, job outcomes, trust", `
CREATE TABLE sites (
	name        TEXT    PRIMARY KEY,
	probed      INTEGER,                   -- unix ns of the last probe; NULL = never probed
	error       TEXT    NOT NULL DEFAULT '', -- the last probe's error; '' = it succeeded
	ok_at       INTEGER,                   -- unix ns of the last successful probe; NULL = never
	nodes       INTEGER NOT NULL DEFAULT 0,  -- the numbers of the probe at ok_at
	free_nodes  INTEGER NOT NULL DEFAULT 0,
	queued      INTEGER NOT NULL DEFAULT 0,
	running     INTEGER NOT NULL DEFAULT 0,
	link_at     INTEGER,                   -- unix ns of the probe that recorded the link; NULL = never measured
	bytes_per_s REAL,                      -- measured transfer rate
	latency_ns  INTEGER,                   -- measured per-transfer latency
	completed   INTEGER NOT NULL DEFAULT 0,  -- jobs that ended completed with a component here
	failed      INTEGER NOT NULL DEFAULT 0,  -- jobs that ended failed with a component here
	trust       REAL,                      -- NULL = not computed (a trust policy writes it)
	trust_at    INTEGER                    -- unix ns when it was computed
) WITHOUT ROWID;
INSERT INTO sites(name, completed, failed)
	SELECT s.site, sum(j.state = 'completed'), sum(j.state = 'failed')
	FROM job_sites AS s JOIN jobs AS j ON j.seq = s.seq
	WHERE j.state IN ('completed', 'failed')
	GROUP BY s.site;
`},
	{4, "advance reservations (one row per job that asked for a window); outages counted for trust", `
CREATE TABLE reservations (
	seq      INTEGER PRIMARY KEY REFERENCES jobs(seq) ON DELETE CASCADE,
	state    TEXT    NOT NULL,             -- admitted, binding, bound, released, failed
	earliest INTEGER NOT NULL,             -- unix ns: the window
	latest   INTEGER NOT NULL,
	nodes    INTEGER NOT NULL,
	site     TEXT    NOT NULL DEFAULT '',  -- bound site; '' until binding
	start    INTEGER,                      -- unix ns of the bound start; NULL until binding
	native   TEXT    NOT NULL DEFAULT '',  -- the site's reservation id
	reason   TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX reservations_state ON reservations(state, earliest);
ALTER TABLE sites ADD COLUMN outages INTEGER NOT NULL DEFAULT 0; -- times a probe found the site unreachable after a good (or no) probe, for trust
`},
	{5, "recent outcomes for trust: the counts with older ones decayed, and the raw counts folded in", `
ALTER TABLE sites ADD COLUMN recent_at INTEGER;          -- unix ns the decayed counts are as of; NULL = never decayed
ALTER TABLE sites ADD COLUMN recent_completed REAL NOT NULL DEFAULT 0;
ALTER TABLE sites ADD COLUMN recent_failed REAL NOT NULL DEFAULT 0;
ALTER TABLE sites ADD COLUMN recent_outages REAL NOT NULL DEFAULT 0;
ALTER TABLE sites ADD COLUMN folded_completed INTEGER NOT NULL DEFAULT 0; -- the raw counts (completed, failed, outages) they include
ALTER TABLE sites ADD COLUMN folded_failed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sites ADD COLUMN folded_outages INTEGER NOT NULL DEFAULT 0;
`},
}

// SchemaVersion is the schema version this binary writes.
const SchemaVersion = 5

func init() {
	for i, m := range migrations {
		if m.version != i+1 {
			panic(fmt.Sprintf("store: migration %d has version %d; versions must be 1, 2, 3, ... in order", i, m.version))
		}
	}
	if migrations[len(migrations)-1].version != SchemaVersion {
		panic("store: SchemaVersion is not the last migration's version")
	}
}

const sqliteMagic = "SQLite format 3\x00"

// checkHeader reads the first bytes of an existing file and refuses what is
// not a sound SQLite database: wrong magic, an impossible page size, or a
// file shorter than the page count its header records (truncated), or an
// empty file. It only reads. A missing file passes.
func checkHeader(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: cannot stat %s: %w", ErrUnavailable, path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is a %s, not a database file", ErrUnavailable, path, kind(fi.Mode()))
	}
	if fi.Size() == 0 {
		// Only a missing file becomes a new database (Open makes it under
		// another name and links it into place): an empty one is what is
		// left of a database someone truncated, and is not silently
		// replaced by an empty store.
		return fmt.Errorf("%w: %s is empty (0 bytes), not a gridsub database; %s", ErrCorrupt, path, restoreHint)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: cannot read %s (check its owner and mode, and that gridsub runs as the right user): %w", ErrUnavailable, path, err)
	}
	defer f.Close()
	var h [100]byte
	n, err := io.ReadFull(f, h[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: cannot read %s: %w", ErrUnavailable, path, err)
	}
	bad := func(why string) error {
		return fmt.Errorf("%w: %s is not a valid gridsub database (%s); %s", ErrCorrupt, path, why, restoreHint)
	}
	if n < len(h) || !bytes.Equal(h[:16], []byte(sqliteMagic)) {
		shown := min(n, 16)
		return bad(fmt.Sprintf("no SQLite header: it starts with %s", strconv.Quote(string(h[:shown]))))
	}
	ps := int64(binary.BigEndian.Uint16(h[16:18]))
	if ps == 1 {
		ps = 65536
	}
	if ps < 512 || ps > 65536 || ps&(ps-1) != 0 {
		return bad(fmt.Sprintf("impossible page size %d in the header", ps))
	}
	if wi, err := os.Stat(path + "-wal"); err == nil && wi.Size() > 0 {
		// A WAL holds committed pages not yet copied back (a crash, or a
		// checkpoint that ran out of space half way): the main file may
		// be shorter than its header says until SQLite replays it.
		return nil
	}
	pages := int64(binary.BigEndian.Uint32(h[28:32]))
	change, valid := binary.BigEndian.Uint32(h[24:28]), binary.BigEndian.Uint32(h[92:96])
	if pages > 0 && change == valid && fi.Size() < pages*ps {
		return bad(fmt.Sprintf("truncated: %d bytes, the header records %d pages of %d bytes", fi.Size(), pages, ps))
	}
	if fi.Size()%ps != 0 {
		return bad(fmt.Sprintf("truncated: %d bytes is not a whole number of %d-byte pages", fi.Size(), ps))
	}
	return nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// probe reads the schema version of an existing database through a
// connection that cannot write (query_only). It returns 0 for a database
// without tables (a new file), ErrCorrupt for a SQLite database that gridsub
// did not create, and ErrNewerSchema for one from a newer gridsub.
func probe(ctx context.Context, db *sql.DB, path string) (int, error) {
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		return 0, classify(path, "reading", err)
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return 0, classify(path, "reading", err)
		}
		tables = append(tables, t)
	}
	if err := rows.Close(); err != nil {
		return 0, classify(path, "reading", err)
	}
	if err := rows.Err(); err != nil {
		return 0, classify(path, "reading", err)
	}
	if len(tables) == 0 {
		return 0, nil
	}
	var v int
	err = db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v)
	if err != nil {
		if code(err) != 0 && !errors.Is(err, sql.ErrNoRows) {
			if c := classify(path, "reading", err); errors.Is(c, ErrCorrupt) || errors.Is(c, ErrUnavailable) {
				return 0, c
			}
		}
		return 0, fmt.Errorf("%w: %s is a SQLite database but not a valid gridsub database (no schema version: %v; tables %v); the file was left untouched", ErrCorrupt, path, err, tables)
	}
	if v > SchemaVersion {
		return v, newerErr(path, v)
	}
	return v, nil
}

func newerErr(path string, v int) error {
	return fmt.Errorf("%w: %s has schema version %d, this gridsub knows versions up to %d; upgrade gridsub to open it (the file was not modified)", ErrNewerSchema, path, v, SchemaVersion)
}

// migrate applies every pending migration in one write transaction on the
// writer connection. It checks the version again inside the transaction, so
// two processes opening the same file at once cannot both migrate.
func migrate(ctx context.Context, db *sql.DB, path string) error {
	return migrateTo(ctx, db, path, SchemaVersion)
}

// migrateTo applies the migrations up to target (tests build old files
// with it).
func migrateTo(ctx context.Context, db *sql.DB, path string, target int) error {
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see the writer DSN)
	if err != nil {
		return classify(path, "migrating", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return classify(path, "migrating", err)
	}
	v := 0
	err = tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version(version) VALUES (0)`); err != nil {
			return classify(path, "migrating", err)
		}
	case err != nil:
		return classify(path, "migrating", err)
	}
	if v > SchemaVersion {
		return newerErr(path, v)
	}
	if v >= target {
		return nil // nothing to do; the rollback ends the empty transaction
	}
	for _, m := range migrations {
		if m.version <= v || m.version > target {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return classify(path, fmt.Sprintf("migrating to schema version %d (%s) on", m.version, m.what), err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, target); err != nil {
		return classify(path, "migrating", err)
	}
	return classify(path, "committing the schema of", tx.Commit())
}
