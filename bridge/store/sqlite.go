package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/bridge"
	_ "modernc.org/sqlite" // registers the "sqlite" driver (pure Go, no cgo)
)

// Options tune a SQLite store. The zero value is a sound default.
type Options struct {
	// BusyTimeout is how long a statement waits for a lock held by another
	// process before failing with ErrUnavailable (default 5s).
	BusyTimeout time.Duration
	// IDBlock is how many job numbers NextID reserves with one durable
	// write (default 100). After a crash the unused rest of a block is
	// skipped, never handed out again.
	IDBlock int
	// MaxBatch bounds how many concurrent writes share one commit (group
	// commit; default 512).
	MaxBatch int
	// ReadConns is the number of connections serving Get and List
	// concurrently with the writer (default 4).
	ReadConns int
	// MaxPages, when > 0, caps the database at that many pages (SQLite's
	// max_page_count; pages are 4096 bytes): writes beyond fail with
	// ErrDiskFull. For quotas and tests; 0 = only the file system limits.
	MaxPages int
	// HealthEvery is how long Health reuses its answer (default 5s): its
	// probe costs a durable write.
	HealthEvery time.Duration
	// CheckEvery is how often Health starts a quick_check of the whole
	// file in the background (default 10m; < 0 never). Its cost grows with
	// the file (about 0.25 s for 100,000 jobs, 140 MB).
	CheckEvery time.Duration
	// MinFree is the free space on the database's file system below which
	// Health reports ErrDiskFull (default 1 MiB).
	MinFree int64
	// Now stamps each Put's "updated" time (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// SQLite is a bridge.Store in one SQLite file. It is safe for concurrent
// use; see the package documentation for the schema and the guarantees.
type SQLite struct {
	path string
	opts Options
	w    *sql.DB // the one writer connection, owned by the commit loop
	r    *sql.DB // readers (query_only)
	log  *slog.Logger

	ops      chan *op
	prepared map[string]*sql.Stmt // owned by the commit loop
	quit     chan struct{}
	done     chan struct{}
	once     sync.Once

	idMu          sync.Mutex
	nextID, maxID uint64 // handed out next; last number of the reserved block

	health health
	opened os.FileInfo // the file Open checked: Health notices when it is moved away
}

var _ bridge.Store = (*SQLite)(nil)

// op is one write in the commit loop: apply runs inside the batch's
// transaction under its own savepoint.
type op struct {
	apply func(w *wtx) error
	err   chan error
}

// wtx is the commit loop's transaction with its cache of prepared
// statements (parsing SQL cost more than running it).
type wtx struct {
	ctx context.Context
	tx  *sql.Tx
	s   *SQLite
}

// stmt returns q prepared once per store, bound to the transaction.
func (w *wtx) stmt(q string) (*sql.Stmt, error) {
	p, ok := w.s.prepared[q]
	if !ok {
		// Not prepared at Open (the one connection is the transaction's
		// now, so it cannot be prepared on the pool): prepare it here.
		return w.tx.PrepareContext(w.ctx, q)
	}
	return w.tx.StmtContext(w.ctx, p), nil
}

// exec runs a prepared statement.
func (w *wtx) exec(q string, args ...any) error {
	st, err := w.stmt(q)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(w.ctx, args...)
	return err
}

// queryRow runs a prepared query and scans its one row.
func (w *wtx) queryRow(q string, args []any, dest ...any) error {
	st, err := w.stmt(q)
	if err != nil {
		return err
	}
	return st.QueryRowContext(w.ctx, args...).Scan(dest...)
}

// dsn builds a SQLite URI for path: the characters a URI gives meaning to
// are escaped, the parameters are the driver's (_pragma, _txlock) and
// SQLite's own (mode).
func dsn(path string, params ...string) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc + "?" + strings.Join(params, "&")
}

