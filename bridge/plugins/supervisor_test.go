package plugins_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/plugins"
)

// events records a supervisor's events.
type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) add(site, kind, detail string) {
	e.mu.Lock()
	e.list = append(e.list, kind)
	e.mu.Unlock()
}

func (e *events) has(kind string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, k := range e.list {
		if k == kind {
			return true
		}
	}
	return false
}

func fastOpts(ev *events) plugins.SuperviseOptions {
	return plugins.SuperviseOptions{PingInterval: 100 * time.Millisecond, PingTimeout: 500 * time.Millisecond,
		Backoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, CrashLoop: 3, CrashWindow: time.Minute, OnEvent: ev.add}
}

func waitFor(t *testing.T, what string, limit time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func pidOf(s *plugins.Supervisor) int {
	if i := s.Instance(); i != nil {
		return i.Pid
	}
	return 0
}

// TestSupervisorRestartsKilledPlugin: a plugin SIGKILLed is detected and
// restarted in a new process; the Backend value the broker holds stays the
// same and works again; the restart is reported.
func TestSupervisorRestartsKilledPlugin(t *testing.T) {
	ev := &events{}
	s, err := plugins.Supervise(context.Background(), simSpec(t, "simK"), fastOpts(ev))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var b backends.Backend = s
	ctx := context.Background()
	if _, err := b.Info(ctx); err != nil {
		t.Fatal(err)
	}
	old := pidOf(s)
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "restart", 20*time.Second, func() bool { p := pidOf(s); return p != 0 && p != old })
	if _, err := b.Info(ctx); err != nil {
		t.Fatalf("Info after the restart: %v", err)
	}
	if h := s.Health(); h.State != "ok" || h.Restarts != 1 {
		t.Errorf("health %+v, want ok after 1 restart", h)
	}
	if !ev.has("plugin-restarted") {
		t.Errorf("events %v lack plugin-restarted", ev.list)
	}
	l := plugins.Describe("simK", "sim", b)
	if l.Mode != plugins.ModeIsolated || l.Pid != pidOf(s) || l.Health != "ok" || l.Restarts != 1 || len(l.SHA256) != 64 {
		t.Errorf("listing %+v", l)
	}
}

// TestSupervisorHungPlugin: a plugin that stops answering (SIGSTOP) fails
// its ping, is killed and restarted.
func TestSupervisorHungPlugin(t *testing.T) {
	ev := &events{}
	s, err := plugins.Supervise(context.Background(), simSpec(t, "simH"), fastOpts(ev))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old := pidOf(s)
	if err := syscall.Kill(old, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// kill returns before every thread of the process has stopped: wait
	// until the kernel shows it stopped (or gone, if the supervisor
	// replaced it meanwhile).
	waitFor(t, "the plugin stopped", 5*time.Second, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", old))
		if err != nil {
			return true
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		return len(f) > 0 && (f[0] == "T" || f[0] == "t" || f[0] == "Z")
	})
	// A call made while it hangs is bounded by its own ctx. It may also
	// succeed, but only through a new process: on a loaded machine the
	// supervisor can miss a ping before the SIGSTOP and be restarting
	// the plugin already.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = s.Info(ctx)
	cancel()
	switch {
	case err == nil && pidOf(s) == old:
		t.Errorf("call to the hung plugin (pid %d) answered", old)
	case err != nil && !backends.Retryable(err):
		t.Errorf("call to a hung plugin: %v, want a retryable error", err)
	}
	waitFor(t, "restart of the hung plugin", 20*time.Second, func() bool { p := pidOf(s); return p != 0 && p != old })
	if _, err := s.Info(context.Background()); err != nil {
		t.Fatalf("Info after the restart: %v", err)
	}
	waitFor(t, "the hung process killed", 5*time.Second, func() bool {
		var ws syscall.WaitStatus
		syscall.Wait4(old, &ws, syscall.WNOHANG, nil)
		return syscall.Kill(old, 0) != nil
	})
}

// TestSupervisorCrashLoop: a plugin that cannot be started again after it
// died is retried with backoff, then given up: the site is down with the
// reason, calls fail fast and retryable (ErrUnavailable), and it is
// reported.
func TestSupervisorCrashLoop(t *testing.T) {
	bin := gridsub(t)
	dir := t.TempDir()
	once := filepath.Join(dir, "once")
	// Starts the real plugin the first time only; afterwards exits at once.
	script := filepath.Join(dir, "flaky.sh")
	os.WriteFile(script, []byte("#!/bin/sh\nif [ -e "+once+" ]; then echo 'broken install' >&2; exit 3; fi\ntouch "+once+"\nexec "+bin+" plugin serve backend sim\n"), 0o755)
	spec := plugins.BackendSpec{Config: plugins.BackendConfig{Name: "flaky", Kind: "sim", Nodes: 2}, Path: script, SHA256: sum(t, script),
		StartTimeout: 5 * time.Second}
	ev := &events{}
	s, err := plugins.Supervise(context.Background(), spec, fastOpts(ev))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	syscall.Kill(pidOf(s), syscall.SIGKILL)
	waitFor(t, "crash loop detected", 30*time.Second, func() bool { return s.Health().State == "down" })
	h := s.Health()
	if !strings.Contains(h.Reason, "flaky") || !strings.Contains(h.Reason, "restarted 3 times") {
		t.Errorf("down reason %q does not name the plugin and the restarts", h.Reason)
	}
	_, err = s.Info(context.Background())
	if !errors.Is(err, plugins.ErrCrashLoop) || !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("Info of a crash-looped plugin: %v, want ErrCrashLoop and ErrUnavailable", err)
	}
	if !ev.has("plugin-restart-failed") || !ev.has("plugin-down") {
		t.Errorf("events %v lack plugin-restart-failed / plugin-down", ev.list)
	}
}

