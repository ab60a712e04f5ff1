package store

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The portable dump: JSON lines, one header, one line per row of every
// table, one trailer. It is what a PostgreSQL store's Backup writes and what
// LoadDump reads into an empty SQLite or PostgreSQL store (either way):
//
//	{"gridsub_dump":1,"schema":5,"from":"postgres","at":"2026-11-28T12:00:00Z"}
//	{"t":"jobs","r":[1,"g…-1","queued","name","",1764331200000000000,1,"eyJJRCI6…"]}
//	...
//	{"end":true,"rows":1234,"jobs":100}
//
// A row is its columns in DumpTables' order: integers and reals as JSON
// numbers, text as strings, bytes as base64, NULL as null. The trailer's
// counts catch a truncated dump (ErrCorrupt).

// DumpFormat is the version of the dump format this binary writes.
const DumpFormat = 1

// dumpMagic starts every dump: IsDump looks for it.
const dumpMagic = `{"gridsub_dump":`

// Column types of the dump.
const (
	colInt   = 'i' // int64
	colReal  = 'f' // float64
	colText  = 't' // string
	colBytes = 'b' // []byte, base64 in the dump
)

// DumpTable is one table of the dump: its columns, their types (one
// letter each: i int64, f float64, t text, b bytes), which may be NULL
// ('y'), and the order its rows are written in.
type DumpTable struct {
	Name    string
	Cols    []string
	Types   string
	Null    string // 'y' per nullable column, '-' otherwise
	OrderBy string
}

// DumpTables are the tables of schema version SchemaVersion, in the order
// they are written and loaded (parents before children).
var DumpTables = []DumpTable{
	{"jobs", []string{"seq", "id", "state", "name", "sites", "updated", "n_events", "body"}, "itttttib", "--------", "seq"},
	{"job_sites", []string{"site", "seq"}, "ti", "--", "seq, site"},
	{"events", []string{"seq", "n", "time", "kind", "site", "msg"}, "iitttt", "------", "seq, n"},
	{"counters", []string{"name", "value"}, "ti", "--", "name"},
	{"kv", []string{"key", "value", "updated"}, "tbi", "---", "key"},
	{"sites", []string{"name", "probed", "error", "ok_at", "nodes", "free_nodes", "queued", "running",
		"link_at", "bytes_per_s", "latency_ns", "completed", "failed", "trust", "trust_at", "outages",
		"recent_at", "recent_completed", "recent_failed", "recent_outages", "folded_completed", "folded_failed", "folded_outages"},
		"titiiiiiifiiifiiifffiii", "-y-y----yyy--yy-y------", "name"},
	{"reservations", []string{"seq", "state", "earliest", "latest", "nodes", "site", "start", "native", "reason"},
		"itiiititt", "------y--", "seq"},
}

type dumpHeader struct {
	Format int       `json:"gridsub_dump"`
	Schema int       `json:"schema"`
	From   string    `json:"from"`
	At     time.Time `json:"at"`
}

type dumpLine struct {
	T    string            `json:"t,omitempty"`
	R    []json.RawMessage `json:"r,omitempty"`
	End  bool              `json:"end,omitempty"`
	Rows int64             `json:"rows,omitempty"`
	Jobs int64             `json:"jobs,omitempty"`
}

// IsDump reports whether the file at path starts like a portable dump.
func IsDump(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, len(dumpMagic))
	n, _ := io.ReadFull(f, b)
	return string(b[:n]) == dumpMagic
}

// querier is what dumpTx reads through (a *sql.Tx).
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// execer is what loadTx writes through (a *sql.Tx).
type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// WriteDump writes every table read through q (one read transaction, so
// one snapshot) to w in the dump format. from names the kind of store.
func WriteDump(ctx context.Context, q querier, w io.Writer, from string) (*Report, error) {
	start := time.Now()
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(dumpHeader{Format: DumpFormat, Schema: SchemaVersion, From: from, At: time.Now().UTC()}); err != nil {
		return nil, err
	}
	var total, jobs int64
	for _, t := range DumpTables {
		rows, err := q.QueryContext(ctx, "SELECT "+strings.Join(t.Cols, ", ")+" FROM "+t.Name+" ORDER BY "+t.OrderBy)
		if err != nil {
			return nil, fmt.Errorf("dumping %s: %w", t.Name, err)
		}
		dest := make([]any, len(t.Cols))
		for i := range dest {
			switch t.Types[i] {
			case colInt:
				dest[i] = new(sql.NullInt64)
			case colReal:
				dest[i] = new(sql.NullFloat64)
			case colText:
				dest[i] = new(sql.NullString)
			case colBytes:
				dest[i] = new([]byte)
			}
		}
		line := dumpLine{T: t.Name, R: make([]json.RawMessage, len(t.Cols))}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				rows.Close()
				return nil, fmt.Errorf("dumping %s: %w", t.Name, err)
			}
			for i, d := range dest {
				var v any
				switch x := d.(type) {
				case *sql.NullInt64:
					if x.Valid {
						v = x.Int64
					}
				case *sql.NullFloat64:
					if x.Valid {
						v = x.Float64
					}
				case *sql.NullString:
					if x.Valid {
						v = x.String
					}
				case *[]byte:
					if *x != nil {
						v = base64.StdEncoding.EncodeToString(*x)
					}
				}
				b, err := json.Marshal(v)
				if err != nil {
					rows.Close()
					return nil, fmt.Errorf("dumping %s: %w", t.Name, err)
				}
				line.R[i] = b
			}
			if err := enc.Encode(&line); err != nil {
				rows.Close()
				return nil, err
			}
			total++
			if t.Name == "jobs" {
				jobs++
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, fmt.Errorf("dumping %s: %w", t.Name, err)
		}
	}
	if err := enc.Encode(dumpLine{End: true, Rows: total, Jobs: jobs}); err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return &Report{Schema: SchemaVersion, Jobs: int(jobs), Check: "dump", Took: time.Since(start)}, nil
}

