package store_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

// damagePage overwrites page n (1-based, 4096 bytes) of the file with
// random bytes, keeping everything else.
func damagePage(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	b := make([]byte, 4096)
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	if _, err := f.WriteAt(b, int64(n-1)*4096); err != nil {
		t.Fatal(err)
	}
}

// pages returns the number of 4096-byte pages of the file.
func pages(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Size() / 4096)
}

// TestOpenRefusesDamagedFiles: what Open refuses beyond the header checks
// of TestOpenRefusesNonDatabases — an empty file, and a file whose header
// and schema are intact but one data page is garbage (only quick_check
// finds it). Each is left byte for byte as it was, with nothing created
// beside it (untouched compares the directory's listing too).
func TestOpenRefusesDamagedFiles(t *testing.T) {
	dir := t.TempDir()
	t.Run("0 bytes", func(t *testing.T) {
		p := filepath.Join(dir, "empty.db")
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		untouched(t, p, store.ErrCorrupt, "empty (0 bytes)", "gridsub store restore")
	})
	t.Run("one data page overwritten", func(t *testing.T) {
		p := populated(t, 300)
		n := pages(t, p)
		if n < 8 {
			t.Fatalf("test database too small: %d pages", n)
		}
		damagePage(t, p, n/2)
		err := untouched(t, p, store.ErrCorrupt, "quick_check", "gridsub store restore")
		t.Logf("refused: %v", err)
	})
	t.Run("last page overwritten", func(t *testing.T) {
		p := populated(t, 300)
		damagePage(t, p, pages(t, p))
		untouched(t, p, store.ErrCorrupt)
	})
}

