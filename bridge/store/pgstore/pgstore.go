package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/gridsub/gridsub/backends/regularfile"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

// Config says where the database is and where its password comes from.
// The password is never in the DSN nor in the configuration file: Open
// refuses a DSN that holds one.
type Config struct {
	// DSN is a libpq connection string, keyword/value ("host=db port=5432
	// user=gridsub dbname=gridsub sslmode=verify-full") or URL
	// ("postgres://gridsub@db/gridsub?sslmode=verify-full"), without a
	// password.
	DSN string
	// PasswordFile is a file holding the password (its first line); it
	// must not be readable by group or others.
	PasswordFile string
	// PasswordEnv names an environment variable holding the password.
	PasswordEnv string
}

// Options tune a PostgreSQL store. The zero value is a sound default.
type Options struct {
	// MaxConns bounds the connections to the server (default 32).
	MaxConns int
	// IDBlock is how many job numbers NextID reserves with one write
	// (default 100).
	IDBlock int
	// HealthEvery is how long Health reuses its answer (default 5s).
	HealthEvery time.Duration
	// ConnectTimeout bounds a connection attempt (default 10s).
	ConnectTimeout time.Duration
	// NoMigrate opens without applying migrations (gridsub store check
	// and backup): a database of an older schema is refused with a
	// message to start the daemon once, a missing one too.
	NoMigrate bool
	// Now stamps each Put's "updated" time (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Postgres is a store.Store in a PostgreSQL database. Several processes
// (brokers) may share one database: every write is a transaction of its
// own, committed (synchronous_commit as the server has it: on by default,
// so flushed to the WAL) before it returns.
type Postgres struct {
	pool  *pgxpool.Pool
	db    *sql.DB // the same pool through database/sql, for dumps
	where string  // redacted: server, port, user, database
	opts  Options
	log   *slog.Logger

	idMu          sync.Mutex
	nextID, maxID uint64

	hMu  sync.Mutex
	hAt  time.Time
	hErr error

	closeOnce sync.Once
	closed    chan struct{}

	fence   atomic.Pointer[fence] // set once this broker leads (lease.go): every write checks it
	handoff atomic.Bool           // a follower's store: new jobs are handed to the leader
}

var _ store.Store = (*Postgres)(nil)

// ErrPasswordInConfig: the DSN carries a password; it belongs in
// password_file or password_env.
var ErrPasswordInConfig = errors.New("a password in the store's dsn")

var kvPassword = regexp.MustCompile(`(?i)(^|\s)password\s*=`)

// CheckDSN refuses a DSN that carries a password (ErrPasswordInConfig),
// without repeating the DSN.
func CheckDSN(dsn string) error {
	hint := "remove it and put the password in a file named by store.password_file (mode 0600) or in an environment variable named by store.password_env"
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			// url's error quotes the whole string: say where, not what.
			return fmt.Errorf("store.dsn is not a valid postgres:// URL")
		}
		if _, ok := u.User.Password(); ok || u.Query().Has("password") {
			return fmt.Errorf("%w: %s", ErrPasswordInConfig, hint)
		}
		return nil
	}
	if kvPassword.MatchString(dsn) {
		return fmt.Errorf("%w: %s", ErrPasswordInConfig, hint)
	}
	return nil
}