// Placeholder numbers a statement's parameters: "?" for SQLite, "$n" for
// PostgreSQL.
type Placeholder func(n int) string

// LoadDumpInto reads a dump from r and inserts every row through tx (the
// caller's transaction: it commits on success and rolls back otherwise). It
// refuses a target that holds jobs or sites (ErrNotEmpty), a dump of
// another schema version (ErrNewerSchema when newer), and a damaged or
// truncated dump (ErrCorrupt), naming the line.
func LoadDumpInto(ctx context.Context, tx execer, r io.Reader, ph Placeholder) (*Report, error) {
	start := time.Now()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM sites)`).Scan(&n); err != nil {
		return nil, err
	}
	if n > 0 {
		return nil, fmt.Errorf("%w: it holds %d jobs and sites; restore a dump into an empty database", ErrNotEmpty, n)
	}
	br := bufio.NewReaderSize(r, 1<<16)
	lineNo := 0
	next := func() ([]byte, error) {
		lineNo++
		b, err := br.ReadBytes('\n')
		if err == io.EOF && len(b) > 0 {
			err = nil
		}
		return bytes.TrimSpace(b), err
	}
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: line %d: %s", ErrCorrupt, lineNo, fmt.Sprintf(f, a...))
	}
	b, err := next()
	if err != nil {
		return nil, bad("no header: %v", err)
	}
	var h dumpHeader
	if err := json.Unmarshal(b, &h); err != nil || h.Format == 0 {
		return nil, bad("not a gridsub dump (no {\"gridsub_dump\":...} header)")
	}
	switch {
	case h.Format > DumpFormat:
		return nil, fmt.Errorf("%w: dump format %d, this gridsub reads %d: upgrade gridsub", ErrNewerSchema, h.Format, DumpFormat)
	case h.Schema > SchemaVersion:
		return nil, fmt.Errorf("%w: the dump has schema %d, this gridsub knows %d: upgrade gridsub", ErrNewerSchema, h.Schema, SchemaVersion)
	case h.Schema < SchemaVersion:
		return nil, fmt.Errorf("the dump has schema %d from an older gridsub (this one writes %d): restore it with that gridsub, then start this one on it to migrate", h.Schema, SchemaVersion)
	}
	tables := map[string]*DumpTable{}
	stmts := map[string]string{}
	for i := range DumpTables {
		t := &DumpTables[i]
		tables[t.Name] = t
		ps := make([]string, len(t.Cols))
		for k := range ps {
			ps[k] = ph(k + 1)
		}
		q := "INSERT INTO " + t.Name + "(" + strings.Join(t.Cols, ", ") + ") VALUES (" + strings.Join(ps, ", ") + ")"
		if t.Name == "counters" || t.Name == "kv" {
			// A new store already has its counters and may have a value
			// (the health probe's): the dump's win.
			var set []string
			for _, c := range t.Cols[1:] {
				set = append(set, c+" = excluded."+c)
			}
			q += " ON CONFLICT(" + t.Cols[0] + ") DO UPDATE SET " + strings.Join(set, ", ")
		}
		stmts[t.Name] = q
	}
	var total, jobs int64
	for {
		b, err := next()
		if err == io.EOF {
			return nil, bad("the dump ends without its trailer: it is truncated")
		}
		if err != nil {
			return nil, fmt.Errorf("reading the dump: %w", err)
		}
		var l dumpLine
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, bad("%v", err)
		}
		if l.End {
			if l.Rows != total || l.Jobs != jobs {
				return nil, bad("the trailer counts %d rows and %d jobs, the dump has %d and %d", l.Rows, l.Jobs, total, jobs)
			}
			break
		}
		t := tables[l.T]
		if t == nil {
			return nil, bad("unknown table %q", l.T)
		}
		if len(l.R) != len(t.Cols) {
			return nil, bad("%s row with %d columns, want %d", l.T, len(l.R), len(t.Cols))
		}
		args := make([]any, len(l.R))
		for i, raw := range l.R {
			if string(raw) == "null" {
				if t.Null[i] != 'y' {
					return nil, bad("%s.%s is null", l.T, t.Cols[i])
				}
				continue
			}
			var err error
			switch t.Types[i] {
			case colInt:
				var v int64
				err = json.Unmarshal(raw, &v)
				args[i] = v
			case colReal:
				var v float64
				err = json.Unmarshal(raw, &v)
				args[i] = v
			case colText:
				var v string
				err = json.Unmarshal(raw, &v)
				args[i] = v
			case colBytes:
				var v string
				if err = json.Unmarshal(raw, &v); err == nil {
					var d []byte
					d, err = base64.StdEncoding.DecodeString(v)
					if d == nil {
						d = []byte{}
					}
					args[i] = d
				}
			}
			if err != nil {
				return nil, bad("%s.%s: %v", l.T, t.Cols[i], err)
			}
		}
		if _, err := tx.ExecContext(ctx, stmts[l.T], args...); err != nil {
			return nil, fmt.Errorf("loading line %d (%s): %w", lineNo, l.T, err)
		}
		total++
		if l.T == "jobs" {
			jobs++
		}
	}
	return &Report{Schema: h.Schema, Jobs: int(jobs), Check: "dump", Took: time.Since(start)}, nil
}

// createExcl creates dst for a backup: never over an existing file, mode
// 0600.
func createExcl(dst string) (*os.File, string, error) {
	abs, err := filepath.Abs(dst)
	if err != nil {
		return nil, "", err
	}
	f, err := os.OpenFile(abs, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if os.IsExist(err) {
			return nil, "", fmt.Errorf("%s already exists; choose a new file name (a backup never overwrites)", abs)
		}
		return nil, "", err
	}
	return f, abs, nil
}

// DumpToFile writes s's dump into the new file dst (0600, never over an
// existing file), fsyncs it and reports; on failure dst is removed.
func DumpToFile(ctx context.Context, s interface {
	Dump(ctx context.Context, w io.Writer) (*Report, error)
}, dst string) (*Report, error) {
	f, abs, err := createExcl(dst)
	if err != nil {
		return nil, fmt.Errorf("store: backup: %w", err)
	}
	rep, err := s.Dump(ctx, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(filepath.Dir(abs))
	}
	if err != nil {
		os.Remove(abs)
		return nil, fmt.Errorf("store: backup into %s: %w", abs, err)
	}
	if fi, err := os.Stat(abs); err == nil {
		rep.Bytes = fi.Size()
	}
	rep.Path = abs
	return rep, nil
}

func init() {
	for _, t := range DumpTables {
		if len(t.Types) != len(t.Cols) || len(t.Null) != len(t.Cols) {
			panic("store: DumpTables " + t.Name + ": types or nulls do not match the columns")
		}
	}
}

// Dump implements Store: every table from one read transaction.
func (s *SQLite) Dump(ctx context.Context, w io.Writer) (*Report, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: dump: %w", s.wrap("reading", err))
	}
	defer tx.Rollback()
	rep, err := WriteDump(ctx, tx, w, "sqlite")
	if err != nil {
		return nil, fmt.Errorf("store: dump of %s: %w", s.path, s.wrap("reading", err))
	}
	rep.Path = s.path
	return rep, nil
}

// LoadDump implements Store: the whole dump in one write transaction;
// nothing of it stays when any line fails.
func (s *SQLite) LoadDump(ctx context.Context, r io.Reader) (*Report, error) {
	var rep *Report
	var dumpErr error
	err := s.write(ctx, func(w *wtx) error {
		rep, dumpErr = LoadDumpInto(w.ctx, w.tx, r, func(int) string { return "?" })
		return dumpErr
	})
	if dumpErr != nil && errors.Is(dumpErr, ErrCorrupt) {
		// The dump is damaged, not the database: nothing was written.
		return nil, fmt.Errorf("store: the dump is not loadable into %s, nothing was written: %w", s.path, dumpErr)
	}
	if err != nil {
		return nil, fmt.Errorf("store: loading a dump into %s: %w", s.path, s.wrap("writing", err))
	}
	// The id blocks handed out from memory may predate the load.
	s.idMu.Lock()
	s.nextID, s.maxID = 0, 0
	s.idMu.Unlock()
	rep.Path = s.path
	return rep, nil
}
