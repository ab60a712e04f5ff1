package store_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

func sum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// untouched asserts that Open refuses path with an error wrapping want,
// naming the file and containing every phrase, and that the file (and any
// WAL beside it) is byte for byte what it was.
func untouched(t *testing.T, path string, want error, phrases ...string) error {
	t.Helper()
	before := sum(t, path)
	entries := dirList(t, filepath.Dir(path))
	s, err := store.Open(context.Background(), path, store.Options{BusyTimeout: 200 * time.Millisecond})
	if err == nil {
		s.Close()
		t.Fatalf("Open(%s) succeeded, want an error wrapping %v", path, want)
	}
	if !errors.Is(err, want) {
		t.Fatalf("Open(%s) = %v, want an error wrapping %v", path, err, want)
	}
	for _, p := range append([]string{path}, phrases...) {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not say %q", err, p)
		}
	}
	if after := sum(t, path); after != before {
		t.Fatalf("Open changed %s (sha256 %x -> %x)", path, before, after)
	}
	if got := dirList(t, filepath.Dir(path)); !reflect.DeepEqual(got, entries) {
		t.Fatalf("Open left files behind: before %v, after %v", entries, got)
	}
	return err
}

func dirList(t *testing.T, dir string) []string {
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// populated makes a closed database with n jobs and returns its path.
func populated(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gridsub.db")
	s, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		mustPut(t, s, fullJob(fmt.Sprintf("g%06d", i)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReopenKeepsEverything(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	s, err := store.Open(ctx, path, store.Options{IDBlock: 7})
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for range 10 {
		if last, err = s.NextID(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := fullJob("g1")
	mustPut(t, s, want)
	mustPut(t, s, job("g2", "other", bridge.Queued))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, want); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Put after Close = %v, want ErrClosed", err)
	}
	s, err = store.Open(ctx, path, store.Options{IDBlock: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Get(ctx, "g1")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopen Get = %+v, %v; want %+v", got, err, want)
	}
	if got := ids(mustList(t, s, bridge.Filter{})); !reflect.DeepEqual(got, []string{"g1", "g2"}) {
		t.Fatalf("after reopen List = %v", got)
	}
	n, err := s.NextID(ctx)
	if err != nil || n <= last {
		t.Fatalf("NextID after reopen = %d, %v; want > %d", n, err, last)
	}
}

func TestDeepCopyOfRequest(t *testing.T) {
	// Stricter than bridge.Job.Clone (which shares Req's maps and slices):
	// the store encodes the job before Put returns.
	s := openTemp(t)
	j := fullJob("r1")
	mustPut(t, s, j)
	j.Req.Env["A"] = "changed"
	j.Req.Command[0] = "changed"
	j.Predicted.Parts[0].Nodes = 999
	got, err := s.Get(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Req.Env["A"] != "1" || got.Req.Command[0] != "./run" || got.Predicted.Parts[0].Nodes != 32 {
		t.Fatalf("a change after Put leaked in: %+v", got.Req)
	}
}

func TestUnknownPagingCursor(t *testing.T) {
	s := openTemp(t)
	mustPut(t, s, job("a", "n", bridge.Queued))
	_, err := s.List(context.Background(), bridge.Filter{After: "zz"})
	if !errors.Is(err, bridge.ErrNotFound) || !strings.Contains(err.Error(), `"zz"`) {
		t.Fatalf("List after an unknown id = %v, want ErrNotFound naming it", err)
	}
}

func TestOpenRefusesNonDatabases(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 64<<10)
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("random bytes", func(t *testing.T) {
		untouched(t, write("random.db", random), store.ErrCorrupt, "not a valid gridsub database")
	})
	t.Run("text file", func(t *testing.T) {
		untouched(t, write("config.db", []byte("sites:\n  - name: a\n")), store.ErrCorrupt, "not a valid gridsub database", "no SQLite header")
	})
	t.Run("truncated database", func(t *testing.T) {
		path := populated(t, 200)
		b, _ := os.ReadFile(path)
		if len(b) < 3*4096 {
			t.Fatalf("test database too small (%d bytes) to truncate meaningfully", len(b))
		}
		for _, cut := range []int{len(b) / 2, len(b) - 4096, 1000} {
			untouched(t, write(fmt.Sprintf("cut%d.db", cut), b[:cut]), store.ErrCorrupt, "not a valid gridsub database", "truncated")
		}
	})
	t.Run("header intact, schema pages destroyed", func(t *testing.T) {
		path := populated(t, 50)
		b, _ := os.ReadFile(path)
		copy(b[100:4096], random) // the rest of page 1: sqlite_master's b-tree
		untouched(t, write("damaged.db", b), store.ErrCorrupt)
	})
	t.Run("SQLite database of another program", func(t *testing.T) {
		p := filepath.Join(dir, "other.db")
		db, err := sql.Open("sqlite", p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`CREATE TABLE photos(id INTEGER PRIMARY KEY, blob BLOB); INSERT INTO photos(blob) VALUES (x'00ff')`); err != nil {
			t.Fatal(err)
		}
		db.Close()
		untouched(t, p, store.ErrCorrupt, "not a valid gridsub database", "photos")
	})
}

func TestOpenUnreadable(t *testing.T) {
	dir := t.TempDir()
	t.Run("a directory in place of the file", func(t *testing.T) {
		p := filepath.Join(dir, "state.db")
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := store.Open(context.Background(), p, store.Options{})
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "directory") {
			t.Fatalf("Open(directory) = %v, want ErrUnavailable naming %s as a directory", err, p)
		}
	})
	t.Run("a parent that is a file", func(t *testing.T) {
		p := filepath.Join(dir, "plain")
		os.WriteFile(p, []byte("x"), 0o600)
		_, err := store.Open(context.Background(), filepath.Join(p, "state.db"), store.Options{})
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), p) {
			t.Fatalf("Open(file/state.db) = %v, want ErrUnavailable naming the path", err)
		}
	})
	t.Run("chmod 000 as an unprivileged user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to run a child as another user; the chmod 000 case below runs instead")
		}
		openAsNobody(t)
	})
	t.Run("chmod 000", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("running as root: chmod 000 does not stop root from reading; the case above drops to uid 65534 instead")
		}
		p := populated(t, 1)
		if err := os.Chmod(p, 0); err != nil {
			t.Fatal(err)
		}
		_, err := store.Open(context.Background(), p, store.Options{})
		if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, os.ErrPermission) {
			t.Fatalf("Open(chmod 000) = %v, want ErrUnavailable wrapping a permission error", err)
		}
	})
}

