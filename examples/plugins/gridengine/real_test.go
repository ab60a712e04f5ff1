package gridengine_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/backendtest"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/sshbatch/sshbatchtest"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/examples/plugins/gridengine"
)

// These tests talk to the real Grid Engine of the testbed
// (scripts/sge-testbed.sh) through its real sshd. Without its environment
// they are skipped.

type site struct {
	home, queue, pe, project string
	slots                    int
	ssh                      transport.Config
}

func testSite(t testing.TB) site {
	t.Helper()
	key := os.Getenv("GRIDSUB_GE_SSH_KEY")
	port, _ := strconv.Atoi(os.Getenv("GRIDSUB_GE_SSH_PORT"))
	if key == "" || port == 0 {
		t.Skip("no Grid Engine testbed: run `bash scripts/sge-testbed.sh start && source /var/tmp/gridsub-ge/testbed.env` (as root) to run the real-daemon tests")
	}
	slots, _ := strconv.Atoi(os.Getenv("GRIDSUB_GE_SLOTS"))
	return site{home: os.Getenv("GRIDSUB_GE_HOME_DIR"), queue: os.Getenv("GRIDSUB_GE_QUEUE"), pe: os.Getenv("GRIDSUB_GE_PE"),
		project: os.Getenv("GRIDSUB_GE_PROJECT"), slots: slots,
		ssh: transport.Config{Host: os.Getenv("GRIDSUB_GE_SSH_HOST"), Port: port, User: os.Getenv("GRIDSUB_GE_SSH_USER"),
			KeyFiles: []string{key}, KnownHosts: []string{os.Getenv("GRIDSUB_GE_SSH_KNOWN_HOSTS")}, MaxSessions: 8}}
}

func dial(t testing.TB, s site) *transport.Client {
	t.Helper()
	c, err := transport.Dial(context.Background(), s.ssh)
	if err != nil {
		t.Fatalf("dial the Grid Engine login node: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var seq atomic.Int64

func gridID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000_000, seq.Add(1))
}

func (s site) config() gridengine.Config {
	return gridengine.Config{Name: "ge", Queue: s.queue, PE: s.pe, RemoteDir: s.home + "/gridsub-test", User: s.ssh.User,
		Location: time.Local}
}

func newBackend(s site, c *transport.Client, run backends.Runner) *gridengine.Backend {
	return gridengine.New(s.config(), run, func(root string) backends.Stager { return c.Stager(root) })
}

// TestRealSite runs the cases every sshbatch dialect passes on the real
// Grid Engine. GRIDSUB_GE_TRACK_JOBS sets the live jobs of the one-poll
// case (default 100).
func TestRealSite(t *testing.T) {
	s := testSite(t)
	c := dial(t, s)
	n := 100
	if v, err := strconv.Atoi(os.Getenv("GRIDSUB_GE_TRACK_JOBS")); err == nil && v > 0 {
		n = v
	}
	sshbatchtest.Run(t, sshbatchtest.Site{
		Name: "gridengine", Client: c, Root: s.home + "/gridsub-test", GridID: gridID,
		New: func(run backends.Runner) *sshbatch.Backend { return newBackend(s, c, run) },
		// Job names are cleaned (Grid Engine refuses most punctuation).
		Harness: backendtest.Harness{JobTimeout: 3 * time.Minute, TimeoutWall: 5 * time.Second, NamesReported: false,
			UnknownID: "999999999"},
		UnknownResv: "999999", PollJobs: n, PollCommand: "qstat",
		LiveOutput: true,
	})
}
