package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/daemon"
	"github.com/gridsub/gridsub/bridge/store"
)

// damage overwrites the middle page of the database file db with random
// bytes behind the daemon's back.
func damage(t *testing.T, db string) {
	t.Helper()
	fi, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(9, 9))
	page := make([]byte, 4096)
	for i := range page {
		page[i] = byte(rng.UintN(256))
	}
	if _, err := f.WriteAt(page, (fi.Size()/4096/2)*4096); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedStoreRefusesSubmissions: once the daemon's store has found
// damage at run time (health answers 503), a submission is refused with
// 503 and the reason, not accepted into a file the next start refuses.
func TestDamagedStoreRefusesSubmissions(t *testing.T) {
	state, sock := dirs(t)
	db := populate(t, state, 400)
	d := start(t, state, sock, 60)
	c := api.NewUnixClient(sock)
	if _, err := c.Submit(context.Background(), request("before", 1, time.Second, time.Minute)); err != nil {
		t.Fatalf("a submission into a sound store: %v", err)
	}
	damage(t, db)
	if err := d.Store().(*store.SQLite).QuickCheck(context.Background()); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("QuickCheck after the damage = %v", err)
	}
	if code, _ := health(t, sock); code != http.StatusServiceUnavailable {
		t.Fatalf("health of a damaged store: %d, want 503", code)
	}
	body, _ := json.Marshal(request("after", 1, time.Second, time.Minute))
	resp, err := unixHTTP(sock).Post("http://gridsub/v1/jobs", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb api.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || eb.Code != api.CodeUnavailable ||
		!strings.Contains(eb.Error, "damaged") || !strings.Contains(eb.Error, db) || !strings.Contains(eb.Error, "restore") {
		t.Fatalf("POST /v1/jobs into a damaged store: %d %+v, want 503 naming the file, the damage and the remedy", resp.StatusCode, eb)
	}
	for _, j := range d.Broker().Jobs() {
		if j.Req.Name == "after" {
			t.Fatalf("job %s accepted into a damaged store", j.ID)
		}
	}
	// The Go client reports it as the store's condition too.
	if _, err := c.Submit(context.Background(), request("after2", 1, time.Second, time.Minute)); err == nil {
		t.Fatal("the client's submission into a damaged store succeeded")
	}
}

