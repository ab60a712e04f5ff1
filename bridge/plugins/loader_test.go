package plugins_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends/backendtest"
	"github.com/gridsub/gridsub/bridge/plugins"
)

// Executables built once per test binary run into binDir.
var (
	binDir   string
	binMu    sync.Mutex
	binBuilt = map[string]string{}
)

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "gridsub-plugins-test-")
	if err != nil {
		panic(err)
	}
	binDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

func repoRoot(t testing.TB) string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..")
}

// build compiles the package pkg (relative to the repository root) once and
// returns the executable.
func build(t testing.TB, pkg string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds executables")
	}
	binMu.Lock()
	defer binMu.Unlock()
	if p, ok := binBuilt[pkg]; ok {
		return p
	}
	out := filepath.Join(binDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = repoRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	binBuilt[pkg] = out
	return out
}

func gridsub(t testing.TB) string { return build(t, "./cmd/gridsub") }

func sum(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func simSpec(t testing.TB, name string) plugins.BackendSpec {
	return plugins.BackendSpec{Config: plugins.BackendConfig{Name: name, Kind: "sim", Nodes: 8, CoresPerNode: 2, H: 1,
		Sim: &plugins.SimConfig{Epoch: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Seed: 7}},
		Builtin: "sim", Isolate: true, Self: gridsub(t), StartTimeout: 20 * time.Second}
}

// TestIsolatedSimConformance: the conformance suite against the built-in
// sim backend run as a real plugin process (`gridsub plugin serve backend
// sim`, AutoMTLS, checksummed), its virtual clock driven over the wire.
func TestIsolatedSimConformance(t *testing.T) {
	inst, err := plugins.LoadBackend(context.Background(), simSpec(t, "simP"))
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Kill()
	if inst.Pid == 0 || inst.Pid == os.Getpid() || inst.Mode != plugins.ModeIsolated || len(inst.SHA256) != 64 || inst.Version == "" {
		t.Fatalf("instance %+v: want a separate process, isolated, with its checksum and version", inst)
	}
	c := inst.Client
	ctx := context.Background()
	var n atomic.Int64
	backendtest.Run(t, backendtest.Harness{
		Backend: c,
		GridID:  func() string { return fmt.Sprintf("iso-%d", n.Add(1)) },
		Wait: func(ctx context.Context, d time.Duration) {
			now, _ := c.AdvanceTo(ctx, time.Time{})
			if _, err := c.AdvanceTo(ctx, now.Add(d)); err != nil {
				t.Fatalf("clock: %v", err)
			}
		},
		Now: func() time.Time {
			now, err := c.AdvanceTo(ctx, time.Time{})
			if err != nil {
				t.Fatalf("clock: %v", err)
			}
			return now
		},
		Poll: 500 * time.Millisecond, Walltime: true, TimeoutWall: time.Minute, Reservations: true, UnknownID: "424242",
	})
}

// loadErr loads spec and returns the error, failing when it loaded.
func loadErr(t *testing.T, spec plugins.BackendSpec) error {
	t.Helper()
	inst, err := plugins.LoadBackend(context.Background(), spec)
	if err == nil {
		inst.Kill()
		t.Fatalf("%s loaded", spec.Path)
	}
	return err
}

func wantMsg(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not say %q", err, p)
		}
	}
}

// TestChecksumRefused: an external plugin whose checksum differs from the
// configured one (or has none configured) is not started; the error names
// the plugin, both sums and what to do.
func TestChecksumRefused(t *testing.T) {
	bin := gridsub(t)
	marker := filepath.Join(t.TempDir(), "started")
	// A wrapper that would leave a marker if it were ever run.
	script := filepath.Join(t.TempDir(), "plugin.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+marker+"\nexec "+bin+" plugin serve backend sim\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	good := sum(t, script)
	bad := strings.Repeat("ab", 32)
	spec := plugins.BackendSpec{Config: plugins.BackendConfig{Name: "ext1", Nodes: 2}, Path: script, SHA256: bad}
	err := loadErr(t, spec)
	if !errors.Is(err, plugins.ErrChecksum) {
		t.Fatalf("wrong checksum: %v, want ErrChecksum", err)
	}
	wantMsg(t, err, "ext1", good, bad, "sha256sum", "not started")
	spec.SHA256 = ""
	err = loadErr(t, spec)
	if !errors.Is(err, plugins.ErrChecksum) {
		t.Fatalf("no checksum: %v, want ErrChecksum", err)
	}
	wantMsg(t, err, "ext1", good)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the plugin ran although its checksum was refused")
	}
	// With the right checksum the same file runs.
	spec.SHA256 = good
	inst, err := plugins.LoadBackend(context.Background(), spec)
	if err != nil {
		t.Fatalf("right checksum: %v", err)
	}
	inst.Kill()
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the accepted plugin never ran")
	}
}