// Open opens the gridsub database at path, checks it and applies pending
// schema migrations. A missing file (and its directory, 0700) is created
// (0600). An existing file is checked before anything writes it: one that
// is empty, not a gridsub database, or fails SQLite's quick_check
// (ErrCorrupt), one from a newer gridsub (ErrNewerSchema) or one that
// cannot be read (ErrUnavailable) is refused and left byte for byte as it
// was, with no -wal, -shm or journal created beside it.
func Open(ctx context.Context, path string, opts Options) (*SQLite, error) {
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 5 * time.Second
	}
	if opts.IDBlock <= 0 {
		opts.IDBlock = 100
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 512
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HealthEvery <= 0 {
		opts.HealthEvery = 5 * time.Second
	}
	if opts.CheckEvery == 0 {
		opts.CheckEvery = 10 * time.Minute
	}
	if opts.MinFree <= 0 {
		opts.MinFree = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	path = abs
	busy := fmt.Sprintf("_pragma=busy_timeout(%d)", opts.BusyTimeout.Milliseconds())

	// 1. Look before touching. Only a missing file becomes a new database
	// (made aside and linked into place). An existing one is checked
	// through a connection that cannot write it — header, schema version,
	// PRAGMA quick_check — and refused, untouched, if anything is wrong.
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := createNew(ctx, path, busy); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("store: %w: %s: %w", ErrUnavailable, path, err)
	}
	vdb, err := openVerify(path, false)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	version, _, err := verify(ctx, vdb, path, false)
	if cerr := vdb.Close(); err == nil && cerr != nil {
		err = classify(path, "closing", cerr)
	}
	if err != nil {
		return nil, fmt.Errorf("store: %w", withHint(err, restoreHint))
	}

	// 2. The writer: WAL, synchronous=FULL, BEGIN IMMEDIATE.
	wparams := []string{busy, "_pragma=journal_mode(WAL)", "_pragma=synchronous(FULL)",
		"_pragma=foreign_keys(1)", "_txlock=immediate"}
	if opts.MaxPages > 0 {
		wparams = append(wparams, fmt.Sprintf("_pragma=max_page_count(%d)", opts.MaxPages))
	}
	s := &SQLite{path: path, opts: opts, log: opts.Logger,
		ops: make(chan *op), prepared: map[string]*sql.Stmt{}, quit: make(chan struct{}), done: make(chan struct{})}
	if s.opened, err = os.Stat(path); err != nil {
		return nil, fmt.Errorf("store: %w: %s: %w", ErrUnavailable, path, err)
	}
	s.w, err = sql.Open("sqlite", dsn(path, wparams...))
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	if err := s.w.PingContext(ctx); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("store: %w", classify(path, "opening", err))
	}
	if err := migrate(ctx, s.w, path); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := s.checkModes(ctx); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	for _, q := range writeQueries {
		p, err := s.w.PrepareContext(ctx, q)
		if err != nil {
			s.w.Close()
			return nil, fmt.Errorf("store: preparing %q: %w", q, classify(path, "opening", err))
		}
		s.prepared[q] = p
	}

	// 3. Readers.
	s.r, err = sql.Open("sqlite", dsn(path, "mode=rw", busy, "_pragma=query_only(1)"))
	if err != nil {
		s.w.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	s.r.SetMaxOpenConns(opts.ReadConns)
	s.r.SetMaxIdleConns(opts.ReadConns)
	s.r.SetConnMaxIdleTime(0)
	s.r.SetConnMaxLifetime(0)

	if version > 0 && version < SchemaVersion {
		s.log.Info("store migrated", "path", path, "from_schema", version, "to_schema", SchemaVersion)
	}
	s.log.Info("store opened", "path", path, "schema", SchemaVersion)
	go s.loop()
	return s, nil
}

// checkModes verifies that the writer really runs in WAL mode with
// synchronous=FULL: the durability promise rests on both.
func (s *SQLite) checkModes(ctx context.Context) error {
	var mode string
	var syncMode int
	if err := s.w.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return classify(s.path, "opening", err)
	}
	if err := s.w.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&syncMode); err != nil {
		return classify(s.path, "opening", err)
	}
	if !strings.EqualFold(mode, "wal") || syncMode != 2 {
		return fmt.Errorf("%s: journal_mode %q synchronous %d, want wal and 2 (FULL)", s.path, mode, syncMode)
	}
	return nil
}

