package store

import (
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Sentinel errors of the durable store. Every error the store returns for
// one of these conditions wraps the sentinel (test with errors.Is) and names
// the database file.
var (
	// ErrCorrupt: the file is not a valid gridsub database — not SQLite at
	// all (random bytes, another format), a truncated or damaged SQLite
	// file, or a SQLite database that gridsub did not create. Open leaves
	// such a file untouched.
	ErrCorrupt = errors.New("corrupt or foreign database file")
	// ErrNewerSchema: the database was written by a newer gridsub (its
	// schema version is above the one this binary knows). Open refuses it
	// without touching it; upgrade gridsub.
	ErrNewerSchema = errors.New("database schema is newer than this gridsub")
	// ErrDiskFull: a write failed because the file system (or the
	// configured size limit) is full. Nothing of the failed write is
	// committed; everything committed before stays intact.
	ErrDiskFull = errors.New("database disk full")
	// ErrUnavailable: the database cannot be used right now — locked by
	// another process beyond the busy timeout, or the file cannot be read
	// or written (permissions, a directory in its place).
	ErrUnavailable = errors.New("database unavailable")
	// ErrReadOnly: the database cannot be written — its file or directory
	// is not writable by this process, its file system is mounted
	// read-only, or the file was moved or deleted while open. Errors that
	// wrap it also wrap ErrUnavailable.
	ErrReadOnly = errors.New("database read-only")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrNotEmpty: LoadDump (gridsub store restore of a dump) was given a
	// store that already holds jobs or sites; a dump only fills an empty
	// one.
	ErrNotEmpty = errors.New("store is not empty")
)

// code returns the primary SQLite result code of err, or 0.
func code(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}

// classify wraps a SQLite error with the matching sentinel, naming the file
// and the operation. Errors that match no sentinel are wrapped as they are.
func classify(path, op string, err error) error {
	if err == nil {
		return nil
	}
	switch code(err) {
	case sqlite3.SQLITE_FULL:
		return fmt.Errorf("%s %s: %w (free space on its file system; everything committed before is intact): %w", op, path, ErrDiskFull, err)
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return fmt.Errorf("%s %s: %w (locked by another process beyond the busy timeout): %w", op, path, ErrUnavailable, err)
	case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
		return fmt.Errorf("%s %s: %w (the file is damaged; restore a backup or move it aside): %w", op, path, ErrCorrupt, err)
	case sqlite3.SQLITE_READONLY:
		return fmt.Errorf("%s %s: %w (%w: check the file's permissions, its directory and its file system, and that nobody moved it): %w",
			op, path, ErrReadOnly, ErrUnavailable, err)
	case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
		return fmt.Errorf("%s %s: %w (check the file's permissions and its directory): %w", op, path, ErrUnavailable, err)
	}
	return fmt.Errorf("%s %s: %w", op, path, err)
}
