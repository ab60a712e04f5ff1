package slurm_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/backendtest"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/sshbatch/sshbatchtest"
	"github.com/gridsub/gridsub/backends/transport"
)

// These tests talk to the real SLURM daemons of the local testbed through
// its real sshd. Without the testbed they are skipped.

type site struct {
	name, scratch, jobcomp string
	ssh                    transport.Config
}

func testSite(t testing.TB, name string) site {
	t.Helper()
	key := os.Getenv("GRIDSUB_SSH_KEY")
	up := strings.ToUpper(name)
	port, _ := strconv.Atoi(os.Getenv("GRIDSUB_" + up + "_SSH_PORT"))
	if key == "" || port == 0 {
		t.Skipf("no SLURM testbed: run `bash scripts/slurm-testbed.sh start && source ${GRIDSUB_TESTBED_DIR:-/var/tmp/gridsub-local-testbed}/testbed.env` (as root) to run the real-daemon tests of %s", name)
	}
	return site{
		name: name, scratch: os.Getenv("GRIDSUB_" + up + "_SCRATCH"), jobcomp: os.Getenv("GRIDSUB_" + up + "_JOBCOMP"),
		ssh: transport.Config{Host: os.Getenv("GRIDSUB_SSH_HOST"), Port: port, User: os.Getenv("GRIDSUB_SSH_USER"),
			KeyFiles: []string{key}, KnownHosts: []string{os.Getenv("GRIDSUB_SSH_KNOWN_HOSTS")}, MaxSessions: 8},
	}
}