// Path returns the database file's absolute path.
func (s *SQLite) Path() string { return s.path }

// Close stops the commit loop (writes in flight finish first) and closes
// the database. Calls after the first return nil.
func (s *SQLite) Close() error {
	var err error
	s.once.Do(func() {
		close(s.quit)
		<-s.done
		err = errors.Join(s.r.Close(), s.w.Close())
		if err != nil {
			err = classify(s.path, "closing", err)
		}
	})
	return err
}

// loop is the group commit: it takes every write waiting at the moment,
// applies them in one transaction and commits once. With synchronous=FULL a
// commit costs an fsync; concurrent writers share it. If anything in a
// batch fails, the batch is rolled back and each write retried in a
// transaction of its own, so a failing write never fails its neighbours.
func (s *SQLite) loop() {
	defer close(s.done)
	defer func() {
		for _, p := range s.prepared {
			p.Close()
		}
	}()
	batch := make([]*op, 0, s.opts.MaxBatch)
	errs := make([]error, 0, s.opts.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case <-s.quit:
			return
		case o := <-s.ops:
			batch = append(batch, o)
		}
	drain:
		for len(batch) < s.opts.MaxBatch {
			select {
			case o := <-s.ops:
				batch = append(batch, o)
			default:
				break drain
			}
		}
		errs = errs[:len(batch)]
		s.commit(batch, errs)
		for i, o := range batch {
			o.err <- errs[i]
		}
	}
}

func (s *SQLite) commit(batch []*op, errs []error) {
	clear(errs)
	if len(batch) > 1 {
		if s.try(batch, errs) == nil {
			return
		}
		// Something failed: the batch was rolled back as a whole. Run each
		// write on its own so one bad write does not fail its neighbours.
		clear(errs)
		for i := range batch {
			s.try(batch[i:i+1], errs[i:i+1])
		}
		return
	}
	s.try(batch, errs)
}

