package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
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

// unixHTTP is an HTTP client of the daemon's socket.
func unixHTTP(sock string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
}

// health gets /v1/health on the socket: its status code and answer.
func health(t *testing.T, sock string) (int, api.HealthResponse) {
	t.Helper()
	resp, err := unixHTTP(sock).Get("http://gridsub/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h api.HealthResponse
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, h
}

// populate makes the state directory's database with n ended jobs (the
// daemon leaves them alone) and returns its path.
func populate(t *testing.T, state string, n int) string {
	t.Helper()
	p := filepath.Join(state, daemon.DBName)
	s, err := store.Open(context.Background(), p, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		j := &bridge.Job{ID: fmt.Sprintf("old-%06d", i), State: bridge.Completed, Submit: t0, Reason: strings.Repeat("x", 300),
			Req: bridge.Request{Name: "old", Nodes: 1, Command: []string{"true"}, Estimate: time.Minute}}
		if err := s.Put(context.Background(), j); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHealthTellsTheTruth: /v1/health of a real daemon answers 503 with
// the reason when its database is damaged, read-only or its disk full.
func TestHealthTellsTheTruth(t *testing.T) {
	t.Run("corrupt", func(t *testing.T) {
		state, sock := dirs(t)
		db := populate(t, state, 400)
		d := start(t, state, sock, 60)
		if code, h := health(t, sock); code != http.StatusOK || h.Status != "ok" {
			t.Fatalf("health of a sound daemon: %d %+v", code, h)
		}
		// One page of ended jobs overwritten behind the daemon's back.
		fi, _ := os.Stat(db)
		f, err := os.OpenFile(db, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(9, 9))
		page := make([]byte, 4096)
		for i := range page {
			page[i] = byte(rng.UintN(256))
		}
		f.WriteAt(page, (fi.Size()/4096/2)*4096)
		f.Close()
		if err := d.Store().(*store.SQLite).QuickCheck(context.Background()); !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("QuickCheck after the damage = %v", err)
		}
		code, h := health(t, sock)
		if code != http.StatusServiceUnavailable || h.Reason != api.ReasonCorrupt || !strings.Contains(h.Error, db) {
			t.Fatalf("health of a damaged database: %d %+v", code, h)
		}
	})
	t.Run("moved away", func(t *testing.T) {
		state, sock := dirs(t)
		start(t, state, sock, 60)
		db := filepath.Join(state, daemon.DBName)
		if err := os.Rename(db, db+".elsewhere"); err != nil {
			t.Fatal(err)
		}
		code, h := health(t, sock)
		if code != http.StatusServiceUnavailable || h.Reason != api.ReasonReadOnly || !strings.Contains(h.Error, "moved or deleted") {
			t.Fatalf("health with the database moved away: %d %+v", code, h)
		}
	})
	t.Run("disk full", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to mount a small tmpfs; bridge/store's TestHealthDiskFullPageLimit covers the size limit")
		}
		state, sock := dirs(t)
		if err := os.MkdirAll(state, 0o700); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", state).CombinedOutput(); err != nil {
			t.Skipf("cannot mount a tmpfs: %v %s", err, out)
		}
		d := start(t, state, sock, 60)
		t.Cleanup(func() {
			stop(t, d) // before the unmount (Cleanup runs last-in first-out)
			if out, err := exec.Command("umount", state).CombinedOutput(); err != nil {
				t.Errorf("umount %s: %v %s", state, err, out)
			}
		})
		if code, h := health(t, sock); code != http.StatusOK {
			t.Fatalf("health before filling the disk: %d %+v", code, h)
		}
		f, err := os.Create(filepath.Join(state, "filler"))
		if err != nil {
			t.Fatal(err)
		}
		buf := bytes.Repeat([]byte{1}, 64<<10)
		for {
			if _, err := f.Write(buf); err != nil {
				break
			}
		}
		f.Close()
		time.Sleep(5100 * time.Millisecond) // the store reuses a health answer for 5s
		code, h := health(t, sock)
		if code != http.StatusServiceUnavailable || h.Reason != api.ReasonDiskFull || !strings.Contains(h.Error, "bytes free") {
			t.Fatalf("health on a full disk: %d %+v", code, h)
		}
	})
}

