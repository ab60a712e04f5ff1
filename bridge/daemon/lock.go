package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LockName is the file in the state directory that names the lock's
// holder (its pid). It is not the lock: deleting it frees nothing.
const LockName = "gridsub.lock"

// ErrLockLost: the state directory a daemon holds the lock of is no longer
// the directory at its path (it was moved, or deleted and made again), so
// another daemon could lock the new one; this daemon stops dispatching.
var ErrLockLost = errors.New("the state directory's lock is lost")

// Lock is the exclusive hold of a state directory: one daemon (or one
// `gridsub store restore`) at a time. It is an flock(2) on the state
// directory itself, which cannot be unlinked while it holds the database
// (a tmp cleaner or a user clearing a "stale" lock file frees nothing);
// <state_dir>/gridsub.lock only names the holder's pid, and is written
// again if it goes missing. The kernel drops the flock when the process
// ends, however it ends (SIGKILL included), so a crash never leaves a
// stale lock.
type Lock struct {
	dir  *os.File // the locked directory
	path string   // the directory's path
	file string   // the pid file
	pidf *os.File // the pid file, flocked too (what gridsub before issue 29 locked: a daemon of either kind excludes the other)
}

// LockStateDir takes the exclusive lock of the state directory dir
// (created 0700 if missing) without waiting. If another process holds it,
// the error wraps ErrLocked and names that process's pid. The lock is held
// until Release or the end of the process.
func LockStateDir(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	p := filepath.Join(dir, LockName)
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("state directory lock %s: %w", dir, err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	for i := 0; i < 4 && errors.Is(err, unix.EWOULDBLOCK); i++ {
		// LockHolder holds it for an instant to look: give it that.
		time.Sleep(50 * time.Millisecond)
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, lockedErr(dir, p)
		}
		return nil, fmt.Errorf("state directory lock %s (an flock on the directory): %w", dir, err)
	}
	l := &Lock{dir: f, path: dir, file: p}
	if err := l.writePID(); err != nil {
		f.Close()
		if errors.Is(err, ErrLocked) {
			return nil, lockedErr(dir, p)
		}
		return nil, err
	}
	return l, nil
}

// writePID writes the holder's pid into the pid file, in place, made
// again (and flocked again) if it was deleted or replaced. The pid file's
// own flock is what an older gridsub takes: one that holds it (ErrLocked)
// is another daemon on this directory.
func (l *Lock) writePID() error {
	if l.pidf != nil {
		held, err1 := l.pidf.Stat()
		now, err2 := os.Lstat(l.file)
		if err1 != nil || err2 != nil || !os.SameFile(held, now) {
			l.pidf.Close()
			l.pidf = nil
		}
	}
	if l.pidf == nil {
		f, err := os.OpenFile(l.file, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o600)
		if err != nil {
			return fmt.Errorf("state directory lock %s: %w", l.file, err)
		}
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			f.Close()
			return fmt.Errorf("state directory lock %s: not a regular file", l.file)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return fmt.Errorf("%w: %s", ErrLocked, l.file)
			}
			return fmt.Errorf("state directory lock %s: %w", l.file, err)
		}
		l.pidf = f
	}
	if err := l.pidf.Truncate(0); err != nil {
		return fmt.Errorf("state directory lock %s: %w", l.file, err)
	}
	if _, err := l.pidf.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		return fmt.Errorf("state directory lock %s: %w", l.file, err)
	}
	return nil
}

// Check says whether the lock still excludes every other daemon: the
// directory at the state directory's path must still be the one locked.
// It returns an error wrapping ErrLockLost if not. A missing or rewritten
// pid file does not weaken the lock: Check writes it again and says so
// with restored.
func (l *Lock) Check() (restored bool, err error) {
	if l == nil || l.dir == nil {
		return false, fmt.Errorf("%w: released", ErrLockLost)
	}
	held, err := l.dir.Stat()
	if err != nil {
		return false, fmt.Errorf("%w: %s: %w", ErrLockLost, l.path, err)
	}
	now, err := os.Stat(l.path)
	switch {
	case err != nil:
		return false, fmt.Errorf("%w: the state directory %s is gone (%w); another daemon could start there and run the same jobs, "+
			"so this one dispatches nothing more: stop it, put the directory back, and start it again", ErrLockLost, l.path, err)
	case !os.SameFile(held, now):
		return false, fmt.Errorf("%w: %s is no longer the state directory this daemon locked (it was moved or made again); "+
			"another daemon could lock it and run the same jobs, so this one dispatches nothing more: stop it and start it again", ErrLockLost, l.path)
	}
	if pid, _ := lockPID(l.file); pid != os.Getpid() {
		if err := l.writePID(); errors.Is(err, ErrLocked) {
			return false, fmt.Errorf("%w: another process took %s after it was deleted (an older gridsub?); this daemon dispatches nothing more: stop both and start one",
				ErrLockLost, l.file)
		} else if err != nil {
			return true, err
		}
		return true, nil
	}
	return false, nil
}

// lockedErr says who holds the lock of dir.
func lockedErr(dir, p string) error {
	pid, _ := lockPID(p)
	who := "another process (pid unknown)"
	if pid > 0 {
		who = "gridsub pid " + strconv.Itoa(pid)
	}
	return fmt.Errorf("%w: %s is held by %s (an flock on the directory; its pid in %s); stop it first (kill %s)", ErrLocked, dir, who, p, pidOr(pid))
}

func pidOr(pid int) string {
	if pid > 0 {
		return strconv.Itoa(pid)
	}
	return "<pid>"
}

// maxPIDFile bounds what is read of a pid file.
const maxPIDFile = 64

// lockPID reads the pid written in a pid file (0 if none can be read).
func lockPID(p string) (int, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("lock file %s is not a regular file", p)
	}
	b := make([]byte, maxPIDFile)
	n, _ := f.Read(b)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("lock file %s holds no pid", p)
	}
	return pid, nil
}

// Release drops the lock. Safe to call more than once and on nil.
func (l *Lock) Release() error {
	if l == nil || l.dir == nil {
		return nil
	}
	err := l.dir.Close() // closing the last descriptor drops the flock
	l.dir = nil
	if l.pidf != nil {
		l.pidf.Close()
		l.pidf = nil
	}
	return err
}

// LockHolder tells whether some process holds the lock of the state
// directory dir, and its pid (0 if unknown), without taking it for longer
// than the test and without creating anything.
func LockHolder(dir string) (held bool, pid int, err error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("state directory lock %s: %w", dir, err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			pid, _ := lockPID(filepath.Join(dir, LockName))
			return true, pid, nil
		}
		return false, 0, fmt.Errorf("state directory lock %s: %w", dir, err)
	}
	return false, 0, nil // closing f drops the probe's lock
}