// TestNotExecutable: a missing path, a directory and a file without the
// execute bit are refused before anything runs, each saying what to do.
func TestNotExecutable(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644)
	for _, c := range []struct{ path, says string }{
		{filepath.Join(dir, "missing"), "does not exist"},
		{dir, "not a file"},
		{plain, "chmod +x"},
	} {
		err := loadErr(t, plugins.BackendSpec{Config: plugins.BackendConfig{Name: "ext2"}, Path: c.path, SHA256: strings.Repeat("0", 64)})
		if !errors.Is(err, plugins.ErrNotExecutable) {
			t.Errorf("%s: %v, want ErrNotExecutable", c.path, err)
			continue
		}
		wantMsg(t, err, "ext2", c.path, c.says)
	}
}

// TestHandshakeHang: a plugin that never completes its handshake is killed
// after StartTimeout and the error says so.
func TestHandshakeHang(t *testing.T) {
	dir := t.TempDir()
	pidf := filepath.Join(dir, "pid")
	script := filepath.Join(dir, "hang.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho $$ > "+pidf+"\nexec sleep 60\n"), 0o755)
	start := time.Now()
	err := loadErr(t, plugins.BackendSpec{Config: plugins.BackendConfig{Name: "ext3"}, Path: script, SHA256: sum(t, script),
		StartTimeout: time.Second})
	if !errors.Is(err, plugins.ErrHandshake) {
		t.Fatalf("hanging plugin: %v, want ErrHandshake", err)
	}
	wantMsg(t, err, "ext3", script, "within 1s", "plugins.ServeBackend")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s to give up on a 1s start timeout", d)
	}
	var pid int
	if b, err := os.ReadFile(pidf); err == nil {
		fmt.Sscan(string(b), &pid)
	}
	if pid == 0 {
		t.Fatal("the hanging plugin never ran")
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the hanging plugin (pid %d) is still running", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestIncompatibleVersion: a plugin built for protocol version 2 is refused
// with both versions named.
func TestIncompatibleVersion(t *testing.T) {
	bin := build(t, "./bridge/plugins/testdata/v2plugin")
	err := loadErr(t, plugins.BackendSpec{Config: plugins.BackendConfig{Name: "ext4"}, Path: bin, SHA256: sum(t, bin)})
	if !errors.Is(err, plugins.ErrIncompatible) {
		t.Fatalf("v2 plugin: %v, want ErrIncompatible", err)
	}
	wantMsg(t, err, "ext4", "version 2", fmt.Sprintf("version %d", plugins.ProtocolVersion), "rebuild")
}

// TestNotAPlugin: an executable that prints something else than the
// handshake is refused as such.
func TestNotAPlugin(t *testing.T) {
	script := filepath.Join(t.TempDir(), "echo.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho hello\nsleep 1\n"), 0o755)
	err := loadErr(t, plugins.BackendSpec{Config: plugins.BackendConfig{Name: "ext5"}, Path: script, SHA256: sum(t, script),
		StartTimeout: 5 * time.Second})
	if !errors.Is(err, plugins.ErrHandshake) {
		t.Fatalf("not a plugin: %v, want ErrHandshake", err)
	}
	wantMsg(t, err, "ext5", "is it a gridsub plugin")
}

// TestUnknownBuiltin: isolating a built-in that does not exist names the
// built-ins.
func TestUnknownBuiltin(t *testing.T) {
	_, err := plugins.LoadBackend(context.Background(), plugins.BackendSpec{Config: plugins.BackendConfig{Name: "x"}, Builtin: "lsf", Isolate: true})
	if !errors.Is(err, plugins.ErrUnknownPlugin) || !strings.Contains(err.Error(), "slurm") {
		t.Fatalf("unknown built-in: %v", err)
	}
}
