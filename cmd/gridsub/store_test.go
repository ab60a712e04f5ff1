package main

import (
	"crypto/sha256"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func fileSum(t *testing.T, p string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func names(t *testing.T, dir string) []string {
	t.Helper()
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

type storeOut struct {
	OK       bool     `json:"ok"`
	Path     string   `json:"path"`
	Jobs     int      `json:"jobs"`
	Schema   int      `json:"schema"`
	Check    string   `json:"check"`
	Problems []string `json:"problems"`
	Kept     string   `json:"kept"`
}

func storeJSON(t *testing.T, want int, args ...string) storeOut {
	t.Helper()
	code, stdout, stderr := cli(append(args, "-o", "json")...)
	var o storeOut
	if err := json.Unmarshal([]byte(stdout), &o); err != nil || code != want {
		t.Fatalf("%v: exit %d (want %d), %v\nstdout %s\nstderr %s", args, code, want, err, stdout, stderr)
	}
	return o
}

func listCount(t *testing.T) int {
	t.Helper()
	code, stdout, stderr := cli("list", "-o", "json")
	var js []listedJob
	if err := json.Unmarshal([]byte(stdout), &js); err != nil || code != 0 {
		t.Fatalf("list: exit %d %v %s", code, err, stderr)
	}
	return len(js)
}

// TestStoreCommandsRoundTrip: gridsub store check, backup and restore as
// an operator runs them, around a real daemon with jobs in it.
func TestStoreCommandsRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := buildBinary(t)
	t.Chdir("../..")
	d := t.TempDir()
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "state", "gridsub.sock")
	db := filepath.Join(state, "gridsub.db")
	t.Setenv(envStateDir, state)
	t.Setenv(envSocket, sock)
	p := startServe(t, bin, state, sock, "--time-scale", "3000")
	submit := func(n int) {
		for range n {
			if code, stdout, stderr := cli("examples/hello.yaml", "--out-dir", filepath.Join(d, "out")); code != 0 {
				t.Fatalf("submit: exit %d %s %s", code, stdout, stderr)
			}
		}
	}
	submit(3)

	// check with the daemon running (read through SQLite's locks).
	o := storeJSON(t, 0, "store", "check")
	if !o.OK || o.Jobs != 3 || o.Check != "integrity_check" || o.Path != db {
		t.Fatalf("store check with the daemon running: %+v", o)
	}
	// backup through the daemon.
	b1 := filepath.Join(d, "b1.db")
	o = storeJSON(t, 0, "store", "backup", b1)
	if !o.OK || o.Jobs != 3 || o.Path != b1 {
		t.Fatalf("store backup through the daemon: %+v", o)
	}
	if code, _, stderr := cli("store", "backup", b1); code != exitUsage || !strings.Contains(stderr, "already exists") {
		t.Fatalf("backup onto an existing file: exit %d %s", code, stderr)
	}
	// restore while the daemon runs: refused, naming it.
	code, _, stderr := cli("store", "restore", b1)
	if code != exitUsage || !strings.Contains(stderr, "daemon stopped") || !strings.Contains(stderr, "pid ") {
		t.Fatalf("restore with the daemon running: exit %d %s", code, stderr)
	}
	submit(2)
	p.term(t, sock)
	if !strings.Contains(p.logs.String(), "store backed up") { // read once it exited
		t.Error("the daemon's log does not show that it made the backup")
	}

	// backup with no daemon: directly from the file, under the lock.
	b2 := filepath.Join(d, "b2.db")
	if o := storeJSON(t, 0, "store", "backup", b2); o.Jobs != 5 {
		t.Fatalf("direct backup: %+v", o)
	}
	// check without the daemon: nothing is created beside the file.
	before := names(t, state)
	code, stdout, _ := cli("store", "check", "--quick")
	if code != 0 || !strings.Contains(stdout, "quick_check ok") || !strings.Contains(stdout, "5 jobs") {
		t.Fatalf("store check --quick: exit %d %s", code, stdout)
	}
	if got := names(t, state); !reflect.DeepEqual(got, before) {
		t.Fatalf("check without a daemon changed the state directory: %v -> %v", before, got)
	}

	// A damaged backup: check says so (exit 1) and restore refuses it,
	// changing nothing.
	bad := filepath.Join(d, "bad.db")
	raw, _ := os.ReadFile(b2)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := len(raw)/2 - 2048; i < len(raw)/2+2048; i++ {
		raw[i] = byte(rng.UintN(256))
	}
	os.WriteFile(bad, raw, 0o600)
	if o := storeJSON(t, exitJobFailed, "store", "check", "--file", bad); o.OK || len(o.Problems) == 0 {
		t.Fatalf("check of a damaged backup: %+v", o)
	}
	sum, listing := fileSum(t, db), names(t, state)
	code, _, stderr = cli("store", "restore", bad)
	if code != exitJobFailed || !strings.Contains(stderr, "nothing was changed") || !strings.Contains(stderr, bad) {
		t.Fatalf("restore of a damaged backup: exit %d %s", code, stderr)
	}
	if fileSum(t, db) != sum || !reflect.DeepEqual(names(t, state), listing) {
		t.Fatal("the refused restore changed the state directory")
	}

	// restore b1 (3 jobs); the replaced database (5 jobs) is kept.
	o = storeJSON(t, 0, "store", "restore", b1)
	if !o.OK || o.Jobs != 3 || !strings.HasPrefix(o.Kept, db+".bak-") {
		t.Fatalf("restore: %+v", o)
	}
	if o := storeJSON(t, 0, "store", "check", "--file", o.Kept); o.Jobs != 5 {
		t.Fatalf("the kept database: %+v", o)
	}
	p = startServe(t, bin, state, sock, "--time-scale", "3000")
	if n := listCount(t); n != 3 {
		t.Fatalf("after restoring the 3-job backup the daemon lists %d jobs", n)
	}
	p.term(t, sock)
}

// TestServeRefusesADamagedDatabase: serve on an empty or damaged database
// exits non-zero naming the file and how to restore, and leaves it (and
// the state directory) as it was.
func TestServeRefusesADamagedDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := buildBinary(t)
	for name, content := range map[string][]byte{
		"0 bytes":      {},
		"random bytes": randomBytes(8192),
	} {
		t.Run(name, func(t *testing.T) {
			state := t.TempDir()
			db := filepath.Join(state, "gridsub.db")
			os.WriteFile(db, content, 0o600)
			sum := fileSum(t, db)
			code, stderr := serveOnce(t, bin, state, filepath.Join(state, "gridsub.sock"))
			if code == 0 || !strings.Contains(stderr, db) || !strings.Contains(stderr, "gridsub store restore") {
				t.Fatalf("serve on a %s database: exit %d\n%s", name, code, stderr)
			}
			if fileSum(t, db) != sum {
				t.Fatal("serve changed the refused database")
			}
			got := names(t, state)
			if !reflect.DeepEqual(got, []string{"gridsub.db", "gridsub.lock"}) {
				t.Fatalf("after the refusal the state directory holds %v", got)
			}
		})
	}
}

func randomBytes(n int) []byte {
	rng := rand.New(rand.NewPCG(5, 6))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	return b
}