// try applies ops in one transaction and commits it. On any failure it
// rolls back and sets every op's error (its own, or the one that broke the
// transaction).
func (s *SQLite) try(ops []*op, errs []error) error {
	ctx := context.Background() // a caller's cancellation must not tear a shared batch
	fail := func(err error) error {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fail(classify(s.path, "writing to", err))
	}
	w := &wtx{ctx: ctx, tx: tx, s: s}
	for i, o := range ops {
		if err := o.apply(w); err != nil {
			tx.Rollback()
			errs[i] = err
			if len(ops) > 1 {
				return fail(fmt.Errorf("rolled back with a failing write in the same commit: %w", err))
			}
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		tx.Rollback()
		return fail(classify(s.path, "committing to", err))
	}
	return nil
}

// write runs apply in the commit loop and waits for its commit. If ctx ends
// while the write is queued, ctx's error is returned and nothing is
// written; once the batch holding it has started, write waits for the
// commit's outcome (the answer must say whether it is durable).
func (s *SQLite) write(ctx context.Context, apply func(*wtx) error) error {
	if e := s.health.corrupt.Load(); e != nil {
		// Damage found at run time (a quick_check, or a damaged page met
		// by a read or write): what would be written now may be lost with
		// the file, and the file is refused at the next start. Nothing is
		// written until the file is restored and the store reopened.
		return fmt.Errorf("store %s: refusing writes into a damaged database (%s): %w", s.path, liveHint, *e)
	}
	o := &op{apply: apply, err: make(chan error, 1)}
	select {
	case s.ops <- o:
	case <-s.quit:
		return fmt.Errorf("store %s: %w", s.path, ErrClosed)
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-o.err
}

// The commit loop's statements, prepared once at Open.
const (
	qSelJob    = `SELECT seq, n_events, sites, state FROM jobs WHERE id = ?`
	qInsJob    = `INSERT INTO jobs(id, state, name, sites, updated, n_events, body) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq`
	qUpdJob    = `UPDATE jobs SET state = ?, name = ?, sites = ?, updated = ?, n_events = ?, body = ? WHERE seq = ?`
	qDelSites  = `DELETE FROM job_sites WHERE seq = ?`
	qInsSite   = `INSERT INTO job_sites(site, seq) VALUES (?, ?)`
	qDelEvents = `DELETE FROM events WHERE seq = ? AND n >= ?`
	qInsEvent  = `INSERT INTO events(seq, n, time, kind, site, msg) VALUES (?, ?, ?, ?, ?, ?)`
	qNextID    = `UPDATE counters SET value = value + ? WHERE name = 'next_id' RETURNING value - ? + 1, value`
	qSetValue  = `INSERT INTO kv(key, value, updated) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated = excluded.updated`
	qDelValue  = `DELETE FROM kv WHERE key = ?`
	qPutResv   = `INSERT INTO reservations(seq, state, earliest, latest, nodes, site, start, native, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT(seq) DO UPDATE SET state = excluded.state, earliest = excluded.earliest, latest = excluded.latest, nodes = excluded.nodes,
	site = excluded.site, start = excluded.start, native = excluded.native, reason = excluded.reason`
)

var writeQueries = []string{qSelJob, qInsJob, qUpdJob, qDelSites, qInsSite, qDelEvents, qInsEvent, qNextID, qSetValue, qDelValue,
	qProbeOK, qProbeErr, qProbeLink, qTrust, qOutcome, qPutResv, qGetValue}

// Put implements bridge.Store: one job, written in one transaction (shared
// with concurrent Puts by group commit) and committed with fsync before Put
// returns. Only the events beyond those already stored are inserted.
func (s *SQLite) Put(ctx context.Context, j *bridge.Job) error {
	if j == nil || j.ID == "" {
		return fmt.Errorf("store: put: %w: a job needs an id", bridge.ErrBadRequest)
	}
	r, err := EncodeRow(j, s.opts.Now())
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	err = s.write(ctx, func(w *wtx) error { return putRow(w, r) })
	if err != nil {
		return fmt.Errorf("store: put job %s: %w", j.ID, s.wrap("writing", err))
	}
	return nil
}

// wrap classifies raw SQLite errors; errors already classified pass.
func (s *SQLite) wrap(op string, err error) error {
	if code(err) != 0 && !errors.Is(err, ErrDiskFull) && !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrCorrupt) {
		err = classify(s.path, op, err)
	}
	if errors.Is(err, ErrCorrupt) {
		s.markCorrupt(err) // Health says so from now on
	}
	return err
}

func putRow(w *wtx, r *Row) error {
	var seq, stored int64
	var sites, state string
	err := w.queryRow(qSelJob, []any{r.ID}, &seq, &stored, &sites, &state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		err = w.queryRow(qInsJob,
			[]any{r.ID, r.State, r.Name, r.Sites, r.Updated, len(r.Events), r.Body}, &seq)
		if err != nil {
			return err
		}
		for _, site := range r.SiteSet {
			if err := w.exec(qInsSite, site, seq); err != nil {
				return err
			}
		}
		if err := countOutcome(w, r); err != nil {
			return err
		}
		if r.Charge != nil && ChargesNow("", false, r.State) {
			if err := charge(w, r); err != nil {
				return err
			}
		}
		if err := putResv(w, seq, r); err != nil {
			return err
		}
		return insertEvents(w, seq, 0, r.Events)
	case err != nil:
		return err
	}
	if state != r.State {
		// The Put that first stores a final state counts the outcome
		// (final states do not change again, so it is counted once).
		if err := countOutcome(w, r); err != nil {
			return err
		}
	}
	if r.Charge != nil && ChargesNow(state, true, r.State) {
		if err := charge(w, r); err != nil {
			return err
		}
	}
	if err := w.exec(qUpdJob,
		r.State, r.Name, r.Sites, r.Updated, len(r.Events), r.Body, seq); err != nil {
		return err
	}
	if err := putResv(w, seq, r); err != nil {
		return err
	}
	if sites != r.Sites {
		if err := w.exec(qDelSites, seq); err != nil {
			return err
		}
		for _, site := range r.SiteSet {
			if err := w.exec(qInsSite, site, seq); err != nil {
				return err
			}
		}
	}
	n := int64(len(r.Events))
	if n < stored {
		// The contract says events only grow; a caller that broke it
		// still gets what it stored, not a mix.
		return w.exec(qDelEvents, seq, n)
	}
	return insertEvents(w, seq, stored, r.Events[stored:])
}

// putResv keeps the job's reservation row in step with the job.
func putResv(w *wtx, seq int64, r *Row) error {
	v := r.Resv
	if v == nil {
		return nil
	}
	var start any
	if !v.Start.IsZero() {
		start = v.Start.UnixNano()
	}
	return w.exec(qPutResv, seq, string(v.State), v.Earliest.UnixNano(), v.Latest.UnixNano(), r.Nodes, v.Site, start, string(v.Native), v.Reason)
}

func insertEvents(w *wtx, seq, from int64, evs []bridge.Event) error {
	for i, e := range evs {
		if err := w.exec(qInsEvent,
			seq, from+int64(i), e.Time.Format(time.RFC3339Nano), e.Kind, e.Site, e.Msg); err != nil {
			return err
		}
	}
	return nil
}

// Get implements bridge.Store.
func (s *SQLite) Get(ctx context.Context, id string) (*bridge.Job, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: get job %s: %w", id, s.wrap("reading", err))
	}
	defer tx.Rollback()
	var seq int64
	var body []byte
	err = tx.QueryRowContext(ctx, `SELECT seq, body FROM jobs WHERE id = ?`, id).Scan(&seq, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: %w: %s", bridge.ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get job %s: %w", id, s.wrap("reading", err))
	}
	j, err := s.decode(id, body)
	if err != nil {
		return nil, err
	}
	evs, err := readEvents(ctx, tx, []int64{seq})
	if err != nil {
		return nil, fmt.Errorf("store: get job %s: %w", id, s.wrap("reading events from", err))
	}
	j.Events = evs[seq]
	return j, nil
}

