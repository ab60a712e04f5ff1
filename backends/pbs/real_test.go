package pbs_test

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
	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/pbs/pbslock"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/sshbatch/sshbatchtest"
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
	pbslock.Hold(t)
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

var seq atomic.Int64

func gridID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000_000, seq.Add(1))
}

func newBackend(s site, c *transport.Client, run backends.Runner) *pbs.Backend {
	return pbs.New(pbs.Config{Name: "pbs", RemoteDir: s.home + "/gridsub-test", User: s.ssh.User, BinDir: s.bin,
		Location: time.UTC}, run, func(root string) backends.Stager { return c.Stager(root) })
}

// TestRealSite runs the cases every sshbatch dialect passes on the real
// OpenPBS server (whichever variant the testbed runs: GRIDSUB_PBS_VARIANT).
// GRIDSUB_PBS_TRACK_JOBS sets the live jobs of the one-poll case (default
// 100).
func TestRealSite(t *testing.T) {
	s := testSite(t)
	c := dial(t, s)
	n := 100
	if v, err := strconv.Atoi(os.Getenv("GRIDSUB_PBS_TRACK_JOBS")); err == nil && v > 0 {
		n = v
	}
	sshbatchtest.Run(t, sshbatchtest.Site{
		Name: "pbs", Client: c, Root: s.home + "/gridsub-test", GridID: gridID,
		New: func(run backends.Runner) *sshbatch.Backend { return newBackend(s, c, run) },
		// qsub refuses most punctuation in -N: the name is cleaned, so the
		// hostile name does not come back verbatim.
		Harness: backendtest.Harness{JobTimeout: 3 * time.Minute, TimeoutWall: 15 * time.Second, NamesReported: false,
			UnknownID: "999999.localhost"},
		UnknownResv: "R999999.localhost", PollJobs: n, PollCommand: "qstat",
		// PBS spools a running job's output on the execution host and
		// copies it into the job directory when the job ends.
		LiveOutput: false,
	})
}

// TestStatusManyFinished: more than DirectStatusMax jobs that run and
// finish are followed to completion with one remote command per poll (the
// live listing, then the finished ones by id with -x).
func TestStatusManyFinished(t *testing.T) {
	s := testSite(t)
	c := dial(t, s)
	cnt := &sshbatchtest.Counter{Runner: c, Name: newBackend(s, c, c).Exec().Command}
	b := newBackend(s, c, cnt)
	ctx := context.Background()
	n := pbs.DirectStatusMax + 4
	var ids []backends.JobID
	for i := 0; i < n; i++ {
		code := i % 3 // 0, 1, 2: completed and failed ones
		id, err := b.Submit(ctx, &backends.JobSpec{GridID: gridID("many"), Nodes: 1, CoresPerNode: 1,
			Walltime: time.Minute, Command: []string{"bash", "-c", "exit " + strconv.Itoa(code)}})
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		ids = append(ids, id)
	}
	ids = append(ids, "999999.localhost") // never issued
	deadline := time.Now().Add(3 * time.Minute)
	for {
		cnt.Reset()
		st, err := b.Status(ctx, ids)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if calls := cnt.Reset(); calls["qstat"] != 1 || len(calls) != 1 {
			t.Fatalf("one poll ran %v, want one remote command", calls)
		}
		done := 0
		for i, x := range st[:n] {
			if x.State.Final() {
				done++
				want := backends.StateCompleted
				if i%3 != 0 {
					want = backends.StateFailed
				}
				if x.State != want || x.ExitCode != i%3 {
					t.Fatalf("job %d (%s): %+v, want %s with exit %d", i, x.ID, x, want, i%3)
				}
			}
		}
		if st[n].State != backends.StateLost {
			t.Fatalf("unknown id: %+v, want lost", st[n])
		}
		if done == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs final after 3 minutes: %+v", done, n, st)
		}
		time.Sleep(time.Second)
	}
}