// setVersion rewrites the schema version behind the store's back, as a newer
// gridsub would have left it.
func setVersion(t *testing.T, path string, v int) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE schema_version SET version = ?`, v); err != nil {
		t.Fatal(err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := populated(t, 20)
	setVersion(t, path, store.SchemaVersion+1)
	err := untouched(t, path, store.ErrNewerSchema,
		"schema version "+strconv.Itoa(store.SchemaVersion+1), "up to "+strconv.Itoa(store.SchemaVersion), "upgrade gridsub")
	t.Log(err)
	// The same file opens again once the version is one this binary knows:
	// the refusal destroyed nothing.
	setVersion(t, path, store.SchemaVersion)
	s, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := len(mustList(t, s, bridge.Filter{})); n != 20 {
		t.Fatalf("%d jobs after the refusal, want 20", n)
	}
}

func TestBusyBeyondTimeout(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	s, err := store.Open(ctx, path, store.Options{BusyTimeout: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustPut(t, s, job("a", "n", bridge.Queued))
	// Another process holds the write lock.
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = s.Put(ctx, job("b", "n", bridge.Queued))
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Put while another process holds the lock = %v, want ErrUnavailable naming the file", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("Put gave up after %s, before the busy timeout", d)
	}
	// Readers are not blocked by a writer (WAL), and the lock's release
	// makes the store writable again.
	if _, err := s.Get(ctx, "a"); err != nil {
		t.Fatalf("Get while another process writes: %v", err)
	}
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, job("b", "n", bridge.Queued))
}

// fill puts jobs until a Put fails, returning the ids committed and the
// error.
func fill(t *testing.T, s *store.SQLite) ([]string, error) {
	t.Helper()
	var ok []string
	for i := range 1_000_000 {
		j := fullJob(fmt.Sprintf("g%07d", i))
		j.Reason = strings.Repeat("padding ", 50)
		if err := s.Put(context.Background(), j); err != nil {
			return ok, err
		}
		ok = append(ok, j.ID)
	}
	t.Fatal("the store never filled up")
	return nil, nil
}

func checkAfterFull(t *testing.T, path string, committed []string, opts store.Options) {
	t.Helper()
	s, err := store.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("reopen after disk full: %v", err)
	}
	defer s.Close()
	js := mustList(t, s, bridge.Filter{Events: true})
	if got := ids(js); !reflect.DeepEqual(got, committed) {
		t.Fatalf("after reopening, %d jobs; want the %d committed before the disk filled", len(got), len(committed))
	}
	want := fullJob(committed[len(committed)-1])
	want.Reason = strings.Repeat("padding ", 50)
	if !reflect.DeepEqual(js[len(js)-1], want) {
		t.Fatalf("last committed job changed: %+v", js[len(js)-1])
	}
}

func TestDiskFullPageLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	opts := store.Options{MaxPages: 64}
	s, err := store.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := fill(t, s)
	if !errors.Is(err, store.ErrDiskFull) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Put on a full database = %v, want ErrDiskFull naming the file", err)
	}
	t.Logf("%d jobs fit; then: %v", len(committed), err)
	if len(committed) == 0 {
		t.Fatal("nothing fit")
	}
	// Reads still work on the full store.
	if _, err := s.Get(context.Background(), committed[0]); err != nil {
		t.Fatal(err)
	}
	s.Close()
	checkAfterFull(t, path, committed, opts)
}

func TestDiskFullTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root; TestDiskFullPageLimit covers the size limit")
	}
	dir := t.TempDir()
	if out, err := runMount("-t", "tmpfs", "-o", "size=1m", "tmpfs", dir); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); TestDiskFullPageLimit covers the size limit", err, out)
	}
	t.Cleanup(func() {
		if out, err := runUmount(dir); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	path := filepath.Join(dir, "x.db")
	s, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	committed, err := fill(t, s)
	if !errors.Is(err, store.ErrDiskFull) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Put on a full file system = %v, want ErrDiskFull naming the file", err)
	}
	t.Logf("%d jobs fit in 1 MiB; then: %v", len(committed), err)
	if _, err := s.Get(context.Background(), committed[len(committed)-1]); err != nil {
		t.Fatalf("Get on a full disk: %v", err)
	}
	s.Close()
	// Still full: the reopen must read everything committed.
	checkAfterFull(t, path, committed, store.Options{})
}

// Many goroutines put, get and list at once; every job ends with the last
// version its owner put, and every list is consistent.
func TestConcurrentNoLostUpdate(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	const writers, jobsEach, rounds = 16, 5, 12
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	stop := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for k := range jobsEach {
				j := job(fmt.Sprintf("w%02d-%d", w, k), fmt.Sprintf("writer%d", w), bridge.Queued)
				for r := range rounds {
					j.Attempts = r
					j.Events = append(j.Events, bridge.Event{Time: t0.Add(time.Duration(r) * time.Second), Kind: "round", Msg: strconv.Itoa(r)})
					if r == rounds-1 {
						j.State = bridge.Completed
					}
					if err := s.Put(ctx, j); err != nil {
						errc <- err
						return
					}
					got, err := s.Get(ctx, j.ID)
					if err != nil {
						errc <- err
						return
					}
					if got.Attempts != r || len(got.Events) != len(j.Events) {
						errc <- fmt.Errorf("%s: read back attempts %d with %d events, want %d with %d", j.ID, got.Attempts, len(got.Events), r, len(j.Events))
						return
					}
				}
			}
		})
	}
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				js, err := s.List(ctx, bridge.Filter{States: []bridge.JobState{bridge.Completed}, Events: true})
				if err != nil {
					errc <- err
					return
				}
				for _, j := range js {
					if len(j.Events) != rounds+1 || j.Attempts != rounds-1 {
						errc <- fmt.Errorf("completed job %s listed with %d events, attempts %d", j.ID, len(j.Events), j.Attempts)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	js := mustList(t, s, bridge.Filter{Events: true})
	if len(js) != writers*jobsEach {
		t.Fatalf("%d jobs, want %d", len(js), writers*jobsEach)
	}
	for _, j := range js {
		if j.State != bridge.Completed || j.Attempts != rounds-1 || len(j.Events) != rounds+1 {
			t.Fatalf("lost update: %s is %s, attempts %d, %d events", j.ID, j.State, j.Attempts, len(j.Events))
		}
		for i, e := range j.Events[1:] {
			if e.Msg != strconv.Itoa(i) {
				t.Fatalf("%s: event %d is %q, want %q", j.ID, i+1, e.Msg, strconv.Itoa(i))
			}
		}
	}
}

func TestPutHonoursCancelledContext(t *testing.T) {
	s := openTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Put(ctx, job("a", "n", bridge.Queued)); !errors.Is(err, context.Canceled) {
		// The writer may have taken it first; then it must be stored.
		if err != nil {
			t.Fatalf("Put with a cancelled context = %v", err)
		}
	}
	if err := s.Put(context.Background(), &bridge.Job{}); !errors.Is(err, bridge.ErrBadRequest) {
		t.Fatalf("Put of a job without id = %v, want ErrBadRequest", err)
	}
}

func runMount(args ...string) ([]byte, error) { return exec.Command("mount", args...).CombinedOutput() }
func runUmount(dir string) ([]byte, error)    { return exec.Command("umount", dir).CombinedOutput() }

func TestHealth(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "h.db")
	s, err := store.Open(ctx, path, store.Options{HealthEvery: time.Nanosecond}) // no answer reused
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Health(ctx); err != nil {
		t.Fatalf("Health of a fresh store: %v", err)
	}
	setVersion(t, path, store.SchemaVersion+1) // a newer gridsub migrated it meanwhile
	if err := s.Health(ctx); err == nil || !strings.Contains(err.Error(), "schema version changed") {
		t.Fatalf("Health after the schema changed underneath = %v", err)
	}
	setVersion(t, path, store.SchemaVersion)
	s.Close()
	if err := s.Health(ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Health after Close = %v, want ErrClosed", err)
	}
}

func TestNewFilesArePrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "sub", "gridsub.db")
	s, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustPut(t, s, job("a", "n", bridge.Queued))
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, fi.Mode().Perm())
		}
	}
	fi, _ := os.Stat(filepath.Dir(path))
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("state directory has mode %v, want 0700", fi.Mode().Perm())
	}
}

func TestPrune(t *testing.T) {
	ctx := context.Background()
	now := t0
	s, err := store.Open(ctx, filepath.Join(t.TempDir(), "p.db"), store.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustPut(t, s, job("old-done", "n", bridge.Completed, "A"))
	mustPut(t, s, job("old-running", "n", bridge.Running, "A"))
	mustPut(t, s, job("old-failed", "n", bridge.Failed))
	now = t0.Add(48 * time.Hour)
	mustPut(t, s, job("new-done", "n", bridge.Completed, "A"))
	n, err := s.Prune(ctx, t0.Add(24*time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want 2 (the old ended jobs)", n, err)
	}
	if got := ids(mustList(t, s, bridge.Filter{Events: true})); !reflect.DeepEqual(got, []string{"old-running", "new-done"}) {
		t.Fatalf("after Prune: %v", got)
	}
	if got := ids(mustList(t, s, bridge.Filter{Site: "A"})); !reflect.DeepEqual(got, []string{"old-running", "new-done"}) {
		t.Fatalf("site index after Prune: %v", got)
	}
	if _, err := s.Get(ctx, "old-done"); !errors.Is(err, bridge.ErrNotFound) {
		t.Fatalf("Get of a pruned job = %v", err)
	}
	// Events and site rows went with their jobs (foreign keys cascade).
	raw, err := sql.Open("sqlite", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var evs, sites int
	if err := raw.QueryRow(`SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM job_sites)`).Scan(&evs, &sites); err != nil {
		t.Fatal(err)
	}
	if evs != 2 || sites != 2 {
		t.Fatalf("after Prune %d event rows and %d site rows, want 2 and 2 (the survivors')", evs, sites)
	}
	// A new job reusing the id starts clean.
	mustPut(t, s, job("old-done", "again", bridge.Queued))
	j, err := s.Get(ctx, "old-done")
	if err != nil || len(j.Events) != 1 || len(j.Comps) != 0 {
		t.Fatalf("re-used id: %+v, %v", j, err)
	}
	if got := ids(mustList(t, s, bridge.Filter{Site: "A"})); !reflect.DeepEqual(got, []string{"old-running", "new-done"}) {
		t.Fatalf("a pruned job's site row survived: %v", got)
	}
}

const openEnv = "GRIDSUB_STORE_OPEN_HELPER"

// openAsNobody runs store.Open on a chmod-000 database in a child process
// running as uid/gid 65534: root reads anything, so that is how a
// permission error is made real when the tests run as root.
func openAsNobody(t *testing.T) {
	dir, err := os.MkdirTemp("", "gridsub-perm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := populated(t, 3)
	db := filepath.Join(dir, "gridsub.db")
	b, _ := os.ReadFile(src)
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(db, 0); err != nil {
		t.Fatal(err)
	}
	// The test binary may sit in a directory nobody cannot enter: copy it.
	exe, _ := os.Executable()
	bin, _ := os.ReadFile(exe)
	child := filepath.Join(dir, "store.test")
	if err := os.WriteFile(child, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	before := sum(t, db)
	cmd := exec.Command(child, "-test.run=^$")
	cmd.Env = append(os.Environ(), openEnv+"="+db)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child as uid 65534: %v: %s", err, out)
	}
	got := string(out)
	for _, want := range []string{"unavailable=true", "permission=true", db} {
		if !strings.Contains(got, want) {
			t.Fatalf("Open of a chmod-000 file as uid 65534 said %q; want it to contain %q", got, want)
		}
	}
	t.Logf("as uid 65534: %s", strings.TrimSpace(got))
	if sum(t, db) != before {
		t.Fatal("the unreadable file was changed")
	}
}

// openHelper runs in the child of openAsNobody.
func openHelper(path string) {
	s, err := store.Open(context.Background(), path, store.Options{})
	if err == nil {
		s.Close()
		fmt.Println("opened: no error")
		return
	}
	fmt.Printf("unavailable=%v permission=%v err=%v\n", errors.Is(err, store.ErrUnavailable), errors.Is(err, os.ErrPermission), err)
}
