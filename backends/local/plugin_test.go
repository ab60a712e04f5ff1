//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package local_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/backendtest"
	"github.com/gridsub/gridsub/backends/local"
	"github.com/gridsub/gridsub/bridge/plugins"
)

var n atomic.Int64

func harness(b backends.Backend) backendtest.Harness {
	return backendtest.Harness{
		Backend: b, GridID: func() string { return fmt.Sprintf("plg-%d-%d", os.Getpid(), n.Add(1)) },
		Wait: func(_ context.Context, d time.Duration) { time.Sleep(d) }, Poll: 100 * time.Millisecond,
		JobTimeout: 30 * time.Second, Parallel: true, Walltime: true, TimeoutWall: 2 * time.Second,
		Staging: true, NamesReported: true,
		RemoteExists: func(_ context.Context, p string) (bool, error) { _, err := os.Lstat(p); return err == nil, nil },
	}
}

// TestConformanceThroughShim: the suite through the gRPC shims in process.
func TestConformanceThroughShim(t *testing.T) {
	c, _ := plugins.TestBackend(t, local.FromConfig, plugins.BackendConfig{Name: "ws", Kind: "local", Nodes: 4, CoresPerNode: 2,
		RemoteDir: t.TempDir(), Options: []byte(`{"kill_grace":"1s"}`)})
	if caps := backends.CapabilitiesOf(c); !caps.Find || !caps.Fetch || caps.Reserve {
		t.Fatalf("capabilities through the shim: %+v, want Find and Fetch only", caps)
	}
	backendtest.Run(t, harness(c))
	if _, err := c.Submit(context.Background(), &backends.JobSpec{GridID: "x", Nodes: 1, Walltime: time.Second, Script: "true", Outputs: []string{"../../etc"}}); !errors.Is(err, backends.ErrInvalidSpec) {
		t.Errorf("hostile output through the shim: %v, want ErrInvalidSpec", err)
	}
	if err := c.Cancel(context.Background(), "99999"); !errors.Is(err, backends.ErrUnknownJob) {
		t.Errorf("unknown id through the shim: %v, want ErrUnknownJob", err)
	}
}

// TestConformanceAsPluginProcess: the suite against the built executable,
// loaded as an external plugin (checksum checked, AutoMTLS).
func TestConformanceAsPluginProcess(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gridsub-localsite")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/plugins/localsite/cmd/gridsub-localsite").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	b, _ := os.ReadFile(bin)
	sum := sha256.Sum256(b)
	inst, err := plugins.LoadBackend(context.Background(), plugins.BackendSpec{Path: bin, SHA256: hex.EncodeToString(sum[:]),
		Config: plugins.BackendConfig{Name: "ws", Kind: "local", Nodes: 4, CoresPerNode: 2, RemoteDir: t.TempDir(), Options: []byte(`{"kill_grace":"1s"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Kill()
	backendtest.Run(t, harness(inst.Backend))
	if _, err := plugins.LoadBackend(context.Background(), plugins.BackendSpec{Path: bin, SHA256: "00",
		Config: plugins.BackendConfig{Name: "ws2", Kind: "local", Nodes: 1, RemoteDir: t.TempDir()}}); !errors.Is(err, plugins.ErrChecksum) {
		t.Errorf("bad checksum: %v, want ErrChecksum", err)
	}
}
