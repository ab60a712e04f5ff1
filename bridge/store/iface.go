package store

import (
	"context"
	"io"
	"time"

	"github.com/gridsub/gridsub/bridge"
)

// Store is the broker's durable state as the daemon and the API use it:
// the jobs (bridge.Store), the values beside them, the sites' health, the
// reservations, the idempotency keys and the id matching. *SQLite (one
// file, the embedded default) and pgstore.Postgres (a PostgreSQL server,
// shared by several brokers) implement it; storetest.Durable is the
// conformance suite both pass.
//
// Contract, beyond bridge.Store's, bridge.ValueStore's,
// bridge.UsageStore's and SiteHealthStore's:
//   - Every write is durable when it returns (a crash or a power cut
//     after it loses nothing of it); a write that fails left nothing of
//     itself behind.
//   - Values(prefix) returns every key starting with prefix; DeleteValue
//     of a missing key is not an error.
//   - Reservations lists the reservation rows, earliest window first
//     (active: only admitted, binding or bound ones).
//   - IdempotencyKeys maps the Request.IdempotencyKey of every job (not a
//     group's element) written since since to its job's id (the oldest job
//     when two share a key).
//   - MatchIDs is bridge.IDMatcher: ids that start or end with s,
//     literally, in submission order.
//   - Prune deletes the ended jobs last written before a time and says how
//     many.
//   - Health answers nil while the store can keep jobs; otherwise an error
//     wrapping ErrCorrupt, ErrReadOnly, ErrDiskFull, ErrUnavailable or
//     ErrClosed.
//   - Backup writes a consistent copy into a new file dst (never an
//     existing one; mode 0600) and reports what it holds: *SQLite a SQLite
//     file, pgstore a portable dump (WriteDump's format).
//   - Dump writes the portable dump of every table (WriteDump's format)
//     from one consistent snapshot; LoadDump fills an empty store from one
//     (ErrNotEmpty when it holds a job).
//   - Where names the database for messages: a file's path, or a server
//     and database with no password in it.
//
// Errors wrap this package's sentinels (ErrCorrupt, ErrNewerSchema,
// ErrDiskFull, ErrUnavailable, ErrReadOnly, ErrClosed, ErrNotEmpty) where
// one applies, and bridge.ErrNotFound / bridge.ErrBadRequest as
// bridge.Store says. Every method is safe for concurrent use.
type Store interface {
	bridge.Store
	bridge.ValueStore
	bridge.UsageStore
	bridge.IDMatcher
	SiteHealthStore
	Values(ctx context.Context, prefix string) (map[string][]byte, error)
	DeleteValue(ctx context.Context, key string) error
	Reservations(ctx context.Context, active bool) ([]ResvRecord, error)
	IdempotencyKeys(ctx context.Context, since time.Time) (map[string]string, error)
	Prune(ctx context.Context, before time.Time) (int, error)
	Health(ctx context.Context) error
	Backup(ctx context.Context, dst string) (*Report, error)
	Dump(ctx context.Context, w io.Writer) (*Report, error)
	LoadDump(ctx context.Context, r io.Reader) (*Report, error)
	Where() string
	Close() error
}

var _ Store = (*SQLite)(nil)

// Where implements Store: the database file's path.
func (s *SQLite) Where() string { return s.path }
