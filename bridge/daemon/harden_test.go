package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	if err := d.Store().QuickCheck(context.Background()); !errors.Is(err, store.ErrCorrupt) {
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