// password reads the password from where cfg says.
func (cfg Config) password() (string, error) {
	switch {
	case cfg.PasswordFile != "" && cfg.PasswordEnv != "":
		return "", fmt.Errorf("store: give password_file or password_env, not both")
	case cfg.PasswordFile != "":
		// One open file is checked and read (a regular file, bounded, its
		// mode from the same descriptor), so no swap between check and read
		// slips another file in.
		f, err := regularfile.Open(cfg.PasswordFile, 4096)
		if err != nil {
			return "", fmt.Errorf("store: password_file: %w", err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return "", fmt.Errorf("store: password_file: %w", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return "", fmt.Errorf("store: password_file %s has mode %04o: others can read it; chmod 600 it", cfg.PasswordFile, fi.Mode().Perm())
		}
		b, err := io.ReadAll(io.LimitReader(f, 4097))
		if err != nil {
			return "", fmt.Errorf("store: password_file: %w", err)
		}
		if len(b) > 4096 {
			return "", fmt.Errorf("store: password_file %s is over 4096 bytes: not a password", cfg.PasswordFile)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		return strings.TrimRight(line, "\r"), nil
	case cfg.PasswordEnv != "":
		v, ok := os.LookupEnv(cfg.PasswordEnv)
		if !ok {
			return "", fmt.Errorf("store: password_env names %s, which is not set", cfg.PasswordEnv)
		}
		return v, nil
	}
	return "", nil
}

// Where describes cfg's database without its password, for messages:
// "postgres://user@host:port/dbname".
func Where(dsn string) string {
	c, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "postgres (unparsable dsn)"
	}
	host := c.Host
	if !strings.HasPrefix(host, "/") {
		host = net.JoinHostPort(host, fmt.Sprint(c.Port))
	} else {
		host = fmt.Sprintf("%s:%d", host, c.Port)
	}
	return fmt.Sprintf("postgres://%s@%s/%s", c.User, host, c.Database)
}

// Open connects to the database cfg names, applies pending migrations
// (refusing a database of a newer gridsub with store.ErrNewerSchema) and
// returns the store. Errors never contain the password.
func Open(ctx context.Context, cfg Config, opts Options) (*Postgres, error) {
	if cfg.DSN == "" {
		return nil, fmt.Errorf("store: kind postgres needs store.dsn (e.g. \"host=db user=gridsub dbname=gridsub\")")
	}
	if err := CheckDSN(cfg.DSN); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	pw, err := cfg.password()
	if err != nil {
		return nil, err
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 32
	}
	if opts.IDBlock <= 0 {
		opts.IDBlock = 100
	}
	if opts.HealthEvery <= 0 {
		opts.HealthEvery = 5 * time.Second
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	where := Where(cfg.DSN)
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("store: store.dsn for %s does not parse (check its keywords)", where)
	}
	if pw != "" {
		pc.ConnConfig.Password = pw
	}
	pc.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	pc.MaxConns = int32(opts.MaxConns)
	pc.ConnConfig.RuntimeParams["application_name"] = "gridsub"
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("store: %w", classify(where, "connecting to", err))
	}
	s := &Postgres{pool: pool, where: where, opts: opts, log: opts.Logger, closed: make(chan struct{})}
	c, err := pool.Acquire(ctx)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: %w", classify(where, "connecting to", err))
	}
	var from int
	if opts.NoMigrate {
		err = c.Conn().QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM gridsub_migrations`).Scan(&from)
		switch {
		case isCode(err, "42P01"):
			err = fmt.Errorf("%s has no gridsub schema: start gridsub serve on it once (it creates the tables), or restore a dump into it", where)
		case err == nil && from > SchemaVersion:
			err = fmt.Errorf("%w: %s has schema version %d, this gridsub knows up to %d: upgrade gridsub", store.ErrNewerSchema, where, from, SchemaVersion)
		case err == nil && from < SchemaVersion:
			err = fmt.Errorf("%s has schema version %d, this gridsub writes %d: start gridsub serve on it once to migrate it", where, from, SchemaVersion)
		}
	} else {
		from, err = migrate(ctx, c.Conn(), where)
	}
	c.Release()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: %w", classify(where, "migrating", err))
	}
	if from > 0 && from < SchemaVersion {
		s.log.Info("store migrated", "db", where, "from_schema", from, "to_schema", SchemaVersion)
	}
	s.db = stdlib.OpenDBFromPool(pool)
	s.log.Info("store opened", "db", where, "schema", SchemaVersion)
	return s, nil
}

// Where implements store.Store.
func (s *Postgres) Where() string { return s.where }

// Pool is the store's connection pool (for the leadership lease, which
// shares the database).
func (s *Postgres) Pool() *pgxpool.Pool { return s.pool }

// Close implements store.Store: it waits for the queries in flight and
// closes every connection.
func (s *Postgres) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.db.Close()
		s.pool.Close()
	})
	return nil
}

func (s *Postgres) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// classify wraps a PostgreSQL or connection error with the store's
// sentinel, naming the database (never its password).
func classify(where, op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrNewerSchema) || errors.Is(err, store.ErrCorrupt) ||
		errors.Is(err, store.ErrDiskFull) || errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrNotEmpty) {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s %s: %w", op, where, err)
	case isCode(err, "53100"):
		return fmt.Errorf("%s %s: %w (the server's disk is full; everything committed before is intact): %w", op, where, store.ErrDiskFull, err)
	case isCode(err, "25006"):
		return fmt.Errorf("%s %s: %w (%w: the server is read-only, a standby or in recovery): %w", op, where, store.ErrReadOnly, store.ErrUnavailable, err)
	case isCode(err, "XX001", "XX002"):
		return fmt.Errorf("%s %s: %w (the server reports damaged data; restore a dump): %w", op, where, store.ErrCorrupt, err)
	case isCode(err, "28"):
		return fmt.Errorf("%s %s: %w (authentication failed: check store.password_file or store.password_env and the user in store.dsn): %w", op, where, store.ErrUnavailable, err)
	case isCode(err, "08", "57", "53"):
		return fmt.Errorf("%s %s: %w (the server is not reachable or not accepting connections): %w", op, where, store.ErrUnavailable, err)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		// Not an answer from the server: the connection failed.
		var ce *pgconn.ConnectError
		var ne net.Error
		if errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "closed pool") {
			return fmt.Errorf("%s %s: %w (the server is not reachable): %w", op, where, store.ErrUnavailable, err)
		}
	}
	return fmt.Errorf("%s %s: %w", op, where, err)
}

func (s *Postgres) wrap(op string, err error) error {
	if s.isClosed() {
		return fmt.Errorf("store %s: %w", s.where, store.ErrClosed)
	}
	return classify(s.where, op, err)
}

// tx runs f in a read-write transaction and commits it.
func (s *Postgres) tx(ctx context.Context, f func(pgx.Tx) error) error {
	if s.isClosed() {
		return fmt.Errorf("store %s: %w", s.where, store.ErrClosed)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := s.checkFence(ctx, tx); err != nil {
			return err
		}
		return f(tx)
	})
}

const (
	qInsJob = `INSERT INTO jobs(id, state, name, sites, updated, n_events, body) VALUES ($1, $2, $3, $4, $5, $6, $7)
	ON CONFLICT (id) DO NOTHING RETURNING seq`
	qSelJob    = `SELECT seq, n_events, sites, state FROM jobs WHERE id = $1 FOR UPDATE`
	qUpdJob    = `UPDATE jobs SET state = $1, name = $2, sites = $3, updated = $4, n_events = $5, body = $6 WHERE seq = $7`
	qDelSites  = `DELETE FROM job_sites WHERE seq = $1`
	qInsSite   = `INSERT INTO job_sites(site, seq) VALUES ($1, $2)`
	qDelEvents = `DELETE FROM events WHERE seq = $1 AND n >= $2`
	qInsEvent  = `INSERT INTO events(seq, n, time, kind, site, msg) VALUES ($1, $2, $3, $4, $5, $6)`
	qPutResv   = `INSERT INTO reservations(seq, state, earliest, latest, nodes, site, start, native, reason) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
	ON CONFLICT (seq) DO UPDATE SET state = excluded.state, earliest = excluded.earliest, latest = excluded.latest, nodes = excluded.nodes,
	site = excluded.site, start = excluded.start, native = excluded.native, reason = excluded.reason`
	qOutcome = `INSERT INTO sites(name, completed, failed) VALUES ($1, $2, $3)
	ON CONFLICT (name) DO UPDATE SET completed = sites.completed + excluded.completed, failed = sites.failed + excluded.failed`
)

// Put implements bridge.Store: one transaction; a new job costs one
// insert and one pipelined batch of its sites, events and reservation.
func (s *Postgres) Put(ctx context.Context, j *bridge.Job) error {
	if j == nil || j.ID == "" {
		return fmt.Errorf("store: put: %w: a job needs an id", bridge.ErrBadRequest)
	}
	r, err := store.EncodeRow(j, s.opts.Now())
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if r.Resv == nil && !bridge.JobState(r.State).Final() && s.fence.Load() == nil {
		// The common case, a new job (a submission): one statement in
		// one round trip, committed on its own.
		var ok bool
		if ok, err = s.insertNew(ctx, r); err != nil || ok {
			if err != nil {
				return fmt.Errorf("store: put job %s: %w", j.ID, s.wrap("writing to", err))
			}
			return nil
		}
	}
	handoff := s.handoff.Load()
	err = s.tx(ctx, func(tx pgx.Tx) error { return putRow(ctx, tx, r, handoff) })
	if err != nil {
		return fmt.Errorf("store: put job %s: %w", j.ID, s.wrap("writing to", err))
	}
	return nil
}

// qInsNew inserts a new job with its sites and events in one statement;
// it returns no row when the id is already stored.
const qInsNew = `WITH j AS (
	INSERT INTO jobs(id, state, name, sites, updated, n_events, body) VALUES ($1, $2, $3, $4, $5, $6, $7)
	ON CONFLICT (id) DO NOTHING RETURNING seq
), s AS (
	INSERT INTO job_sites(site, seq) SELECT x, j.seq FROM j, unnest($8::text[]) AS x
), e AS (
	INSERT INTO events(seq, n, time, kind, site, msg)
	SELECT j.seq, x.n - 1, x.t, x.k, x.s, x.m FROM j, unnest($9::text[], $10::text[], $11::text[], $12::text[]) WITH ORDINALITY AS x(t, k, s, m, n)
), h AS (
	INSERT INTO handoff(id) SELECT $1 FROM j WHERE $13::boolean
)
SELECT seq FROM j`

// insertNew stores r if its id is new (reporting true), in one statement;
// r must have no reservation and no final state (they need putRow).
func (s *Postgres) insertNew(ctx context.Context, r *store.Row) (bool, error) {
	if s.isClosed() {
		return false, fmt.Errorf("store %s: %w", s.where, store.ErrClosed)
	}
	ts, ks, ss, ms := make([]string, len(r.Events)), make([]string, len(r.Events)), make([]string, len(r.Events)), make([]string, len(r.Events))
	for i, e := range r.Events {
		ts[i], ks[i], ss[i], ms[i] = e.Time.Format(time.RFC3339Nano), e.Kind, e.Site, e.Msg
	}
	sites := r.SiteSet
	if sites == nil {
		sites = []string{}
	}
	var seq int64
	err := s.pool.QueryRow(ctx, qInsNew, r.ID, r.State, r.Name, r.Sites, r.Updated, len(r.Events), r.Body, sites, ts, ks, ss, ms, s.handoff.Load()).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func putRow(ctx context.Context, tx pgx.Tx, r *store.Row, handoff bool) error {
	var seq int64
	b := &pgx.Batch{}
	err := tx.QueryRow(ctx, qInsJob, r.ID, r.State, r.Name, r.Sites, r.Updated, len(r.Events), r.Body).Scan(&seq)
	switch {
	case err == nil:
		if r.Charge != nil && store.ChargesNow("", false, r.State) {
			if err := charge(ctx, tx, r); err != nil {
				return err
			}
		}
		for _, site := range r.SiteSet {
			b.Queue(qInsSite, site, seq)
		}
		countOutcome(b, r)
		putResv(b, seq, r)
		insertEvents(b, seq, 0, r.Events)
		if handoff {
			b.Queue(`INSERT INTO handoff(id) VALUES ($1)`, r.ID)
		}
		return tx.SendBatch(ctx, b).Close()
	case !errors.Is(err, pgx.ErrNoRows):
		return err
	}
	var stored int64
	var sites, state string
	if err := tx.QueryRow(ctx, qSelJob, r.ID).Scan(&seq, &stored, &sites, &state); err != nil {
		return err
	}
	if state != r.State {
		countOutcome(b, r)
	}
	if r.Charge != nil && store.ChargesNow(state, true, r.State) {
		if err := charge(ctx, tx, r); err != nil {
			return err
		}
	}
	b.Queue(qUpdJob, r.State, r.Name, r.Sites, r.Updated, len(r.Events), r.Body, seq)
	putResv(b, seq, r)
	if sites != r.Sites {
		b.Queue(qDelSites, seq)
		for _, site := range r.SiteSet {
			b.Queue(qInsSite, site, seq)
		}
	}
	if n := int64(len(r.Events)); n < stored {
		b.Queue(qDelEvents, seq, n)
	} else {
		insertEvents(b, seq, stored, r.Events[stored:])
	}
	return tx.SendBatch(ctx, b).Close()
}

func putResv(b *pgx.Batch, seq int64, r *store.Row) {
	v := r.Resv
	if v == nil {
		return
	}
	var start any
	if !v.Start.IsZero() {
		start = v.Start.UnixNano()
	}
	b.Queue(qPutResv, seq, string(v.State), v.Earliest.UnixNano(), v.Latest.UnixNano(), r.Nodes, v.Site, start, string(v.Native), v.Reason)
}

func insertEvents(b *pgx.Batch, seq, from int64, evs []bridge.Event) {
	for i, e := range evs {
		b.Queue(qInsEvent, seq, from+int64(i), e.Time.Format(time.RFC3339Nano), e.Kind, e.Site, e.Msg)
	}
}

// countOutcome counts a job that completed, or failed through its site's
// fault, once at each of its sites (as the SQLite store does).
func countOutcome(b *pgx.Batch, r *store.Row) {
	done, failed, ok := r.Outcome()
	if !ok {
		return
	}
	for _, site := range r.SiteSet {
		b.Queue(qOutcome, site, done, failed)
	}
}

// Get implements bridge.Store.
func (s *Postgres) Get(ctx context.Context, id string) (*bridge.Job, error) {
	var out *bridge.Job
	err := s.read(ctx, func(tx pgx.Tx) error {
		var seq int64
		var body []byte
		err := tx.QueryRow(ctx, `SELECT seq, body FROM jobs WHERE id = $1`, id).Scan(&seq, &body)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("store: %w: %s", bridge.ErrNotFound, id)
		}
		if err != nil {
			return err
		}
		j, err := s.decode(id, body)
		if err != nil {
			return err
		}
		evs, err := readEvents(ctx, tx, []int64{seq})
		if err != nil {
			return err
		}
		j.Events = evs[seq]
		out = j
		return nil
	})
	if err != nil {
		if errors.Is(err, bridge.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("store: get job %s: %w", id, s.wrap("reading", err))
	}
	return out, nil
}

// read runs f in a read-only repeatable-read transaction: one snapshot.
func (s *Postgres) read(ctx context.Context, f func(pgx.Tx) error) error {
	if s.isClosed() {
		return fmt.Errorf("store %s: %w", s.where, store.ErrClosed)
	}
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, f)
}

func (s *Postgres) decode(id string, body []byte) (*bridge.Job, error) {
	j := new(bridge.Job)
	if err := json.Unmarshal(body, j); err != nil {
		return nil, fmt.Errorf("store: %w: %s: job %s has an unreadable body: %v", store.ErrCorrupt, s.where, id, err)
	}
	return j, nil
}

func readEvents(ctx context.Context, tx pgx.Tx, seqs []int64) (map[int64][]bridge.Event, error) {
	out := make(map[int64][]bridge.Event, len(seqs))
	if len(seqs) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, `SELECT seq, time, kind, site, msg FROM events WHERE seq = ANY($1) ORDER BY seq, n`, seqs)
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
			return nil, fmt.Errorf("%w: event time %q: %v", store.ErrCorrupt, t, err)
		}
		out[seq] = append(out[seq], e)
	}
	return out, rows.Err()
}

// List implements bridge.Store, as the SQLite store does: submission
// order, Filter.After a cursor by seq, Newest backwards. Without events it
// is one statement (its own snapshot); with them, two in one
// repeatable-read transaction.
func (s *Postgres) List(ctx context.Context, f bridge.Filter) ([]*bridge.Job, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if f.After != "" {
		// An unknown cursor compares with NULL: no rows, then told apart
		// from the end of the list below.
		op := ">"
		if f.Newest {
			op = "<"
		}
		where = append(where, "j.seq "+op+" (SELECT seq FROM jobs WHERE id = "+arg(f.After)+")")
	}
	if len(f.States) > 0 {
		ps := make([]string, len(f.States))
		for i, x := range f.States {
			ps[i] = arg(string(x))
		}
		where = append(where, "j.state IN ("+strings.Join(ps, ", ")+")")
	}
	if f.Name != "" {
		where = append(where, "j.name = "+arg(f.Name))
	}
	if f.Parent != "" {
		where = append(where, "j.id > "+arg(f.Parent+"_")+" AND j.id < "+arg(f.Parent+"`"))
	}
	if f.Site != "" {
		where = append(where, "EXISTS (SELECT 1 FROM job_sites AS s WHERE s.site = "+arg(f.Site)+" AND s.seq = j.seq)")
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
		q += " LIMIT " + arg(f.Limit)
	}
	var out []*bridge.Job
	list := func(db interface {
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}) error {
		out = nil
		rows, err := db.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		var seqs []int64
		for rows.Next() {
			var seq int64
			var id string
			var body []byte
			if err := rows.Scan(&seq, &id, &body); err != nil {
				rows.Close()
				return err
			}
			j, err := s.decode(id, body)
			if err != nil {
				rows.Close()
				return err
			}
			if f.Parent != "" && j.Parent != f.Parent {
				continue
			}
			out, seqs = append(out, j), append(seqs, seq)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(out) == 0 && f.After != "" {
			var one int
			err := db.QueryRow(ctx, `SELECT 1 FROM jobs WHERE id = $1`, f.After).Scan(&one)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("store: list after %q: %w (the paging cursor must be the id of a stored job)", f.After, bridge.ErrNotFound)
			}
			if err != nil {
				return err
			}
		}
		if f.Events {
			tx := db.(pgx.Tx)
			evs, err := readEvents(ctx, tx, seqs)
			if err != nil {
				return err
			}
			for i, j := range out {
				j.Events = evs[seqs[i]]
			}
		}
		return nil
	}
	var err error
	switch {
	case s.isClosed():
		err = store.ErrClosed
	case f.Events:
		err = s.read(ctx, func(tx pgx.Tx) error { return list(tx) })
	default:
		err = list(s.pool)
	}
	if err != nil {
		if errors.Is(err, bridge.ErrNotFound) || errors.Is(err, store.ErrCorrupt) {
			return nil, err
		}
		return nil, fmt.Errorf("store: list: %w", s.wrap("reading", err))
	}
	return out, nil
}

