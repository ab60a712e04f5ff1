package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// liveHint tells an operator what to do with damage found while the
// store is open.
const liveHint = "stop the daemon, keep a copy of the file, and restore a backup (gridsub store restore FILE)"

// healthKey is the kv row Health's probe write updates.
const healthKey = "store.health_probe"

// minRoomPages: with Options.MaxPages, Health reports ErrDiskFull when
// fewer pages than this are left under the limit (one job with its events
// takes a few).
const minRoomPages = 8

// health is the state behind SQLite.Health.
type health struct {
	mu      sync.Mutex
	at      time.Time // when err was found; zero: never probed
	err     error
	checkAt time.Time // when the last background quick_check started
	// corrupt, once set, is what Health answers: a quick_check failed or
	// SQLite reported a damaged page. Damage does not heal; the daemon
	// must be stopped and the file restored.
	corrupt  atomic.Pointer[error]
	checking atomic.Bool
}

func (s *SQLite) markCorrupt(err error) {
	if s.health.corrupt.CompareAndSwap(nil, &err) {
		s.log.Error("the database is damaged; stop the daemon and restore a backup (gridsub store restore)", "path", s.path, "err", err)
	}
}

// Health reports whether the store can serve and keep what it is given.
// It suits api.Checker. It returns nil or an error that names the file,
// says what is wrong and wraps one of:
//
//   - ErrClosed: the store was closed;
//   - ErrCorrupt: a quick_check (at most every Options.CheckEvery, in the
//     background) failed or a read or write met a damaged page; this stays
//     until the process ends;
//   - ErrReadOnly: the file or its directory is not writable, the file
//     system is mounted read-only, the file was moved away while open, or
//     the probe write failed with SQLITE_READONLY;
//   - ErrDiskFull: less than Options.MinFree free on the file system, fewer
//     than 8 pages left under Options.MaxPages, or the probe write failed
//     with SQLITE_FULL;
//   - ErrUnavailable: the schema version cannot be read, or the probe write
//     failed otherwise.
//
// The probe (a read, a few system calls and one durable write of a single
// row) runs at most every Options.HealthEvery; between, the last answer is
// returned.
func (s *SQLite) Health(ctx context.Context) error {
	select {
	case <-s.quit:
		return fmt.Errorf("store %s: %w", s.path, ErrClosed)
	default:
	}
	if e := s.health.corrupt.Load(); e != nil {
		return fmt.Errorf("store: health: %w", *e)
	}
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if s.opts.CheckEvery > 0 && now.Sub(h.checkAt) >= s.opts.CheckEvery && !h.checking.Swap(true) {
		h.checkAt = now
		go func() {
			defer h.checking.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			if err := s.QuickCheck(ctx); err != nil && !errors.Is(err, ErrCorrupt) {
				s.log.Warn("background quick_check", "path", s.path, "err", err)
			}
		}()
	}
	if !h.at.IsZero() && now.Sub(h.at) < s.opts.HealthEvery {
		return h.err
	}
	err := s.probeHealth(ctx)
	if ctx.Err() != nil {
		return err // a probe cut short says nothing about the store
	}
	if err != nil {
		err = fmt.Errorf("store: health: %w", err)
	}
	h.at, h.err = now, err
	return err
}

// probeHealth is one health probe (see Health).
func (s *SQLite) probeHealth(ctx context.Context) error {
	var v int
	if err := s.r.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v); err != nil {
		return s.wrap("reading", err)
	}
	if v != SchemaVersion {
		return fmt.Errorf("%s: schema version changed under the store to %d (this gridsub writes %d)", s.path, v, SchemaVersion)
	}
	dir := filepath.Dir(s.path)
	// Moved or deleted while open: SQLite would keep writing to a file
	// nobody will find again (it answers SQLITE_READONLY_DBMOVED).
	if fi, err := os.Stat(s.path); err != nil || !os.SameFile(fi, s.opened) {
		why := "another file is there now"
		if err != nil {
			why = err.Error()
		}
		return fmt.Errorf("%w: %s was moved or deleted while the store had it open (%s); what is written now is lost", ErrReadOnly, s.path, why)
	}
	for _, p := range []string{s.path, dir} {
		if err := unix.Access(p, unix.W_OK); err != nil {
			if errors.Is(err, unix.EROFS) {
				return fmt.Errorf("%w: %s is on a file system mounted read-only", ErrReadOnly, p)
			}
			return fmt.Errorf("%w: %s is not writable by uid %d: %w", ErrReadOnly, p, os.Getuid(), err)
		}
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err == nil {
		if fs.Flags&unix.ST_RDONLY != 0 {
			return fmt.Errorf("%w: %s is on a file system mounted read-only", ErrReadOnly, dir)
		}
		if free := int64(fs.Bavail) * int64(fs.Bsize); free < s.opts.MinFree {
			return fmt.Errorf("%w: %s: %s bytes free on its file system, less than the %s the store needs to go on writing",
				ErrDiskFull, s.path, strconv.FormatInt(free, 10), strconv.FormatInt(s.opts.MinFree, 10))
		}
	}
	if s.opts.MaxPages > 0 {
		var pages, free int
		if err := s.r.QueryRowContext(ctx, `SELECT page_count, freelist_count FROM pragma_page_count(), pragma_freelist_count()`).Scan(&pages, &free); err != nil {
			return s.wrap("reading", err)
		}
		if room := s.opts.MaxPages - pages + free; room < minRoomPages {
			return fmt.Errorf("%w: %s has %d of its limit of %d pages free (Options.MaxPages); a job may need more", ErrDiskFull, s.path, max(room, 0), s.opts.MaxPages)
		}
	}
	now := time.Now().UnixNano()
	err := s.write(ctx, func(w *wtx) error {
		return w.exec(qSetValue, healthKey, []byte(strconv.FormatInt(now, 10)), now)
	})
	if err != nil {
		return fmt.Errorf("a probe write failed: %w", s.wrap("writing", err))
	}
	return nil
}

// QuickCheck runs SQLite's quick_check on the open store through a
// connection of its own (it sees the file as it is on disk, not a cache).
// A failure wraps ErrCorrupt and is what Health answers from then on. It
// reads the whole file: about 0.25 s per 100,000 jobs.
func (s *SQLite) QuickCheck(ctx context.Context) error {
	db, err := openVerify(s.path, true)
	if err != nil {
		err = fmt.Errorf("store: quick_check: %w", err)
		if errors.Is(err, ErrCorrupt) {
			s.markCorrupt(err)
		}
		return err
	}
	defer db.Close()
	_, _, err = verify(ctx, db, s.path, false)
	if err != nil {
		err = fmt.Errorf("store: quick_check: %w", withHint(err, liveHint))
		if errors.Is(err, ErrCorrupt) {
			s.markCorrupt(err)
		}
	}
	return err
}