// TestSubmitCutShortIsAdopted: the plugin dies after the site accepted a
// job but before the host heard its id. The supervisor asks the restarted
// plugin for the job's tag and returns the job found: no second
// submission. A submission that never reached the site fails retryable.
func TestSubmitCutShortIsAdopted(t *testing.T) {
	bin := build(t, "./bridge/plugins/testdata/diskplugin")
	jobs := t.TempDir()
	// A credential in gridsub's environment does not reach the plugin.
	t.Setenv("GRIDSUB_TOKEN", "s3cret-token")
	ev := &events{}
	s, err := plugins.Supervise(context.Background(), plugins.BackendSpec{Config: plugins.BackendConfig{Name: "disk"},
		Path: bin, SHA256: sum(t, bin), Env: []string{"GRIDSUB_DISKPLUGIN_DIR=" + jobs, "GRIDSUB_DISKPLUGIN_SUBMIT_DELAY=3s"}}, fastOpts(ev))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := info.Partitions[1], "token=,home="+os.Getenv("HOME"); got != want {
		t.Errorf("the plugin sees %q of the host's environment, want %q", got, want)
	}
	if c := backends.CapabilitiesOf(s); !c.Find || c.Fetch || c.Reserve {
		t.Fatalf("capabilities %+v, want Find only", c)
	}
	spec := &backends.JobSpec{GridID: "g-adopt", Nodes: 1, Command: []string{"true"}, Walltime: time.Minute}
	pid := pidOf(s)
	go func() {
		// Kill once the job is on disk, inside the submit delay.
		for {
			if es, _ := os.ReadDir(jobs); len(es) > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := s.Submit(ctx, spec)
	if err != nil {
		t.Fatalf("Submit cut short by the plugin's death: %v, want the job adopted", err)
	}
	es, _ := os.ReadDir(jobs)
	if len(es) != 1 || es[0].Name() != string(id) {
		t.Fatalf("jobs at the site %v, adopted id %s: want exactly the one", es, id)
	}
	if !ev.has("plugin-adopted") {
		t.Errorf("events %v lack plugin-adopted", ev.list)
	}
	st, err := s.Status(ctx, []backends.JobID{id})
	if err != nil || st[0].GridID != "g-adopt" {
		t.Errorf("Status of the adopted job: %+v %v", st, err)
	}
}
