package pbs_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/backendtest"
	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/transport"
)

// These tests talk to the real OpenPBS server of the testbed
// (../shared/testbed/openpbs, scripts/pbs-testbed.sh) through its real
// sshd. Without its environment they are skipped.

type site struct {
	home, bin string
	ssh       transport.Config
}

func testSite(t testing.TB) site {
	t.Helper()
	key := os.Getenv("GRIDSUB_PBS_SSH_KEY")
	port, _ := strconv.Atoi(os.Getenv("GRIDSUB_PBS_SSH_PORT"))
	if key == "" || port == 0 {
		t.Skip("no OpenPBS testbed: run `bash scripts/pbs-testbed.sh start && source /var/tmp/gridsub-pbs/testbed.env` (as root, needs ../shared/testbed/openpbs) to run the real-server tests")
	}
	return site{home: os.Getenv("GRIDSUB_PBS_HOME_DIR"), bin: os.Getenv("GRIDSUB_PBS_BIN"),
		ssh: transport.Config{Host: os.Getenv("GRIDSUB_PBS_SSH_HOST"), Port: port, User: os.Getenv("GRIDSUB_PBS_SSH_USER"),
			KeyFiles: []string{key}, KnownHosts: []string{os.Getenv("GRIDSUB_PBS_SSH_KNOWN_HOSTS")}, MaxSessions: 8}}
}

func dial(t testing.TB, s site) *transport.Client {
	t.Helper()
	c, err := transport.Dial(context.Background(), s.ssh)
	if err != nil {
		t.Fatalf("dial the PBS login node: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// counter counts the remote commands by PBS program.
type counter struct {
	backends.Runner
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) Run(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	name := argv[0]
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if len(argv) > 3 && strings.HasPrefix(argv[3], "gridsub-") {
		name = argv[3]
	}
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
	c.mu.Unlock()
	return c.Runner.Run(ctx, argv, stdin)
}

func (c *counter) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

var seq atomic.Int64

func gridID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000_000, seq.Add(1))
}

func newBackend(s site, c *transport.Client, run backends.Runner) *pbs.Backend {
	return pbs.New(pbs.Config{Name: "pbs", RemoteDir: s.home + "/gridsub-test", User: s.ssh.User, BinDir: s.bin,
		Location: time.UTC}, run, func(root string) backends.Stager { return c.Stager(root) })
}

// TestConformancePBS runs the shared conformance suite against the real
// OpenPBS server (whichever variant the testbed runs: GRIDSUB_PBS_VARIANT).
func TestConformancePBS(t *testing.T) {
	s := testSite(t)
	c := dial(t, s)
	b := newBackend(s, c, c)
	backendtest.Run(t, backendtest.Harness{
		Backend:      b,
		GridID:       func() string { return gridID("ct") },
		Wait:         func(ctx context.Context, d time.Duration) { time.Sleep(d) },
		Poll:         500 * time.Millisecond,
		JobTimeout:   3 * time.Minute,
		Parallel:     true,
		Walltime:     true,
		TimeoutWall:  15 * time.Second,
		Staging:      true,
		Reservations: true,
		// qsub refuses most punctuation in -N: the name is cleaned, so
		// the hostile name does not come back verbatim.
		NamesReported: false,
		UnknownID:     "999999.localhost",
		RemoteExists: func(ctx context.Context, p string) (bool, error) {
			r, err := c.Run(ctx, []string{"test", "-e", p}, nil)
			return err == nil && r.ExitCode == 0, err
		},
	})
}
