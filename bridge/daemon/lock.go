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

// LockName is the lock file in the state directory.
const LockName = "gridsub.lock"

// Lock is the exclusive hold of a state directory: one daemon (or one
// `gridsub store restore`) at a time. It is an flock(2) on
// <state_dir>/gridsub.lock, whose content is the holder's pid. The kernel
// drops it when the process ends, however it ends (SIGKILL included), so a
// crash never leaves a stale lock; the file itself stays (removing it would
// let two processes lock two different files of the same name).
type Lock struct {
	f    *os.File
	path string
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
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state directory lock %s: %w", p, err)
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
		return nil, fmt.Errorf("state directory lock %s: %w", p, err)
	}
	// Ours now: say who holds it.
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("state directory lock %s: %w", p, err)
		}
	}
	return &Lock{f: f, path: p}, nil
}

// lockedErr says who holds the lock of dir.
func lockedErr(dir, p string) error {
	pid, _ := lockPID(p)
	who := "another process (pid unknown)"
	if pid > 0 {
		who = "gridsub pid " + strconv.Itoa(pid)
	}
	return fmt.Errorf("%w: %s is held by %s (lock %s); stop it first (kill %s)", ErrLocked, dir, who, p, pidOr(pid))
}

func pidOr(pid int) string {
	if pid > 0 {
		return strconv.Itoa(pid)
	}
	return "<pid>"
}

// lockPID reads the pid written in a lock file (0 if none can be read).
func lockPID(p string) (int, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("lock file %s holds no pid", p)
	}
	return pid, nil
}

// Release drops the lock. Safe to call more than once and on nil.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	return err
}

// LockHolder tells whether some process holds the lock of the state
// directory dir, and its pid (0 if unknown), without taking it for longer
// than the test and without creating anything.
func LockHolder(dir string) (held bool, pid int, err error) {
	p := filepath.Join(dir, LockName)
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("state directory lock %s: %w", p, err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			pid, _ := lockPID(p)
			return true, pid, nil
		}
		return false, 0, fmt.Errorf("state directory lock %s: %w", p, err)
	}
	return false, 0, nil // closing f drops the probe's lock
}