func dial(t testing.TB, s site) *transport.Client {
	t.Helper()
	c, err := transport.Dial(context.Background(), s.ssh)
	if err != nil {
		t.Fatalf("dial %s: %v", s.name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var seq atomic.Int64

func gridID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000_000, seq.Add(1))
}

func newBackend(t testing.TB, s site, c *transport.Client, run backends.Runner) *slurm.Backend {
	return slurm.New(slurm.Config{Name: s.name, RemoteDir: s.scratch, User: s.ssh.User},
		run, func(root string) backends.Stager { return c.Stager(root) })
}

// slurmSite describes a testbed site for the shared real-site cases.
func slurmSite(t *testing.T, name string) sshbatchtest.Site {
	s := testSite(t, name)
	c := dial(t, s)
	return sshbatchtest.Site{
		Name: name, Client: c, Root: s.scratch, GridID: gridID,
		New: func(run backends.Runner) *sshbatch.Backend { return newBackend(t, s, c, run).Backend },
		Harness: backendtest.Harness{JobTimeout: time.Minute, TimeoutWall: time.Minute, NamesReported: true,
			UnknownID: "999999"},
		UnknownResv: "nosuchresv", PollJobs: 500, PollCommand: "squeue", LiveOutput: true,
	}
}

// TestRealSite runs the cases every sshbatch dialect passes on the real
// SLURM testbed: all of them on siteB, and the conformance suite on siteA
// too (another partition layout and node shape).
func TestRealSite(t *testing.T) {
	t.Run("siteA", func(t *testing.T) { t.Parallel(); sshbatchtest.Conformance(t, slurmSite(t, "siteA")) })
	t.Run("siteB", func(t *testing.T) { t.Parallel(); sshbatchtest.Run(t, slurmSite(t, "siteB")) })
}

func TestInfoReal(t *testing.T) {
	for _, c := range []struct {
		site         string
		nodes, cores int
		parts        []string
	}{{"siteA", 8, 2, []string{"batch", "debug"}}, {"siteB", 4, 4, []string{"compute"}}} {
		s := testSite(t, c.site)
		cl := dial(t, s)
		info, err := newBackend(t, s, cl, cl).Info(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", c.site, err)
		}
		if info.Kind != "slurm" || info.Nodes != c.nodes || info.CoresPerNode != c.cores || fmt.Sprint(info.Partitions) != fmt.Sprint(c.parts) ||
			info.FreeNodes < 0 || info.FreeNodes > info.Nodes || len(info.Busy) != info.Running {
			t.Errorf("%s: %+v", c.site, info)
		}
		// A partition the site lacks is refused with the ones it has.
		_, err = slurm.New(slurm.Config{Name: c.site, Partition: "nosuch"}, cl, nil).Info(context.Background())
		if !errors.Is(err, backends.ErrRejected) || !strings.Contains(err.Error(), c.parts[0]) {
			t.Errorf("%s: unknown partition: %v", c.site, err)
		}
	}
}

// forgetful makes squeue behave as after MinJobAge (every id purged) and can
// hide each later rung of the ending ladder — accounting (sacct), the
// controller's record (scontrol show job), the jobcomp log — while every
// other command reaches the real site.
type forgetful struct {
	backends.Runner
	purge, noSacct, noScontrol, noJobcomp atomic.Bool
}

func (f *forgetful) Run(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	line := strings.Join(argv, " ")
	for _, a := range argv {
		switch {
		case a == "squeue" && f.purge.Load():
			if strings.Contains(line, " --me ") {
				return backends.Result{}, nil
			}
			return backends.Result{ExitCode: 1, Stderr: []byte("slurm_load_jobs error: Invalid job id specified\n")}, nil
		case a == "sacct" && f.noSacct.Load():
			return backends.Result{ExitCode: 1, Stderr: []byte("Slurm accounting storage is disabled\n")}, nil
		case a == "scontrol" && strings.Contains(line, "show job") && f.noScontrol.Load():
			return backends.Result{ExitCode: 1, Stderr: []byte("slurm_load_jobs error: Invalid job id specified\n")}, nil
		case a == "-E" && f.noJobcomp.Load():
			return backends.Result{ExitCode: 1}, nil
		}
	}
	return f.Runner.Run(ctx, argv, stdin)
}

// TestEndingLadderReal: once squeue has forgotten finished jobs, their real
// exit codes come from the next rung of the ladder on the real site:
// accounting (sacct, where the testbed runs slurmdbd), the controller's
// record, the jobcomp log, the exit-code files the wrapper wrote — also for
// a backend that did not submit them once the broker hands back their tags
// (Remember); a job no rung knows is "ending", not lost.
func TestEndingLadderReal(t *testing.T) {
	s := testSite(t, "siteA")
	c := dial(t, s)
	fr := &forgetful{Runner: c}
	b := newBackend(t, s, c, fr)
	ctx := context.Background()
	specs := []*backends.JobSpec{
		{GridID: gridID("fb"), Nodes: 1, CoresPerNode: 1, Walltime: time.Minute, Command: []string{"true"}},
		{GridID: gridID("fb"), Nodes: 1, CoresPerNode: 1, Walltime: time.Minute, Command: []string{"sh", "-c", "exit 5"}},
	}
	ids := make([]backends.JobID, len(specs))
	for i, sp := range specs {
		id, err := b.Submit(ctx, sp)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := b.Status(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		if st[0].State.Final() && st[1].State.Final() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs not done: %+v", st)
		}
		time.Sleep(500 * time.Millisecond)
	}
	check := func(b *slurm.Backend, stage, reason string) {
		t.Helper()
		var st []backends.JobStatus
		// Accounting may lag the controller by a moment.
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
			var err error
			if st, err = b.Status(ctx, ids); err != nil {
				t.Fatal(err)
			}
			if st[0].State.Final() && st[1].State.Final() || time.Now().After(end) {
				break
			}
		}
		if st[0].State != backends.StateCompleted || st[0].ExitCode != 0 || st[1].State != backends.StateFailed || st[1].ExitCode != 5 {
			t.Fatalf("%s: %+v, want completed/0 and failed/5", stage, st)
		}
		for _, x := range st {
			if !strings.Contains(x.Reason, reason) {
				t.Errorf("%s: reason %q, want it to mention %q", stage, x.Reason, reason)
			}
		}
	}
	fr.purge.Store(true)
	if os.Getenv("GRIDSUB_SITEA_ACCOUNTING") == "1" {
		check(b, "purged from squeue, accounting on", "sacct")
	} else {
		t.Log("siteA has no accounting (start the testbed with GRIDSUB_SLURMDBD=1): the sacct rung is not exercised")
	}
	fr.noSacct.Store(true)
	b = newBackend(t, s, c, fr) // a fresh dialect: it learns accounting is off
	for i, sp := range specs {
		b.Remember(ids[i], sp.GridID, 0, 1)
	}
	check(b, "no accounting", "scontrol show job")
	fr.noScontrol.Store(true)
	check(b, "the controller forgot them too", "jobcomp")
	found, err := b.FindByGridID(ctx, specs[1].GridID)
	if err != nil || len(found) != 1 || found[0].ID != ids[1] || found[0].State != backends.StateFailed {
		t.Fatalf("FindByGridID after the purge: %+v %v", found, err)
	}
	fr.noJobcomp.Store(true)
	check(b, "no jobcomp either", "exit-code file")
	// A backend that neither submitted them nor was handed their tags
	// never knew them: with no record anywhere they are lost at once (the
	// Backend contract for ids a site does not know).
	st, err := newBackend(t, s, c, fr).Status(ctx, ids)
	if err != nil || st[0].State != backends.StateLost || st[1].State != backends.StateLost {
		t.Fatalf("no record at all: %+v %v; want lost", st, err)
	}
}