// TestDeletedLockFileExcludesASecondDaemon: deleting <state_dir>/gridsub.lock
// while a daemon runs (a tmp cleaner, a user clearing a "stale" lock) does
// not let a second daemon start on the same state directory — both would
// dispatch the same queued jobs. The pid file is written again.
func TestDeletedLockFileExcludesASecondDaemon(t *testing.T) {
	state, sock := dirs(t)
	start(t, state, sock, 60)
	pidFile := filepath.Join(state, daemon.LockName)
	if err := os.Remove(pidFile); err != nil {
		t.Fatal(err)
	}
	if held, _, err := daemon.LockHolder(state); !held || err != nil {
		t.Fatalf("LockHolder after the pid file was deleted = %v, %v; want held", held, err)
	}
	d2, err := daemon.Start(context.Background(), daemon.Options{Spec: testbed(), StateDir: state, Socket: sock + "2"})
	if err == nil {
		stop(t, d2)
		t.Fatal("a second daemon started on the state directory of a running one whose lock file was deleted")
	}
	if !errors.Is(err, daemon.ErrLocked) {
		t.Fatalf("second Start = %v, want ErrLocked", err)
	}
	// The running daemon writes its pid file again.
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(pidFile)
		if strings.TrimSpace(string(b)) == strconv.Itoa(os.Getpid()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid file not written again: %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLostLockStopsDispatching: a daemon whose state directory is moved
// away and made again (where a second daemon could now lock and run the
// same jobs) stops dispatching, and its health says why.
func TestLostLockStopsDispatching(t *testing.T) {
	state, sock := dirs(t)
	d := start(t, state, sock, 60)
	c := api.NewUnixClient(sock)
	if err := os.Rename(state, state+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, h := health(t, sock)
		if code == http.StatusServiceUnavailable && strings.Contains(h.Error, "lock is lost") && strings.Contains(h.Error, "dispatches nothing more") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health 20s after the state directory was replaced: %d %+v", code, h)
		}
		time.Sleep(20 * time.Millisecond)
	}
	j, err := c.Submit(context.Background(), request("late", 1, time.Second, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// Cycles are due every 50ms: none may dispatch it.
	for range 25 {
		time.Sleep(40 * time.Millisecond)
		if got, _ := d.Broker().Job(j.ID); got == nil || got.State != bridge.Queued {
			t.Fatalf("job %s dispatched by a daemon that lost its lock: %+v", j.ID, got)
		}
	}
}

// postKeyed submits req over the socket with an Idempotency-Key header and
// returns the status and the job id.
func postKeyed(t *testing.T, sock, key string, req bridge.Request) (int, string) {
	t.Helper()
	body, _ := json.Marshal(req)
	hr, _ := http.NewRequest(http.MethodPost, "http://gridsub/v1/jobs", bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set(api.IdempotencyHeader, key)
	resp, err := unixHTTP(sock).Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sr api.SubmitResponse
	json.NewDecoder(resp.Body).Decode(&sr)
	return resp.StatusCode, sr.ID
}

// named counts the stored jobs named name.
func named(t *testing.T, d *daemon.Daemon, name string) int {
	t.Helper()
	js, err := d.Store().List(context.Background(), bridge.Filter{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return len(js)
}

// TestIdempotencyKeySurvivesRestart: a submission repeated with the same
// Idempotency-Key gets the first job, not a second one — also after the
// daemon restarts (the key is stored with its job); another key makes
// another job; a malformed key is refused.
func TestIdempotencyKeySurvivesRestart(t *testing.T) {
	state, sock := dirs(t)
	d := start(t, state, sock, 60)
	r := request("keyed", 1, time.Hour, 2*time.Hour)
	code, id := postKeyed(t, sock, "key-0001", r)
	if code != http.StatusCreated || id == "" {
		t.Fatalf("first submission: %d %q", code, id)
	}
	for range 3 {
		if code, again := postKeyed(t, sock, "key-0001", r); code != http.StatusCreated || again != id {
			t.Fatalf("the same key again: %d %q, want the first job %s", code, again, id)
		}
	}
	if n := named(t, d, "keyed"); n != 1 {
		t.Fatalf("%d jobs stored for one key", n)
	}
	stop(t, d)
	d = start(t, state, sock, 60)
	if code, again := postKeyed(t, sock, "key-0001", r); code != http.StatusCreated || again != id {
		t.Fatalf("the same key after a restart: %d %q, want the first job %s", code, again, id)
	}
	if code, other := postKeyed(t, sock, "key-0002", r); code != http.StatusCreated || other == id {
		t.Fatalf("another key: %d %q, want a new job", code, other)
	}
	if n := named(t, d, "keyed"); n != 2 {
		t.Fatalf("%d jobs stored for two keys", n)
	}
	if code, _ := postKeyed(t, sock, strings.Repeat("k", bridge.MaxIdempotencyKey+1), r); code != http.StatusBadRequest {
		t.Fatalf("an oversized key: %d, want 400", code)
	}
}

// cutFirst serves a unix socket that forwards to the daemon's, but cuts
// the first connection once the daemon has begun to answer, without
// passing the answer on: the submission is stored, the client sees a
// broken connection (what a daemon killed mid-answer looks like).
func cutFirst(t *testing.T, daemonSock string) string {
	t.Helper()
	p := filepath.Join(filepath.Dir(daemonSock), "cut.sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for n := 0; ; n++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			dc, err := net.Dial("unix", daemonSock)
			if err != nil {
				c.Close()
				continue
			}
			go io.Copy(dc, c)
			if n == 0 {
				go func() {
					dc.Read(make([]byte, 1)) // the daemon has answered
					c.Close()
					dc.Close()
				}()
				continue
			}
			go func() { io.Copy(c, dc); c.Close() }()
		}
	}()
	return p
}

// TestClientRetriesWithTheSameKey: the Go client (the CLI's) retries a
// submission whose answer was lost, with the same key: one job, and the
// caller gets it.
func TestClientRetriesWithTheSameKey(t *testing.T) {
	state, sock := dirs(t)
	d := start(t, state, sock, 60)
	c := api.NewUnixClient(cutFirst(t, sock))
	j, err := c.Submit(context.Background(), request("retried", 1, time.Hour, 2*time.Hour))
	if err != nil {
		t.Fatalf("a submission whose first answer was lost: %v", err)
	}
	if n := named(t, d, "retried"); n != 1 {
		t.Fatalf("%d jobs stored for one submission retried", n)
	}
	if j.Req.Name != "retried" || j.Req.IdempotencyKey == "" {
		t.Fatalf("job %+v", j)
	}
}

// TestLockExcludesAnOlderDaemon: a gridsub from before the directory lock
// holds an flock on <state_dir>/gridsub.lock only; a new daemon respects
// that lock too, so an upgrade never runs two daemons on one directory.
func TestLockExcludesAnOlderDaemon(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, daemon.LockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	f.WriteString("4242\n")
	if _, err := daemon.LockStateDir(dir); !errors.Is(err, daemon.ErrLocked) || !strings.Contains(err.Error(), "4242") {
		t.Fatalf("LockStateDir beside an older daemon's lock = %v, want ErrLocked naming pid 4242", err)
	}
	if held, _, _ := daemon.LockHolder(dir); held {
		t.Fatal("the refused lock left the directory locked")
	}
}

// TestIdempotencyKeyConcurrentRetries: retries of one submission that
// arrive together (a client that timed out while its first request was
// still being stored) make one job, and every one of them gets it.
func TestIdempotencyKeyConcurrentRetries(t *testing.T) {
	state, sock := dirs(t)
	d := start(t, state, sock, 60)
	r := request("together", 1, time.Hour, 2*time.Hour)
	ids := make(chan string, 8)
	for range 8 {
		go func() {
			code, id := postKeyed(t, sock, "same-key", r)
			if code != http.StatusCreated {
				id = "status " + strconv.Itoa(code)
			}
			ids <- id
		}()
	}
	first := <-ids
	for range 7 {
		if id := <-ids; id != first {
			t.Fatalf("concurrent retries got %q and %q", first, id)
		}
	}
	if n := named(t, d, "together"); n != 1 {
		t.Fatalf("%d jobs stored for 8 concurrent retries of one key", n)
	}
}
