//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/backendtest"
)

var bg = context.Background()

// newSite opens a site on a fresh root (or root, when given) and closes it
// at the end of the test.
func newSite(t *testing.T, cfg Config) *Site {
	t.Helper()
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = 500 * time.Millisecond
	}
	if cfg.Poll == 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drain(t, s) })
	return s
}

// drain cancels what still runs on s, waits until it has ended (so no
// process of a test outlives it, nor writes into its removed directories)
// and closes s.
func drain(t *testing.T, s *Site) {
	s.mu.Lock()
	var live []backends.JobID
	for id, j := range s.jobs {
		if !j.final() {
			live = append(live, id)
		}
	}
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return
	}
	for _, id := range live {
		s.Cancel(bg, id)
	}
	end := time.Now().Add(20 * time.Second)
	for _, id := range live {
		for {
			st, err := s.Status(bg, []backends.JobID{id})
			if err != nil || st[0].State.Final() {
				break
			}
			if time.Now().After(end) {
				t.Errorf("job %s did not end within 20s of its cancel", id)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	s.Close()
}

var ids atomic.Int64

func gridID() string { return fmt.Sprintf("ls-%d-%d", os.Getpid(), ids.Add(1)) }

func script(body string) *backends.JobSpec {
	return &backends.JobSpec{GridID: gridID(), Components: 1, Name: "t", Nodes: 1, Walltime: time.Minute, Script: body}
}

func submit(t *testing.T, s *Site, spec *backends.JobSpec) backends.JobID {
	t.Helper()
	id, err := s.Submit(bg, spec)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	return id
}

func status(t *testing.T, s *Site, id backends.JobID) backends.JobStatus {
	t.Helper()
	st, err := s.Status(bg, []backends.JobID{id})
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	return st[0]
}

// waitFor polls until pred holds, within limit.
func waitFor(t *testing.T, s *Site, id backends.JobID, limit time.Duration, pred func(backends.JobStatus) bool) backends.JobStatus {
	t.Helper()
	end := time.Now().Add(limit)
	for {
		st := status(t, s, id)
		if pred(st) {
			return st
		}
		if time.Now().After(end) {
			t.Fatalf("job %s still %s (%s) after %s", id, st.State, st.Reason, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitFinal(t *testing.T, s *Site, id backends.JobID, limit time.Duration) backends.JobStatus {
	t.Helper()
	return waitFor(t, s, id, limit, func(st backends.JobStatus) bool { return st.State.Final() })
}

// TestConformance runs the backend conformance suite against a local site
// in process: real processes, real walltime kills, real files.
func TestConformance(t *testing.T) {
	s := newSite(t, Config{Name: "local-test", Slots: 4, CoresPerNode: 2, KillGrace: time.Second})
	backendtest.Run(t, backendtest.Harness{
		Backend:       s,
		GridID:        gridID,
		Wait:          func(_ context.Context, d time.Duration) { time.Sleep(d) },
		Poll:          100 * time.Millisecond,
		JobTimeout:    30 * time.Second,
		ShortRun:      time.Second,
		Parallel:      true,
		Walltime:      true,
		TimeoutWall:   2 * time.Second,
		Staging:       true,
		NamesReported: true,
		RemoteExists: func(_ context.Context, p string) (bool, error) {
			_, err := os.Lstat(p)
			if errors.Is(err, os.ErrNotExist) {
				return false, nil
			}
			return err == nil, err
		},
	})
}

// gone reports whether pid no longer runs (a zombie waiting for init to
// reap it has stopped running too).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	st, _, ok := procStat(pid)
	return ok && (st == 'Z' || st == 'X')
}

func readPid(t *testing.T, p string, limit time.Duration) int {
	t.Helper()
	end := time.Now().Add(limit)
	for {
		b, err := os.ReadFile(p)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			return pid
		}
		if time.Now().After(end) {
			t.Fatalf("%s not written within %s", p, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCancelKillsProcessGroup: cancelling a job ends its whole process
// group, a background child included, and the job is cancelled only once
// they are gone.
func TestCancelKillsProcessGroup(t *testing.T) {
	s := newSite(t, Config{Slots: 1})
	spec := script("sleep 300 &\necho $! > child.pid\necho $$ > leader.pid\nwait\n")
	id := submit(t, s, spec)
	dir := filepath.Join(s.cfg.Root, spec.GridID)
	child := readPid(t, filepath.Join(dir, "child.pid"), 10*time.Second)
	leader := readPid(t, filepath.Join(dir, "leader.pid"), 10*time.Second)
	if gone(child) || gone(leader) {
		t.Fatal("the job's processes are not running")
	}
	if err := s.Cancel(bg, id); err != nil {
		t.Fatal(err)
	}
	st := waitFinal(t, s, id, 10*time.Second)
	if st.State != backends.StateCancelled {
		t.Fatalf("after cancel: %+v", st)
	}
	for _, pid := range []int{child, leader} {
		if !gone(pid) {
			t.Errorf("pid %d still runs after the job was reported cancelled", pid)
		}
	}
	if info, _ := s.Info(bg); info.FreeNodes != 1 || info.Running != 0 {
		t.Errorf("after cancel: %+v, want the slot free", info)
	}
}

// TestEndSweepsStragglers: a job that exits leaving a background process
// in its group does not leave it running.
func TestEndSweepsStragglers(t *testing.T) {
	s := newSite(t, Config{Slots: 1})
	spec := script("sleep 300 &\necho $! > child.pid\nexit 0\n")
	id := submit(t, s, spec)
	st := waitFinal(t, s, id, 10*time.Second)
	if st.State != backends.StateCompleted {
		t.Fatalf("%+v", st)
	}
	child := readPid(t, filepath.Join(s.cfg.Root, spec.GridID, "child.pid"), time.Second)
	if !gone(child) {
		t.Fatalf("background process %d outlived its job", child)
	}
}

// TestWalltimeKill: a job that ignores SIGTERM is SIGKILLed at walltime +
// grace, with its group, and ends timeout.
func TestWalltimeKill(t *testing.T) {
	s := newSite(t, Config{Slots: 1, KillGrace: 400 * time.Millisecond})
	spec := script("trap '' TERM\nsleep 300 &\necho $! > child.pid\necho $$ > leader.pid\nwhile :; do wait; done\n")
	spec.Walltime = time.Second
	t0 := time.Now()
	id := submit(t, s, spec)
	dir := filepath.Join(s.cfg.Root, spec.GridID)
	child := readPid(t, filepath.Join(dir, "child.pid"), 10*time.Second)
	leader := readPid(t, filepath.Join(dir, "leader.pid"), 10*time.Second)
	st := waitFinal(t, s, id, 15*time.Second)
	took := time.Since(t0)
	if st.State != backends.StateTimeout {
		t.Fatalf("%+v, want timeout", st)
	}
	if took < time.Second+400*time.Millisecond {
		t.Errorf("ended after %s: before walltime + grace", took)
	}
	if took > 8*time.Second {
		t.Errorf("ended after %s: the kill came late", took)
	}
	if st.Signal == 0 {
		t.Errorf("signal 0: the job was killed by a signal")
	}
	for _, pid := range []int{child, leader} {
		if !gone(pid) {
			t.Errorf("pid %d survived the walltime kill", pid)
		}
	}
}

// TestFIFOQueue: the site is a FCFS batch system: a job that would fit
// waits behind an earlier one that does not, Info counts slots, and the
// queue drains in order.
func TestFIFOQueue(t *testing.T) {
	s := newSite(t, Config{Slots: 2})
	dir := t.TempDir()
	log := filepath.Join(dir, "order")
	mk := func(nodes int, sleep string) *backends.JobSpec {
		sp := script(fmt.Sprintf("echo $GRIDSUB_JOB_ID >> %s\nsleep %s\n", log, sleep))
		sp.Nodes = nodes
		return sp
	}
	a := submit(t, s, mk(1, "300"))
	waitFor(t, s, a, 5*time.Second, func(st backends.JobStatus) bool {
		b, _ := os.ReadFile(log) // running, and its first line written
		return st.State == backends.StateRunning && string(b) == string(a)+"\n"
	})
	b := submit(t, s, mk(2, "0"))
	c := submit(t, s, mk(1, "0"))
	sb, sc := status(t, s, b), status(t, s, c)
	if sb.State != backends.StatePending || sb.Reason != "Resources" {
		t.Errorf("2-slot job behind a running 1-slot job: %+v, want pending (Resources)", sb)
	}
	if sc.State != backends.StatePending || sc.Reason != "Priority" {
		t.Errorf("1-slot job behind a waiting one: %+v, want pending (Priority): the queue is FIFO", sc)
	}
	info, err := s.Info(bg)
	if err != nil {
		t.Fatal(err)
	}
	if info.Nodes != 2 || info.FreeNodes != 1 || info.Queued != 2 || info.Running != 1 || len(info.Busy) != 1 || info.Busy[0].Nodes != 1 {
		t.Errorf("Info = %+v", info)
	}
	if err := s.Cancel(bg, a); err != nil {
		t.Fatal(err)
	}
	for _, id := range []backends.JobID{b, c} {
		if st := waitFinal(t, s, id, 10*time.Second); st.State != backends.StateCompleted {
			t.Errorf("job %s: %+v", id, st)
		}
	}
	got, _ := os.ReadFile(log)
	if want := fmt.Sprintf("%s\n%s\n%s\n", a, b, c); string(got) != want {
		t.Errorf("start order %q, want %q", got, want)
	}
}

// TestEnvAndCommand: the job gets the spec's environment and gridsub's
// variables, not the plugin's; words stay literal; an unknown command
// fails with 127.
func TestEnvAndCommand(t *testing.T) {
	t.Setenv("LOCALSITE_PLUGIN_SECRET", "leak")
	s := newSite(t, Config{Slots: 1})
	spec := &backends.JobSpec{GridID: gridID(), Components: 1, Nodes: 1, Walltime: time.Minute, WorkDir: "w/x",
		Command: []string{"sh", "-c", `echo "$A|$LOCALSITE_PLUGIN_SECRET|$GRIDSUB_GRID_ID|$(pwd)" > out.txt`},
		Env:     map[string]string{"A": "$(id) 'b'"}, Outputs: []string{"w/x/out.txt"}}
	id := submit(t, s, spec)
	if st := waitFinal(t, s, id, 10*time.Second); st.State != backends.StateCompleted {
		t.Fatalf("%+v", st)
	}
	b, err := os.ReadFile(filepath.Join(s.cfg.Root, spec.GridID, "w", "x", "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(filepath.Join(s.cfg.Root, spec.GridID, "w", "x"))
	if want := "$(id) 'b'||" + spec.GridID + "|" + real + "\n"; string(b) != want {
		t.Errorf("job saw %q, want %q", b, want)
	}
	bad := &backends.JobSpec{GridID: gridID(), Components: 1, Nodes: 1, Walltime: time.Minute, Command: []string{"no-such-command-gridsub"}}
	id = submit(t, s, bad)
	st := waitFinal(t, s, id, 10*time.Second)
	if st.State != backends.StateFailed || st.ExitCode != 127 || !strings.Contains(st.Reason, "not found") {
		t.Errorf("unknown command: %+v, want failed with 127", st)
	}
	// A builtin name is looked up as a program: "exit" is not the shell's.
	bi := &backends.JobSpec{GridID: gridID(), Components: 1, Nodes: 1, Walltime: time.Minute, Command: []string{"exit", "0"}}
	id = submit(t, s, bi)
	if st := waitFinal(t, s, id, 10*time.Second); st.State != backends.StateFailed || st.ExitCode != 127 {
		t.Errorf("command \"exit\": %+v, want failed with 127 (no such program)", st)
	}
}

// TestRootInUse: one Site per root.
func TestRootInUse(t *testing.T) {
	s := newSite(t, Config{})
	if _, err := New(Config{Root: s.cfg.Root}); !errors.Is(err, ErrRootInUse) {
		t.Fatalf("second Site on the root: %v, want ErrRootInUse", err)
	}
	s.Close()
	if _, err := s.Info(bg); !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("Info after Close: %v, want ErrUnavailable", err)
	}
	s2 := newSite(t, Config{Root: s.cfg.Root})
	if s2.Name() != "local" {
		t.Errorf("default name %q", s2.Name())
	}
}

// TestBadConfig: each unusable field is named.
func TestBadConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "root"},
		{Config{Root: t.TempDir(), Slots: -1}, "slots"},
		{Config{Root: t.TempDir(), CoresPerNode: -2}, "cores_per_node"},
		{Config{Root: t.TempDir(), Shell: "no-such-shell-gridsub"}, "shell"},
	} {
		_, err := New(c.cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want ErrConfig naming %s", c.cfg, err, c.want)
		}
	}
}

// TestSameTagTwice: a grid id whose job is still live is refused; after
// its end the tag can run again (a retry) with a new job id.
func TestSameTagTwice(t *testing.T) {
	s := newSite(t, Config{Slots: 2})
	spec := script("sleep 300\n")
	id := submit(t, s, spec)
	if _, err := s.Submit(bg, spec); !errors.Is(err, backends.ErrRejected) {
		t.Fatalf("second submit of a live tag: %v, want ErrRejected", err)
	}
	s.Cancel(bg, id)
	waitFinal(t, s, id, 10*time.Second)
	spec.Script = "exit 0\n"
	id2 := submit(t, s, spec)
	if id2 == id {
		t.Fatal("the retry got the same job id")
	}
	waitFinal(t, s, id2, 10*time.Second)
	found, err := s.FindByGridID(bg, spec.GridID)
	if err != nil || len(found) != 2 || found[0].State != backends.StateCancelled || found[1].State != backends.StateCompleted {
		t.Fatalf("FindByGridID = %+v, %v; want the cancelled job and the completed retry", found, err)
	}
	if _, err := s.FindByGridID(bg, "../x"); !errors.Is(err, backends.ErrInvalidSpec) {
		t.Errorf("FindByGridID(../x): %v", err)
	}
	if err := s.Cancel(bg, "12345"); !errors.Is(err, backends.ErrUnknownJob) {
		t.Errorf("Cancel of an unknown id: %v, want ErrUnknownJob", err)
	}
}

// TestFromConfig: the host's site configuration (JSON) builds the site:
// nodes are the slots, remote_dir or options.root the root; bad options
// are named.
func TestFromConfig(t *testing.T) {
	root := t.TempDir()
	b, err := FromConfig(bg, []byte(`{"name":"ws","kind":"local","nodes":3,"cores_per_node":2,"h":1,"remote_dir":"/nonexistent-ignored",
		"options":{"root":"`+root+`","kill_grace":"2s","max_output_bytes":1000,"pass_env":["PATH"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := b.(*Site)
	defer s.Close()
	info, err := s.Info(bg)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "ws" || info.Nodes != 3 || info.CoresPerNode != 2 || s.cfg.Root != root || s.cfg.KillGrace != 2*time.Second || s.cfg.MaxOutputBytes != 1000 {
		t.Errorf("site from config: %+v, %+v", info, s.cfg)
	}
	other := t.TempDir()
	b2, err := FromConfig(bg, []byte(`{"name":"ws2","nodes":1,"remote_dir":"`+other+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	if b2.(*Site).cfg.Root != other {
		t.Errorf("root %s, want remote_dir %s", b2.(*Site).cfg.Root, other)
	}
	b2.(*Site).Close()
	for _, c := range []struct{ raw, says string }{
		{`{"name":"x","nodes":1}`, "root"},
		{`{"name":"x","nodes":1,"options":{"root":"` + root + `","rooot":1}}`, "rooot"},
		{`{"name":"x","nodes":1,"options":{"root":"` + root + `","kill_grace":"soon"}}`, "kill_grace"},
		{`{"name":"x","nodes":-2,"options":{"root":"` + root + `"}}`, "slots"},
		{`not json`, "JSON"},
	} {
		_, err := FromConfig(bg, []byte(c.raw))
		if !errors.Is(err, backends.ErrInvalidSpec) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("FromConfig(%s) = %v, want ErrInvalidSpec naming %s", c.raw, err, c.says)
		}
	}
}
