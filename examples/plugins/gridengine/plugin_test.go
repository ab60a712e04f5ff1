package gridengine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/backendtest"
	"github.com/gridsub/gridsub/bridge/plugins"
)

var (
	buildOnce sync.Once
	pluginBin string
	buildErr  error
)

// buildPlugin builds cmd/gridsub-gridengine once per test binary and
// returns its path and SHA-256.
func buildPlugin(t *testing.T) (string, string) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gridsub-gridengine-")
		if err != nil {
			buildErr = err
			return
		}
		pluginBin = filepath.Join(dir, "gridsub-gridengine")
		if out, err := exec.Command("go", "build", "-o", pluginBin, "./cmd/gridsub-gridengine").CombinedOutput(); err != nil {
			buildErr = errors.New(err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	b, err := os.ReadFile(pluginBin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return pluginBin, hex.EncodeToString(sum[:])
}

// pluginConfig is the site as gridsub's configuration describes it to
// the plugin.
func (s site) pluginConfig(name string) plugins.BackendConfig {
	return plugins.BackendConfig{Name: name, Kind: "gridengine", Partition: s.queue, CoresPerNode: 1,
		RemoteDir: s.home + "/gridsub-plugin", Options: []byte(`{"pe":"` + s.pe + `","time_zone":"UTC"}`),
		SSH: &plugins.SSHConfig{Host: s.ssh.Host, Port: s.ssh.Port, User: s.ssh.User, KeyFiles: s.ssh.KeyFiles,
			KnownHosts: s.ssh.KnownHosts, MaxSessions: 8}}
}

// TestConformanceAsPluginProcess: the backend conformance suite against
// the plugin executable built from cmd/gridsub-gridengine, loaded by path
// and checksum out of process (AutoMTLS gRPC), on the real Grid Engine.
// A wrong checksum and a misspelt option are refused with errors that say
// so.
func TestConformanceAsPluginProcess(t *testing.T) {
	s := testSite(t)
	bin, sum := buildPlugin(t)
	inst, err := plugins.LoadBackend(context.Background(), plugins.BackendSpec{Path: bin, SHA256: sum, Config: s.pluginConfig("ge")})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Kill()
	if caps := backends.CapabilitiesOf(inst.Backend); !caps.Find || !caps.Fetch || !caps.Reserve || !caps.Batch {
		t.Fatalf("capabilities through the plugin: %+v, want find, fetch, reserve and batch", caps)
	}
	backendtest.Run(t, backendtest.Harness{
		Backend:    inst.Backend,
		GridID:     func() string { return gridID("plg") },
		Wait:       func(_ context.Context, d time.Duration) { time.Sleep(d) },
		JobTimeout: 3 * time.Minute, Parallel: true, Walltime: true, TimeoutWall: 5 * time.Second,
		Staging: true, Reservations: true, UnknownID: "999999999",
		RemoteExists: func(_ context.Context, p string) (bool, error) { _, err := os.Lstat(p); return err == nil, nil },
	})

	if _, err := plugins.LoadBackend(context.Background(), plugins.BackendSpec{Path: bin, SHA256: strings.Repeat("0", 64), Config: s.pluginConfig("ge2")}); !errors.Is(err, plugins.ErrChecksum) {
		t.Errorf("wrong checksum: %v, want ErrChecksum", err)
	}
	bad := s.pluginConfig("ge3")
	bad.Options = []byte(`{"pe":"gridsub","timezone":"UTC"}`)
	if inst, err := plugins.LoadBackend(context.Background(), plugins.BackendSpec{Path: bin, SHA256: sum, Config: bad}); err == nil {
		inst.Kill()
		t.Error("a misspelt option was accepted")
	} else if !strings.Contains(err.Error(), "timezone") {
		t.Errorf("misspelt option: %v, want an error naming it", err)
	}
}
