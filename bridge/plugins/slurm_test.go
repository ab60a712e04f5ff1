package plugins_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends/backendtest"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge/plugins"
)

// slurmSpec is the isolated built-in slurm backend for one site of the
// local SLURM testbed (scripts/slurm-testbed.sh), or a skip without it.
func slurmSpec(t *testing.T, site string) (plugins.BackendSpec, transport.Config) {
	t.Helper()
	key := os.Getenv("GRIDSUB_SSH_KEY")
	up := strings.ToUpper(site)
	port, _ := strconv.Atoi(os.Getenv("GRIDSUB_" + up + "_SSH_PORT"))
	if key == "" || port == 0 {
		t.Skipf("no SLURM testbed: run `bash scripts/slurm-testbed.sh start && source ${GRIDSUB_TESTBED_DIR:-/var/tmp/gridsub-local-testbed}/testbed.env` to run %s through the plugin boundary", site)
	}
	ssh := &plugins.SSHConfig{Host: os.Getenv("GRIDSUB_SSH_HOST"), Port: port, User: os.Getenv("GRIDSUB_SSH_USER"),
		KeyFiles: []string{key}, KnownHosts: []string{os.Getenv("GRIDSUB_SSH_KNOWN_HOSTS")}, MaxSessions: 8}
	spec := plugins.BackendSpec{Config: plugins.BackendConfig{Name: site, Kind: "slurm", RemoteDir: os.Getenv("GRIDSUB_" + up + "_SCRATCH"), SSH: ssh},
		Builtin: "slurm", Isolate: true, Self: gridsub(t), StartTimeout: 20 * time.Second}
	tc := transport.Config{Host: ssh.Host, Port: port, User: ssh.User, KeyFiles: ssh.KeyFiles, KnownHosts: ssh.KnownHosts, MaxSessions: 4}
	return spec, tc
}

// TestConformanceSLURMThroughPlugin runs the backend conformance suite
// against both real SLURM sites of the testbed with the built-in slurm
// backend in its own process (`gridsub plugin serve backend slurm`):
// staging, output fetching (streamed), reservations, find by tag and the
// error identities all cross the boundary.
func TestConformanceSLURMThroughPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs jobs on the real SLURM testbed")
	}
	for _, site := range []string{"siteA", "siteB"} {
		t.Run(site, func(t *testing.T) {
			t.Parallel()
			spec, tc := slurmSpec(t, site)
			logs := &syncBuffer{}
			spec.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			inst, err := plugins.LoadBackend(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			defer inst.Kill()
			// What the plugin process logged reached the host's slog with
			// the site's name. The plugin's stderr is relayed by its own
			// goroutine, so the line may arrive a little after LoadBackend
			// returns.
			want := `"msg":"ssh connected","plugin":"` + site + `"`
			for deadline := time.Now().Add(15 * time.Second); !strings.Contains(logs.String(), want) && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
			if l := logs.String(); !strings.Contains(l, want) {
				t.Errorf("the plugin's log line \"ssh connected\" did not reach the host's log with plugin=%s within 15 s:\n%s", site, l)
			}
			// The suite's own check that nothing hostile ran uses its own
			// connection, not the plugin's.
			conn, err := transport.Dial(context.Background(), tc)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var n atomic.Int64
			stamp := time.Now().UnixNano() % 1_000_000_000
			backendtest.Run(t, backendtest.Harness{
				Backend:       inst.Backend,
				GridID:        func() string { return fmt.Sprintf("pl-%d-%d", stamp, n.Add(1)) },
				Wait:          func(ctx context.Context, d time.Duration) { time.Sleep(d) },
				Poll:          500 * time.Millisecond,
				JobTimeout:    time.Minute,
				Parallel:      true,
				Walltime:      true,
				TimeoutWall:   time.Minute,
				Staging:       true,
				Reservations:  true,
				NamesReported: true,
				UnknownID:     "999999",
				RemoteExists: func(ctx context.Context, p string) (bool, error) {
					r, err := conn.Run(ctx, []string{"test", "-e", p}, nil)
					return err == nil && r.ExitCode == 0, err
				},
			})
		})
	}
}

// syncBuffer is a bytes.Buffer safe for the plugin's log goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
