package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Backup writes a consistent copy of the open store to dst with SQLite's
// VACUUM INTO (a snapshot: writes committed meanwhile are not in it, and
// they are not held up). dst must not exist; it is created 0600. The copy
// is checked with integrity_check before Backup returns its report; on any
// failure dst is removed.
func (s *SQLite) Backup(ctx context.Context, dst string) (*Report, error) {
	return backup(ctx, s.path, dst, true)
}

// BackupFile is Backup for a database that no process has open (a
// daemon's state directory whose daemon is stopped: hold its lock while
// this runs). It reads src without writing it or creating anything beside
// it.
func BackupFile(ctx context.Context, src, dst string) (*Report, error) {
	return backup(ctx, src, dst, false)
}

func backup(ctx context.Context, src, dst string, live bool) (*Report, error) {
	abs, err := filepath.Abs(dst)
	if err != nil {
		return nil, fmt.Errorf("store: backup to %s: %w", dst, err)
	}
	dst = abs
	if src, err = filepath.Abs(src); err != nil {
		return nil, fmt.Errorf("store: backup of %s: %w", src, err)
	}
	if _, err := os.Stat(src); err != nil {
		return nil, fmt.Errorf("store: backup: no database at %s: %w", src, err)
	}
	// VACUUM INTO accepts an empty file: creating it first (O_EXCL) gives
	// it the mode 0600 and never replaces an existing file.
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("store: backup: %s already exists; choose a new file name (a backup never overwrites)", dst)
		}
		return nil, fmt.Errorf("store: backup: creating %s: %w", dst, err)
	}
	f.Close()
	ok := false
	defer func() {
		if !ok {
			os.Remove(dst)
		}
	}()
	db, err := openVerify(src, live)
	if err != nil {
		return nil, fmt.Errorf("store: backup: %w", err)
	}
	_, err = db.ExecContext(ctx, `VACUUM INTO ?`, dst)
	if cerr := db.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("store: backup: %w", corruptOr(src, "VACUUM INTO "+dst+" of", err))
	}
	if err := syncFile(dst); err != nil {
		return nil, fmt.Errorf("store: backup: %w", err)
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return nil, fmt.Errorf("store: backup: %w", err)
	}
	rep, err := Check(ctx, dst, CheckOptions{Full: true})
	if err != nil {
		return rep, fmt.Errorf("store: backup: the copy does not check: %w", err)
	}
	ok = true
	return rep, nil
}

// Restore replaces the database at path with a copy of the backup file,
// after checking the backup with integrity_check (a damaged backup, a file
// that is not a gridsub database or one of a newer schema is refused, and
// nothing changes). The replaced database, with its -wal and -shm if a
// crash left them, is kept beside it as <path>.bak-<at, UTC> and its name
// returned ("" when there was none). The backup file itself is only read.
//
// The caller must make sure no process has path open (a daemon holds its
// state directory's lock while it runs: take it first).
func Restore(ctx context.Context, backupFile, path string, at time.Time) (kept string, rep *Report, err error) {
	if path, err = filepath.Abs(path); err != nil {
		return "", nil, fmt.Errorf("store: restore: %w", err)
	}
	rep, err = Check(ctx, backupFile, CheckOptions{Full: true})
	if err != nil {
		return "", rep, fmt.Errorf("store: restore: the backup is not usable, nothing was changed: %w", err)
	}
	if rep.Schema == 0 {
		return "", rep, fmt.Errorf("store: restore: %w: %s is an empty SQLite database, not a gridsub backup; nothing was changed", ErrCorrupt, rep.Path)
	}
	if wi, err := os.Stat(rep.Path + "-wal"); err == nil && wi.Size() > 0 {
		return "", rep, fmt.Errorf("store: restore: %s has a write-ahead log beside it (%s-wal): it is a live or crashed database, not a backup; make one with gridsub store backup; nothing was changed", rep.Path, rep.Path)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", rep, fmt.Errorf("store: restore: %w: %w", ErrUnavailable, err)
	}
	tmp, err := copyTemp(rep.Path, dir, "."+filepath.Base(path)+".restore-*")
	if err != nil {
		return "", rep, fmt.Errorf("store: restore: %w", err)
	}
	defer os.Remove(tmp) // gone by then when all went well
	if _, err := os.Stat(path); err == nil {
		kept = path + ".bak-" + at.UTC().Format("20060102T150405Z")
		for n := 2; exists(kept); n++ {
			kept = path + ".bak-" + at.UTC().Format("20060102T150405Z") + "-" + strconv.Itoa(n)
		}
		if err := os.Rename(path, kept); err != nil {
			return "", rep, fmt.Errorf("store: restore: %w: keeping %s as %s: %w", ErrUnavailable, path, kept, err)
		}
		// A WAL belongs to its database: it goes with the kept file (where
		// SQLite finds it by name) and must never meet the restored one.
		for _, sfx := range []string{"-wal", "-shm"} {
			if err := os.Rename(path+sfx, kept+sfx); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return kept, rep, fmt.Errorf("store: restore: %w: moving %s%s beside %s: %w (the database was moved to %s; move it back to undo)",
					ErrUnavailable, path, sfx, kept, err, kept)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", rep, fmt.Errorf("store: restore: %w: %s: %w", ErrUnavailable, path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return kept, rep, fmt.Errorf("store: restore: %w: %w (the replaced database is %s)", ErrUnavailable, err, kept)
	}
	if err := syncDir(dir); err != nil {
		return kept, rep, fmt.Errorf("store: restore: %w", err)
	}
	return kept, rep, nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// copyTemp copies src to a new file (0600) in dir named after pattern,
// synced to disk, and returns its name.
func copyTemp(src, dir, pattern string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer in.Close()
	out, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out.Name())
		return "", fmt.Errorf("copying %s into %s: %w", src, dir, err)
	}
	return out.Name(), nil
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: syncing %s: %w", ErrUnavailable, path, err)
	}
	return nil
}