// TestBackupEndpoint: the socket's backup route writes a checked copy; it
// refuses relative and existing paths and is not served over TCP.
func TestBackupEndpoint(t *testing.T) {
	state, sock := dirs(t)
	populate(t, state, 25)
	d := startOpts(t, daemon.Options{StateDir: state, Socket: sock, TimeScale: 60, Listen: "127.0.0.1:0",
		Token: "0123456789abcdef0123456789abcdef"})
	post := func(c *http.Client, url, path string) (int, map[string]any) {
		t.Helper()
		body, _ := json.Marshal(daemon.BackupRequest{Path: path})
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/store/backup", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer 0123456789abcdef0123456789abcdef")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	dst := filepath.Join(filepath.Dir(state), "backup.db")
	code, out := post(unixHTTP(sock), "http://gridsub", dst)
	if code != http.StatusOK || out["jobs"] != float64(25) || out["check"] != "integrity_check" {
		t.Fatalf("backup: %d %v", code, out)
	}
	if rep, err := store.Check(context.Background(), dst, store.CheckOptions{Full: true}); err != nil || rep.Jobs != 25 {
		t.Fatalf("the backup file: %+v %v", rep, err)
	}
	for _, p := range []string{dst, "relative.db", filepath.Join(state, daemon.DBName), filepath.Join(state, "nodir", "x.db")} {
		if code, out := post(unixHTTP(sock), "http://gridsub", p); code != http.StatusBadRequest || out["error"] == "" {
			t.Errorf("backup to %q: %d %v, want 400 with an error", p, code, out)
		}
	}
	// Over TCP (even with the token): no such route.
	other := filepath.Join(filepath.Dir(state), "tcp.db")
	if code, _ := post(http.DefaultClient, "http://"+d.TCPAddr(), other); code != http.StatusNotFound {
		t.Fatalf("backup over TCP: %d, want 404", code)
	}
	if _, err := os.Stat(other); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a backup over TCP wrote %s", other)
	}
}

// TestLockStateDir: the lock is exclusive (even within one process: it is
// per open file), names its holder, and is free again after Release.
func TestLockStateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if held, _, err := daemon.LockHolder(dir); held || err != nil {
		t.Fatalf("LockHolder of a missing directory = %v, %v", held, err)
	}
	l, err := daemon.LockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, daemon.LockName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v %v", fi, err)
	}
	me := strconv.Itoa(os.Getpid())
	if _, err := daemon.LockStateDir(dir); !errors.Is(err, daemon.ErrLocked) || !strings.Contains(err.Error(), "pid "+me) {
		t.Fatalf("second LockStateDir = %v, want ErrLocked naming pid %s", err, me)
	}
	if held, pid, err := daemon.LockHolder(dir); !held || pid != os.Getpid() || err != nil {
		t.Fatalf("LockHolder = %v %d %v", held, pid, err)
	}
	if _, err := daemon.Start(context.Background(), daemon.Options{Spec: testbed(), StateDir: dir, Socket: filepath.Join(dir, "s.sock")}); !errors.Is(err, daemon.ErrLocked) {
		t.Fatalf("Start on a locked state directory = %v, want ErrLocked", err)
	}
	if _, err := os.Stat(filepath.Join(dir, daemon.DBName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused daemon touched the database: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if held, _, _ := daemon.LockHolder(dir); held {
		t.Fatal("still held after Release")
	}
	l2, err := daemon.LockStateDir(dir)
	if err != nil {
		t.Fatalf("LockStateDir after Release: %v", err)
	}
	l2.Release()
}