func (s *SQLite) decode(id string, body []byte) (*bridge.Job, error) {
	j := new(bridge.Job)
	if err := json.Unmarshal(body, j); err != nil {
		return nil, fmt.Errorf("store: %w: %s: job %s has an unreadable body: %v", ErrCorrupt, s.path, id, err)
	}
	return j, nil
}

// readEvents returns the events of the given jobs, by seq, in order.
func readEvents(ctx context.Context, tx *sql.Tx, seqs []int64) (map[int64][]bridge.Event, error) {
	out := make(map[int64][]bridge.Event, len(seqs))
	if len(seqs) == 0 {
		return out, nil
	}
	var rows *sql.Rows
	var err error
	if len(seqs) == 1 {
		rows, err = tx.QueryContext(ctx, `SELECT seq, time, kind, site, msg FROM events WHERE seq = ? ORDER BY n`, seqs[0])
	} else {
		arr, _ := json.Marshal(seqs)
		rows, err = tx.QueryContext(ctx, `SELECT e.seq, e.time, e.kind, e.site, e.msg
			FROM json_each(?) AS s JOIN events AS e ON e.seq = s.value ORDER BY e.seq, e.n`, string(arr))
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var t string
		var e bridge.Event
		if err := rows.Scan(&seq, &t, &e.Kind, &e.Site, &e.Msg); err != nil {
			return nil, err
		}
		if e.Time, err = time.Parse(time.RFC3339Nano, t); err != nil {
			return nil, fmt.Errorf("%w: event time %q: %v", ErrCorrupt, t, err)
		}
		out[seq] = append(out[seq], e)
	}
	return out, rows.Err()
}