// NextID implements bridge.Store: blocks of Options.IDBlock numbers, each
// block's end committed before any of its numbers is handed out, so no
// number is handed out twice, not after a crash and not by two brokers
// sharing the database.
func (s *Postgres) NextID(ctx context.Context) (uint64, error) {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	if s.nextID == 0 || s.nextID > s.maxID {
		var lo, hi int64
		err := s.tx(ctx, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `UPDATE counters SET value = value + $1 WHERE name = 'next_id' RETURNING value - $1 + 1, value`,
				int64(s.opts.IDBlock)).Scan(&lo, &hi)
		})
		if err != nil {
			return 0, fmt.Errorf("store: reserving job numbers: %w", s.wrap("writing to", err))
		}
		s.nextID, s.maxID = uint64(lo), uint64(hi)
	}
	n := s.nextID
	s.nextID++
	return n, nil
}

// Prune implements store.Store.
func (s *Postgres) Prune(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM jobs WHERE updated < $1 AND state = ANY($2)`, before.UnixNano(),
			[]string{string(bridge.Completed), string(bridge.Failed), string(bridge.Timeout), string(bridge.Cancelled), string(bridge.Rejected)})
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune: %w", s.wrap("writing to", err))
	}
	return int(n), nil
}

// IdempotencyKeys implements store.Store.
func (s *Postgres) IdempotencyKeys(ctx context.Context, since time.Time) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, `
SELECT id, b #>> '{Req,IdempotencyKey}' FROM (
	SELECT seq, id, convert_from(body, 'UTF8')::jsonb AS b FROM jobs WHERE updated >= $1
) AS x
WHERE b #>> '{Req,IdempotencyKey}' IS NOT NULL AND b ->> 'Parent' IS NULL
ORDER BY seq DESC`, since.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("store: idempotency keys: %w", s.wrap("reading", err))
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, key string
		if err := rows.Scan(&id, &key); err != nil {
			return nil, fmt.Errorf("store: idempotency keys: %w", s.wrap("reading", err))
		}
		if key != "" {
			out[key] = id
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: idempotency keys: %w", s.wrap("reading", err))
	}
	return out, nil
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// MatchIDs implements bridge.IDMatcher.
func (s *Postgres) MatchIDs(ctx context.Context, q string, limit int) ([]string, error) {
	e := likeEscaper.Replace(q)
	query := `SELECT id FROM jobs WHERE id LIKE $1 ESCAPE '\' OR id LIKE $2 ESCAPE '\' ORDER BY seq`
	args := []any{e + "%", "%" + e}
	if limit > 0 {
		query, args = query+" LIMIT $3", append(args, limit)
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: matching job ids: %w", s.wrap("reading", err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: matching job ids: %w", s.wrap("reading", err))
	}
	return ids, nil
}