// TestOpenMakesANewFileAtomically: a missing file becomes a database made
// under another name and linked into place; nothing else is left in the
// directory.
func TestOpenMakesANewFileAtomically(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "gridsub.db")
	s, err := store.Open(context.Background(), p, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, job("a", "n", bridge.Queued))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := dirList(t, filepath.Dir(p)); !reflect.DeepEqual(got, []string{"gridsub.db"}) {
		t.Fatalf("after creating and closing, the directory holds %v, want only gridsub.db", got)
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("new database mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	p := populated(t, 120)
	for _, full := range []bool{false, true} {
		before := sum(t, p)
		entries := dirList(t, filepath.Dir(p))
		rep, err := store.Check(ctx, p, store.CheckOptions{Full: full})
		if err != nil {
			t.Fatalf("Check(full=%v) of a sound file: %v", full, err)
		}
		want := map[bool]string{false: "quick_check", true: "integrity_check"}[full]
		if rep.Jobs != 120 || rep.Schema != store.SchemaVersion || rep.Check != want || len(rep.Problems) != 0 || rep.Bytes == 0 {
			t.Fatalf("Check(full=%v) = %+v", full, rep)
		}
		if sum(t, p) != before || !reflect.DeepEqual(dirList(t, filepath.Dir(p)), entries) {
			t.Fatal("Check changed the file or created files beside it")
		}
	}
	damagePage(t, p, pages(t, p)/2)
	rep, err := store.Check(ctx, p, store.CheckOptions{Full: true})
	if !errors.Is(err, store.ErrCorrupt) || rep == nil || len(rep.Problems) == 0 || !strings.Contains(err.Error(), p) {
		t.Fatalf("Check of a damaged file = %+v, %v; want ErrCorrupt naming the file, with problems", rep, err)
	}
	t.Logf("problems: %q", rep.Problems)
	if _, err := store.Check(ctx, filepath.Join(t.TempDir(), "none.db"), store.CheckOptions{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Check of a missing file = %v, want ErrNotExist", err)
	}
}

// TestBackupRestoreRoundTrip: a backup of a live store holds what was
// committed; Restore puts it back, keeps the replaced database (which
// still opens with everything it had), and refuses a damaged backup
// without changing anything.
func TestBackupRestoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "state", "gridsub.db")
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		mustPut(t, s, fullJob(fmt.Sprintf("g%03d", i)))
	}
	bk := filepath.Join(dir, "backup.db")
	rep, err := s.Backup(ctx, bk)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Jobs != 40 || rep.Check != "integrity_check" || rep.Path != bk {
		t.Fatalf("Backup report %+v", rep)
	}
	if fi, _ := os.Stat(bk); fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup mode %v, want 0600", fi.Mode().Perm())
	}
	before := sum(t, bk)
	if _, err := s.Backup(ctx, bk); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("a second backup onto the same file = %v, want a refusal", err)
	}
	if sum(t, bk) != before {
		t.Fatal("the refused backup changed the existing file")
	}
	for i := 40; i < 55; i++ { // written after the backup
		mustPut(t, s, fullJob(fmt.Sprintf("g%03d", i)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A damaged backup is refused and nothing changes.
	bad := filepath.Join(dir, "bad.db")
	b, _ := os.ReadFile(bk)
	os.WriteFile(bad, b, 0o600)
	damagePage(t, bad, pages(t, bad)/2)
	live := sum(t, path)
	if _, _, err := store.Restore(ctx, bad, path, time.Now()); !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("Restore of a damaged backup = %v, want ErrCorrupt saying nothing changed", err)
	}
	if sum(t, path) != live || !reflect.DeepEqual(dirList(t, filepath.Dir(path)), []string{"gridsub.db"}) {
		t.Fatal("the refused restore changed the state directory")
	}

	at := time.Date(2026, 11, 24, 18, 0, 0, 0, time.UTC)
	kept, _, err := store.Restore(ctx, bk, path, at)
	if err != nil {
		t.Fatal(err)
	}
	if want := path + ".bak-20261124T180000Z"; kept != want {
		t.Fatalf("kept %q, want %q", kept, want)
	}
	if sum(t, bk) != before {
		t.Fatal("Restore changed the backup file")
	}
	count := func(p string) int {
		s, err := store.Open(ctx, p, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return len(mustList(t, s, bridge.Filter{}))
	}
	if n := count(path); n != 40 {
		t.Fatalf("restored database has %d jobs, want the backup's 40", n)
	}
	if n := count(kept); n != 55 {
		t.Fatalf("kept database has %d jobs, want 55", n)
	}
	// The same second again: the kept name does not collide.
	kept2, _, err := store.Restore(ctx, bk, path, at)
	if err != nil || kept2 == kept || !strings.HasPrefix(kept2, kept) {
		t.Fatalf("a second restore at the same time kept %q, %v", kept2, err)
	}
	// BackupFile of a closed database.
	bk2 := filepath.Join(dir, "backup2.db")
	if rep, err := store.BackupFile(ctx, kept, bk2); err != nil || rep.Jobs != 55 {
		t.Fatalf("BackupFile = %+v, %v", rep, err)
	}
}

func TestHealthFindsDamageLater(t *testing.T) {
	ctx := context.Background()
	path := populated(t, 300)
	s, err := store.Open(ctx, path, store.Options{HealthEvery: time.Nanosecond, CheckEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.QuickCheck(ctx); err != nil {
		t.Fatal(err)
	}
	damagePage(t, path, pages(t, path)/2)
	// The background quick_check that Health starts finds it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.Health(ctx)
		if errors.Is(err, store.ErrCorrupt) {
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "quick_check") {
				t.Fatalf("Health = %v, want it to name the file and the check", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Health still %v 10s after a page was damaged", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.QuickCheck(ctx); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("QuickCheck = %v, want ErrCorrupt", err)
	}
}

func TestHealthFileMovedAway(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gridsub.db")
	s, err := store.Open(ctx, path, store.Options{HealthEvery: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := s.Health(ctx); !errors.Is(err, store.ErrReadOnly) || !strings.Contains(err.Error(), "moved or deleted") {
		t.Fatalf("Health after the file was moved = %v, want ErrReadOnly saying so", err)
	}
}

func TestHealthDiskFullPageLimit(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, filepath.Join(t.TempDir(), "x.db"), store.Options{MaxPages: 64, HealthEvery: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := fill(t, s); !errors.Is(err, store.ErrDiskFull) {
		t.Fatal(err)
	}
	if err := s.Health(ctx); !errors.Is(err, store.ErrDiskFull) || !strings.Contains(err.Error(), "limit of 64 pages") {
		t.Fatalf("Health of a store at its page limit = %v, want ErrDiskFull", err)
	}
}

// mountOrSkip runs mount(8) with args, skipping the test when that is not
// possible (not root, no mount namespace rights), and unmounts dir at the
// end.
func mountOrSkip(t *testing.T, dir string, args ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount; TestHealthDiskFullPageLimit and TestHealthFileMovedAway run without")
	}
	if out, err := runMount(args...); err != nil {
		t.Skipf("cannot mount here (%v: %s)", err, out)
	}
	t.Cleanup(func() {
		if out, err := runUmount(dir); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// TestHealthDiskFullTmpfs: a real full file system (a tmpfs of 8 MiB
// filled by another file) makes Health say so; freeing space heals it.
func TestHealthDiskFullTmpfs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	mountOrSkip(t, dir, "-t", "tmpfs", "-o", "size=8m", "tmpfs", dir)
	path := filepath.Join(dir, "gridsub.db")
	s, err := store.Open(ctx, path, store.Options{HealthEvery: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Health(ctx); err != nil {
		t.Fatalf("Health with space free: %v", err)
	}
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			break // ENOSPC
		}
	}
	f.Close()
	err = s.Health(ctx)
	if !errors.Is(err, store.ErrDiskFull) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "bytes free") {
		t.Fatalf("Health on a full file system = %v, want ErrDiskFull naming the file and the free space", err)
	}
	t.Logf("full: %v", err)
	os.Remove(filler)
	if err := s.Health(ctx); err != nil {
		t.Fatalf("Health once space is free again: %v", err)
	}
}

// TestHealthReadOnlyMount: the state directory becomes read-only (a
// read-only bind mount over it: the store's open files stay writable, but
// nothing new can be created there — no journal, no restart) and Health
// says so.
func TestHealthReadOnlyMount(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "gridsub.db")
	s, err := store.Open(ctx, path, store.Options{HealthEvery: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Health(ctx); err != nil {
		t.Fatal(err)
	}
	mountOrSkip(t, dir, "--bind", dir, dir)
	if out, err := runMount("-o", "remount,bind,ro", dir); err != nil {
		t.Fatalf("remount read-only: %v: %s", err, out)
	}
	err = s.Health(ctx)
	if !errors.Is(err, store.ErrReadOnly) || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("Health on a read-only mount = %v, want ErrReadOnly", err)
	}
	t.Logf("read-only: %v", err)
}

// TestOpenRefusesDamageBesideACrashWAL: a process was SIGKILLed while
// writing (its WAL holds committed pages), and a page of the main file is
// damaged. Open refuses; the database and its WAL are byte for byte what
// they were. (With a WAL to replay the check must read through SQLite's
// locking, which may rebuild the -shm index: that file is not compared.)
func TestOpenRefusesDamageBesideACrashWAL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := populated(t, 300)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for n := 0; n < 30 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "ok ") {
			n++
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	wi, err := os.Stat(path + "-wal")
	if err != nil || wi.Size() == 0 {
		t.Fatalf("no WAL left by the killed writer: %v", err)
	}
	damagePage(t, path, pages(t, path)/3)
	db, wal := sum(t, path), sum(t, path+"-wal")
	_, err = store.Open(context.Background(), path, store.Options{})
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open = %v, want ErrCorrupt naming the file", err)
	}
	if sum(t, path) != db || sum(t, path+"-wal") != wal {
		t.Fatal("the refused Open changed the database or its WAL")
	}
	t.Logf("refused: %v", err)
}

const healthEnv = "GRIDSUB_STORE_HEALTH_HELPER"

// notWritableReport opens a store in dir, makes the file and then the
// directory read-only by mode, and says what Health answers each time, one
// line each: "fresh <err>", "file <readonly?> <err>", "dir <readonly?> <err>".
func notWritableReport(dir string) string {
	ctx := context.Background()
	path := filepath.Join(dir, "gridsub.db")
	s, err := store.Open(ctx, path, store.Options{HealthEvery: time.Nanosecond})
	if err != nil {
		return "open " + err.Error()
	}
	defer s.Close()
	out := fmt.Sprintf("fresh %v\n", s.Health(ctx))
	os.Chmod(path, 0o400)
	err = s.Health(ctx)
	out += fmt.Sprintf("file %v %v\n", errors.Is(err, store.ErrReadOnly), err)
	os.Chmod(path, 0o600)
	os.Chmod(dir, 0o500)
	err = s.Health(ctx)
	out += fmt.Sprintf("dir %v %v\n", errors.Is(err, store.ErrReadOnly), err)
	os.Chmod(dir, 0o700)
	return out
}

// TestHealthNotWritable: a database file or state directory whose mode
// forbids writing is reported read-only. Root writes anyway, so as root
// the store runs in a child process as uid 65534.
func TestHealthNotWritable(t *testing.T) {
	var out string
	if os.Geteuid() != 0 {
		out = notWritableReport(t.TempDir())
	} else {
		top, err := os.MkdirTemp("", "gridsub-ro-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(top)
		os.Chmod(top, 0o755)
		dir := filepath.Join(top, "state")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		exe, _ := os.Executable()
		bin, _ := os.ReadFile(exe)
		child := filepath.Join(top, "store.test")
		if err := os.WriteFile(child, bin, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(child, "-test.run=^$")
		cmd.Env = append(os.Environ(), healthEnv+"="+dir)
		cmd.Dir = top
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child as uid 65534: %v: %s", err, b)
		}
		out = string(b)
	}
	t.Logf("%s", out)
	for _, want := range []string{"fresh <nil>\n", "file true ", "is not writable by uid", "dir true "} {
		if !strings.Contains(out, want) {
			t.Fatalf("Health with the file, then the directory read-only by mode said:\n%s\nwant it to contain %q", out, want)
		}
	}
}
