package bridge

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/examples/plugins/gridengine"
	"github.com/gridsub/gridsub/examples/plugins/gridengine/gelock"
)

// nativeGESite is the Grid Engine testbed's qmaster (scripts/sge-testbed.sh)
// with native arrays on: the plugin's backend, in process.
func nativeGESite(t *testing.T, run func(backends.Runner) backends.Runner) *gridengine.Backend {
	t.Helper()
	key := os.Getenv("GRIDSUB_GE_SSH_KEY")
	port, _ := strconv.Atoi(os.Getenv("GRIDSUB_GE_SSH_PORT"))
	if key == "" || port == 0 {
		t.Skip("no Grid Engine testbed: run `bash scripts/sge-testbed.sh start` and source /var/tmp/gridsub-ge/testbed.env")
	}
	c, err := transport.Dial(context.Background(), transport.Config{Host: os.Getenv("GRIDSUB_GE_SSH_HOST"), Port: port,
		User: os.Getenv("GRIDSUB_GE_SSH_USER"), KeyFiles: []string{key}, KnownHosts: []string{os.Getenv("GRIDSUB_GE_SSH_KNOWN_HOSTS")}, MaxSessions: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	root := os.Getenv("GRIDSUB_GE_HOME_DIR") + "/gridsub-test"
	return gridengine.New(gridengine.Config{Name: "ge", Queue: os.Getenv("GRIDSUB_GE_QUEUE"), RemoteDir: root, User: os.Getenv("GRIDSUB_GE_SSH_USER"),
		Location: time.Local, NativeArrays: true}, run(c), func(string) backends.Stager { return c.Stager(root) })
}

// TestNativeArrayGESIGKILLAdoptsReal is TestNativeArraySIGKILLAdoptsReal on
// the real Grid Engine: ONE qsub -t 1-N:1 (50 elements; 200, as on SLURM
// and PBS, with GRIDSUB_LONG=1: about 2 minutes), the daemon dies before it
// records the outcome, the restarted broker finds every task by its
// element's tag (task i+1 is element i) and adopts it — no second qsub —
// and every element completes.
func TestNativeArrayGESIGKILLAdoptsReal(t *testing.T) {
	if testing.Short() {
		t.Skip("real Grid Engine testbed")
	}
	if os.Getenv("GRIDSUB_GE_SSH_KEY") != "" {
		gelock.Hold(t) // one queue, shared with the other packages' Grid Engine tests
	}
	n := 50
	if os.Getenv("GRIDSUB_LONG") != "" {
		n = 200
	}
	cnt := &sbatchCounter{}
	nativeCrashAdopts(t, n, cnt.count, func() nativeSite {
		return nativeGESite(t, func(r backends.Runner) backends.Runner { cnt.run = r; return cnt })
	}, ".")
}