// Dump implements store.Store: every table from one repeatable-read
// snapshot, in the portable format (store.WriteDump).
func (s *Postgres) Dump(ctx context.Context, w io.Writer) (*store.Report, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("store %s: %w", s.where, store.ErrClosed)
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: dump: %w", s.wrap("reading", err))
	}
	defer tx.Rollback()
	rep, err := store.WriteDump(ctx, tx, w, "postgres")
	if err != nil {
		return nil, fmt.Errorf("store: dump of %s: %w", s.where, s.wrap("reading", err))
	}
	rep.Path = s.where
	return rep, nil
}

// LoadDump implements store.Store: the whole dump in one transaction.
func (s *Postgres) LoadDump(ctx context.Context, r io.Reader) (*store.Report, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("store %s: %w", s.where, store.ErrClosed)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: load: %w", s.wrap("writing to", err))
	}
	defer tx.Rollback()
	// Nobody else writes while the dump goes in.
	if _, err := tx.ExecContext(ctx, `LOCK TABLE jobs, sites, kv, counters IN EXCLUSIVE MODE`); err != nil {
		return nil, fmt.Errorf("store: load: %w", s.wrap("writing to", err))
	}
	rep, err := store.LoadDumpInto(ctx, tx, r, func(n int) string { return fmt.Sprintf("$%d", n) })
	if err != nil {
		return nil, fmt.Errorf("store: loading a dump into %s: %w", s.where, s.wrap("writing to", err))
	}
	if _, err := tx.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence('jobs', 'seq'), coalesce((SELECT max(seq) FROM jobs), 0) + 1, false)`); err != nil {
		return nil, fmt.Errorf("store: load: %w", s.wrap("writing to", err))
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: load: %w", s.wrap("committing to", err))
	}
	s.idMu.Lock()
	s.nextID, s.maxID = 0, 0
	s.idMu.Unlock()
	rep.Path = s.where
	return rep, nil
}

// Backup implements store.Store: the portable dump into the new file dst.
func (s *Postgres) Backup(ctx context.Context, dst string) (*store.Report, error) {
	return store.DumpToFile(ctx, s, dst)
}