// List implements bridge.Store. Filter.After names the last job of the
// previous page; an id the store does not hold is an error wrapping
// bridge.ErrNotFound. Filter.Newest walks the jobs' primary key backwards,
// so the newest page costs the same as the oldest.
func (s *SQLite) List(ctx context.Context, f bridge.Filter) ([]*bridge.Job, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: list: %w", s.wrap("reading", err))
	}
	defer tx.Rollback()
	var where []string
	var args []any
	if f.After != "" {
		var after int64
		err := tx.QueryRowContext(ctx, `SELECT seq FROM jobs WHERE id = ?`, f.After).Scan(&after)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("store: list after %q: %w (the paging cursor must be the id of a stored job)", f.After, bridge.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("store: list: %w", s.wrap("reading", err))
		}
		if f.Newest {
			where, args = append(where, "j.seq < ?"), append(args, after)
		} else {
			where, args = append(where, "j.seq > ?"), append(args, after)
		}
	}
	if len(f.States) > 0 {
		where = append(where, "j.state IN ("+strings.TrimSuffix(strings.Repeat("?,", len(f.States)), ",")+")")
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	if f.Name != "" {
		where, args = append(where, "j.name = ?"), append(args, f.Name)
	}
	if f.Parent != "" {
		// Elements are named <parent>_<index> (bridge/group.go): a range
		// of the id index ('`' follows '_'); the decoded Parent is checked
		// below as well.
		where, args = append(where, "j.id > ? AND j.id < ?"), append(args, f.Parent+"_", f.Parent+"`")
	}
	if f.Site != "" {
		// With states, the state index narrows first and the site is a
		// primary-key probe per job; alone, the site's index rows drive.
		if len(f.States) > 0 {
			where = append(where, "EXISTS (SELECT 1 FROM job_sites AS s WHERE s.site = ? AND s.seq = j.seq)")
		} else {
			where = append(where, "j.seq IN (SELECT seq FROM job_sites WHERE site = ?)")
		}
		args = append(args, f.Site)
	}
	q := "SELECT j.seq, j.id, j.body FROM jobs AS j"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY j.seq"
	if f.Newest {
		q += " DESC"
	}
	if f.Limit > 0 {
		q, args = q+" LIMIT ?", append(args, f.Limit)
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list: %w", s.wrap("reading", err))
	}
	var out []*bridge.Job
	var seqs []int64
	for rows.Next() {
		var seq int64
		var id string
		var body []byte
		if err := rows.Scan(&seq, &id, &body); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: list: %w", s.wrap("reading", err))
		}
		j, err := s.decode(id, body)
		if err != nil {
			rows.Close()
			return nil, err
		}
		if f.Parent != "" && j.Parent != f.Parent {
			continue
		}
		out, seqs = append(out, j), append(seqs, seq)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("store: list: %w", s.wrap("reading", err))
	}
	if f.Events {
		evs, err := readEvents(ctx, tx, seqs)
		if err != nil {
			return nil, fmt.Errorf("store: list: %w", s.wrap("reading events from", err))
		}
		for i, j := range out {
			j.Events = evs[seqs[i]]
		}
	}
	return out, nil
}

// NextID implements bridge.Store. Numbers come from a block reserved with
// one durable write (Options.IDBlock numbers at a time); the block's end is
// committed before any number of it is handed out, so no number is ever
// handed out twice, not after a crash and not by two processes sharing the
// file. A crash skips the rest of the block.
func (s *SQLite) NextID(ctx context.Context) (uint64, error) {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	if s.nextID == 0 || s.nextID > s.maxID {
		var lo, hi uint64
		err := s.write(ctx, func(w *wtx) error {
			return w.queryRow(qNextID,
				[]any{s.opts.IDBlock, s.opts.IDBlock}, &lo, &hi)
		})
		if err != nil {
			return 0, fmt.Errorf("store: reserving job numbers: %w", s.wrap("writing", err))
		}
		s.nextID, s.maxID = lo, hi
	}
	n := s.nextID
	s.nextID++
	return n, nil
}

// Prune deletes the jobs in a final state (completed, failed, timeout,
// cancelled, rejected) whose last Put was before the given time, with their events,
// and returns how many it deleted: the history cleanup. Live jobs are never
// pruned. A paging cursor (Filter.After) naming a pruned job is unknown
// afterwards.
func (s *SQLite) Prune(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(w *wtx) error {
		res, err := w.tx.ExecContext(w.ctx, `DELETE FROM jobs WHERE updated < ? AND state IN (?, ?, ?, ?, ?)`,
			before.UnixNano(), string(bridge.Completed), string(bridge.Failed), string(bridge.Timeout), string(bridge.Cancelled), string(bridge.Rejected))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune: %w", s.wrap("writing", err))
	}
	return int(n), nil
}
