package gridengine_test

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
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/sshbatch/sshbatchtest"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/examples/plugins/gridengine"
	"github.com/gridsub/gridsub/examples/plugins/gridengine/gelock"
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
	gelock.Hold(t)
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

// TestCaptureFixtures writes the real outputs the parsers' fixtures come
// from into $GRIDSUB_GE_CAPTURE (skipped without it): the info command's,
// and one status command over a running, a pending, a completed, a failed,
// a cancelled and an unknown job. Rerun it on a new Grid Engine version
// and compare with testdata/.
func TestCaptureFixtures(t *testing.T) {
	dir := os.Getenv("GRIDSUB_GE_CAPTURE")
	if dir == "" {
		t.Skip("GRIDSUB_GE_CAPTURE names no directory to write captures into")
	}
	s := testSite(t)
	c := dial(t, s)
	b := newBackend(s, c, c)
	ctx := context.Background()
	cmds := gridengine.Cmds{Bin: gridengine.DefaultBinDir}
	write := func(name string, argv []string) {
		r, err := c.Run(ctx, argv, nil)
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("%s: %v %d %s", name, err, r.ExitCode, r.Stderr)
		}
		if err := os.WriteFile(dir+"/"+name, r.Stdout, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("info.txt", cmds.InfoArgv())
	sub := func(script string, nodes int) backends.JobID {
		id, err := b.Submit(ctx, &backends.JobSpec{GridID: gridID("cap"), Nodes: nodes, Walltime: time.Minute, Script: script})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	ok, bad := sub("true", 1), sub("exit 3", 1)
	run := sub("sleep 30", 1)
	wide := sub("true", s.slots) // waits behind the running one
	if err := b.Cancel(ctx, wide); err != nil {
		t.Fatal(err)
	}
	pend := sub("true", s.slots)
	time.Sleep(8 * time.Second)
	ids := []backends.JobID{ok, bad, run, wide, pend, "999999999"}
	root := s.home + "/gridsub-test"
	write("status.txt", cmds.StatusArgv(s.ssh.User, root+"/"+gridengine.CancelledDir, root+"/"+gridengine.IndexDir, ids))
	st, err := b.Status(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("statuses: %+v", st)
	for _, id := range []backends.JobID{run, pend} {
		_ = b.Cancel(ctx, id)
	}
}

// TestRealResources: memory per node (h_vmem per slot), the project (a
// job's account, qsub -P), the queue (partition) and a two-node job
// through the parallel environment reach qsub, which accepts them, and
// the job completes having seen its limits; a project the site does not
// have is refused by qsub with its words.
func TestRealResources(t *testing.T) {
	s := testSite(t)
	c := dial(t, s)
	cfg := s.config()
	cfg.SlotsPerNode = 1
	b := gridengine.New(cfg, c, func(root string) backends.Stager { return c.Stager(root) })
	ctx := context.Background()
	spec := &backends.JobSpec{GridID: gridID("res"), Nodes: 2, MemPerNode: 256 << 20, Walltime: time.Minute,
		Partition: s.queue, Account: s.project, Script: `echo "slots=$NSLOTS pe=$PE queue=$QUEUE vmem=$(ulimit -v)"`}
	id, err := b.Submit(ctx, spec)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		st, err := b.Status(ctx, []backends.JobID{id})
		if err != nil {
			t.Fatal(err)
		}
		if st[0].State.Final() {
			if st[0].State != backends.StateCompleted {
				t.Fatalf("job %s: %+v", id, st[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s", id, st[0].State)
		}
		time.Sleep(time.Second)
	}
	var out strings.Builder
	data, _, err := b.ReadLog(ctx, id, spec, "stdout", 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	out.Write(data)
	// h_vmem=256M per slot; Grid Engine limits a job's address space on a
	// host to h_vmem times its slots there: both slots are on the
	// testbed's one host, so 512 MiB (ulimit -v counts KiB).
	want := fmt.Sprintf("slots=2 pe=%s queue=%s vmem=%d", s.pe, s.queue, 2*256<<10)
	if strings.TrimSpace(out.String()) != want {
		t.Fatalf("the job said %q, want %q", out.String(), want)
	}
	bad := *spec
	bad.GridID, bad.Account = gridID("res"), "nosuchproject"
	if _, err := b.Submit(ctx, &bad); !errors.Is(err, backends.ErrRejected) || !strings.Contains(err.Error(), `project "nosuchproject" does not exist`) {
		t.Fatalf("unknown project: %v, want qsub's refusal naming it", err)
	}
}

// noAcct runs every command unchanged but the status command, whose qacct
// it points at a path that does not exist: a site without accounting.
type noAcct struct{ backends.Runner }

func (r noAcct) Run(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	if len(argv) > 5 && argv[0] == "bash" && argv[3] == "gridsub-status" {
		argv = append([]string(nil), argv...)
		argv[5] = "/nonexistent/qacct"
	}
	return r.Runner.Run(ctx, argv, stdin)
}

// TestRealEndingLadder: a job's end is read from qacct while the
// accounting file has it, else from the job's exit-code file (a site
// without accounting); a job with neither is lost.
func TestRealEndingLadder(t *testing.T) {
	s := testSite(t)
	c := dial(t, s)
	ctx := context.Background()
	b := newBackend(s, c, c)
	var ids []backends.JobID
	var grids []string
	for _, code := range []int{0, 3} {
		g := gridID("ladder")
		id, err := b.Submit(ctx, &backends.JobSpec{GridID: g, Nodes: 1, Walltime: time.Minute, Script: fmt.Sprintf("exit %d", code)})
		if err != nil {
			t.Fatal(err)
		}
		ids, grids = append(ids, id), append(grids, g)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		st, err := b.Status(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		if st[0].State.Final() && st[1].State.Final() {
			if st[0].State != backends.StateCompleted || st[1].State != backends.StateFailed || st[1].ExitCode != 3 || strings.Contains(st[1].Reason, "exit-code file") {
				t.Fatalf("from qacct: %+v", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ended: %+v", st)
		}
		time.Sleep(time.Second)
	}
	// A backend on a site whose qacct is gone: FindByGridID finds each
	// job by its directory's id file, and the exit-code files answer.
	b2 := gridengine.New(s.config(), noAcct{c}, func(root string) backends.Stager { return c.Stager(root) })
	for i, id := range ids {
		found, err := b2.FindByGridID(ctx, grids[i])
		if err != nil || len(found) != 1 || found[0].ID != id {
			t.Fatalf("find %s (%s): %+v %v", grids[i], id, found, err)
		}
		want := []backends.State{backends.StateCompleted, backends.StateFailed}[i]
		if found[0].State != want || !strings.Contains(found[0].Reason, "exit-code file") {
			t.Fatalf("job %s without accounting: %+v, want %s from the exit-code file", id, found[0], want)
		}
	}
	st, err := b2.Status(ctx, append(ids, "999999998"))
	if err != nil {
		t.Fatal(err)
	}
	if st[0].State != backends.StateCompleted || st[1].State != backends.StateFailed || st[1].ExitCode != 3 || st[2].State != backends.StateLost {
		t.Fatalf("Status without accounting: %+v", st)
	}
}
