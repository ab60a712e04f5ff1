package plugins_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends/backendtest"
	"github.com/gridsub/gridsub/backends/pbs/pbslock"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge/plugins"
)

// TestConformancePBSThroughPlugin runs the backend conformance suite
// against the real OpenPBS testbed (scripts/pbs-testbed.sh) with the
// built-in pbs backend in its own process (`gridsub plugin serve backend
// pbs`, as a site with `isolate: true` runs it): the PBS dialect, staging,
// reservations and the error identities cross the boundary as they do for
// SLURM.
func TestConformancePBSThroughPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs jobs on the real OpenPBS testbed")
	}
	key := os.Getenv("GRIDSUB_PBS_SSH_KEY")
	port, _ := strconv.Atoi(os.Getenv("GRIDSUB_PBS_SSH_PORT"))
	if key == "" || port == 0 {
		t.Skip("no OpenPBS testbed: run `bash scripts/pbs-testbed.sh start && source /var/tmp/gridsub-pbs/testbed.env` (as root, needs ../shared/testbed/openpbs) to run pbs through the plugin boundary")
	}
	pbslock.Hold(t)
	// The walltime and reservation cases take minutes on the one-vnode
	// testbed and are the PBS backend's own behaviour, which backends/pbs
	// runs in process; the plugin's Walltime and Reserver RPCs are crossed
	// by the SLURM-through-plugin suite. GRIDSUB_LONG=1 runs them here too.
	long := os.Getenv("GRIDSUB_LONG") != ""
	ssh := &plugins.SSHConfig{Host: os.Getenv("GRIDSUB_PBS_SSH_HOST"), Port: port, User: os.Getenv("GRIDSUB_PBS_SSH_USER"),
		KeyFiles: []string{key}, KnownHosts: []string{os.Getenv("GRIDSUB_PBS_SSH_KNOWN_HOSTS")}, MaxSessions: 8}
	spec := plugins.BackendSpec{Config: plugins.BackendConfig{Name: "pbs", Kind: "pbs",
		RemoteDir: os.Getenv("GRIDSUB_PBS_HOME_DIR") + "/gridsub-plugin-test", BinDir: os.Getenv("GRIDSUB_PBS_BIN"), SSH: ssh},
		Builtin: "pbs", Isolate: true, Self: gridsub(t), StartTimeout: 20 * time.Second}
	inst, err := plugins.LoadBackend(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Kill()
	conn, err := transport.Dial(context.Background(), transport.Config{Host: ssh.Host, Port: port, User: ssh.User,
		KeyFiles: ssh.KeyFiles, KnownHosts: ssh.KnownHosts, MaxSessions: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n atomic.Int64
	stamp := time.Now().UnixNano() % 1_000_000_000
	backendtest.Run(t, backendtest.Harness{
		Backend:      inst.Backend,
		GridID:       func() string { return fmt.Sprintf("pp-%d-%d", stamp, n.Add(1)) },
		Wait:         func(ctx context.Context, d time.Duration) { time.Sleep(d) },
		Poll:         500 * time.Millisecond,
		JobTimeout:   3 * time.Minute,
		Parallel:     true,
		Walltime:     long,
		TimeoutWall:  15 * time.Second,
		Staging:      true,
		Reservations: long,
		// qsub cleans the job name (see backends/pbs real_test.go).
		NamesReported: false,
		UnknownID:     "999999.localhost",
		RemoteExists: func(ctx context.Context, p string) (bool, error) {
			r, err := conn.Run(ctx, []string{"test", "-e", p}, nil)
			return err == nil && r.ExitCode == 0, err
		},
	})
}
