package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins"
)

// plannerConfig writes a configuration of two simulated sites whose
// broker plans with the planner plugin policy names.
func plannerConfig(t *testing.T, policy, sum string) string {
	t.Helper()
	cfg := `sites:
  - {name: a, kind: sim, nodes: 4, cores_per_node: 1, h: 1.0}
  - {name: b, kind: sim, nodes: 8, cores_per_node: 1, h: 1.0}
network:
  default: {bandwidth: 1MB/s, latency: 10ms}
broker:
  policy: ` + policy + `
  policy_timeout: 1s
  fallback_policy: greedy-easy
`
	if sum != "" {
		cfg += `  policy_sha256: "` + sum + `"` + "\n"
	}
	p := filepath.Join(t.TempDir(), "planner.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// buildTestPlanner builds plannerrpc's test planner plugin (it can hang
// on demand).
func buildTestPlanner(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "testplanner")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/gridsub/gridsub/bridge/plugins/plannerrpc/internal/testplanner").CombinedOutput()
	if err != nil {
		t.Fatalf("go build testplanner: %v\n%s", err, out)
	}
	return bin
}

// runJob submits a short job to the daemon and waits for its end; it
// fails the test unless the job completed.
func runJob(t *testing.T, dir, name string) {
	t.Helper()
	job := filepath.Join(dir, name+".yaml")
	os.WriteFile(job, []byte("name: "+name+"\ncommand: [/bin/echo, hi]\nresources: {nodes: 2, walltime: 5m}\nsimulate: {runtime: 30s}\n"), 0o644)
	code, stdout, stderr := cli("submit", job, "--wait", "--out-dir", filepath.Join(dir, "out"), "-o", "json")
	var j listedJob
	if err := json.Unmarshal([]byte(stdout), &j); err != nil || code != 0 || j.State != "completed" {
		t.Fatalf("job %s: exit %d %v\nstdout %s\nstderr %s", name, code, err, stdout, stderr)
	}
}

// plannerListing is the planner row of `gridsub plugins --output json`
// (from the daemon's /v1/plugins).
func plannerListing(t *testing.T) plugins.Listing {
	t.Helper()
	code, out, errs := cli("plugins", "--output", "json")
	if code != 0 {
		t.Fatalf("gridsub plugins: exit %d\n%s", code, errs)
	}
	var rows []plugins.Listing
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, r := range rows {
		if r.Kind == plugins.KindPlanner {
			return r
		}
	}
	t.Fatalf("no planner in gridsub plugins:\n%s", out)
	return plugins.Listing{}
}

// scrape reads /metrics on the daemon's socket.
func scrape(t *testing.T, sock string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := c.Get("http://gridsub/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// metric is the value of the sample whose line starts with name{labels}
// (or NaN-like -1 when absent).
func metric(text, series string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// alive reports whether a process pid exists (and is not a zombie of
// ours).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return !regexp.MustCompile(`\) Z `).Match(b)
}

func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs", what, pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func serveDirs(t *testing.T) (dir, state, sock string) {
	d, err := os.MkdirTemp("", "gsp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d, filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
}

// TestServePlannerPluginRestarted: a real `gridsub serve` plans with its
// built-in planner isolated (broker.policy: plugin:builtin:greedy-easy);
// jobs complete; the planner process SIGKILLed is restarted (a new pid,
// restarts 1, counted in /metrics) and jobs still complete; on stop no
// planner process is left.
func TestServePlannerPluginRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub and starts a daemon")
	}
	bin := buildBinary(t)
	dir, state, sock := serveDirs(t)
	t.Setenv(envSocket, sock)
	p := startServe(t, bin, state, sock, "--time-scale", "3000", "--config", plannerConfig(t, "plugin:builtin:greedy-easy", ""))
	runJob(t, dir, "first")
	l := plannerListing(t)
	if l.Mode != plugins.ModeIsolated || l.Impl != "greedy-easy" || l.Pid <= 0 || l.Health != "ok" || l.Restarts != 0 ||
		l.Fallback != "greedy-easy" || l.FallbackActive {
		t.Fatalf("planner listing %+v", l)
	}
	if !alive(l.Pid) {
		t.Fatalf("planner pid %d does not run", l.Pid)
	}
	if err := syscall.Kill(l.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	runJob(t, dir, "after-kill")
	runJob(t, dir, "after-kill-2")
	l2 := plannerListing(t)
	if l2.Pid <= 0 || l2.Pid == l.Pid || l2.Restarts != 1 || l2.Health != "ok" || l2.FallbackActive {
		t.Fatalf("after SIGKILL: %+v (was pid %d)", l2, l.Pid)
	}
	m := scrape(t, sock)
	if v := metric(m, `gridsub_plugin_restarts_total{kind="planner",plugin="planner"}`); v != 1 {
		t.Errorf("gridsub_plugin_restarts_total of the planner = %v, want 1\n%s", v, m)
	}
	if v := metric(m, `gridsub_plugin_up{kind="planner",mode="isolated",plugin="planner"}`); v != 1 {
		t.Errorf("gridsub_plugin_up of the planner = %v, want 1", v)
	}
	if v := metric(m, `gridsub_plugin_events_total{event="planner-restarted",plugin="planner"}`); v != 1 {
		t.Errorf("planner-restarted events = %v, want 1", v)
	}
	if v := metric(m, `gridsub_planner_fallbacks_total`); v != 0 {
		t.Errorf("gridsub_planner_fallbacks_total = %v, want 0", v)
	}
	p.term(t, sock)
	waitGone(t, l2.Pid, "the planner plugin after gridsub serve stopped")
	if !strings.Contains(p.logs.String(), "planner plugin failed and was restarted") {
		t.Errorf("the daemon's log does not say the planner was restarted:\n%s", p.logs)
	}
}

// TestServePlannerPluginFallback: an external planner plugin that hangs
// (testplanner -hang-after 1) past broker.policy_timeout is restarted
// until the restarts run out, then replaced by the fallback built-in: jobs
// still complete, the switch is in /metrics, in `gridsub plugins` and in
// the log, and the hung process is stopped.
func TestServePlannerPluginFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub and starts a daemon")
	}
	bin, tp := buildBinary(t), buildTestPlanner(t)
	dir, state, sock := serveDirs(t)
	t.Setenv(envSocket, sock)
	cfg := plannerConfig(t, "plugin:"+tp+" -hang-after 1 greedy-easy", fileSHA256Hex(t, tp))
	p := startServe(t, bin, state, sock, "--time-scale", "3000", "--config", cfg)
	first := plannerListing(t)
	if first.Mode != plugins.ModeExternal || first.Impl != tp || first.SHA256 != fileSHA256Hex(t, tp) || first.Pid <= 0 {
		t.Fatalf("planner listing %+v", first)
	}
	// The broker plans only when jobs wait: every job makes the plugin
	// hang once (it hangs after one plan per process), so the fourth (one
	// hang and three restarts) switches to the fallback. Every job
	// completes all the same.
	var pids []int
	for i := 0; ; i++ {
		runJob(t, dir, "job"+strconv.Itoa(i))
		l := plannerListing(t)
		if l.Pid > 0 && !slices.Contains(pids, l.Pid) {
			pids = append(pids, l.Pid)
		}
		if l.FallbackActive {
			if l.Health != "down" || l.Restarts != 3 || !strings.Contains(l.Reason, "greedy-easy") {
				t.Errorf("after the fallback: %+v", l)
			}
			break
		}
		if i == 8 {
			t.Fatalf("no fallback after %d jobs: %+v\n%s", i+1, l, p.logs)
		}
	}
	runJob(t, dir, "on-fallback")
	runJob(t, dir, "on-fallback-2")
	m := scrape(t, sock)
	if v := metric(m, `gridsub_planner_fallbacks_total`); v != 1 {
		t.Errorf("gridsub_planner_fallbacks_total = %v, want 1", v)
	}
	if v := metric(m, `gridsub_planner_fallback_active{fallback="greedy-easy",plugin="planner"}`); v != 1 {
		t.Errorf("gridsub_planner_fallback_active = %v, want 1", v)
	}
	if v := metric(m, `gridsub_plugin_up{kind="planner",mode="external",plugin="planner"}`); v != 0 {
		t.Errorf("gridsub_plugin_up of the planner = %v, want 0", v)
	}
	code, out, _ := cli("plugins")
	if code != 0 || !regexp.MustCompile(`planner\s+planner\s+external.*down`).MatchString(out) || !strings.Contains(out, "replaced by the fallback greedy-easy") {
		t.Errorf("gridsub plugins table after the fallback (exit %d):\n%s", code, out)
	}
	for _, pid := range append(pids, first.Pid) {
		waitGone(t, pid, "a hung planner plugin replaced by the fallback")
	}
	p.term(t, sock)
	if !strings.Contains(p.logs.String(), "the fallback planner plans from now on") {
		t.Errorf("the daemon's log does not say the fallback took over:\n%s", p.logs)
	}
}

// TestServeRefusesBadPlannerChecksum: a planner plugin whose executable
// does not match broker.policy_sha256 stops `gridsub serve` before it
// serves, with an error naming the plugin, its real sum and the command
// that computes it.
func TestServeRefusesBadPlannerChecksum(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub")
	}
	bin, tp := buildBinary(t), buildTestPlanner(t)
	_, state, sock := serveDirs(t)
	cmd := exec.Command(bin, "serve", "--config", plannerConfig(t, "plugin:"+tp+" greedy-easy", strings.Repeat("ab", 32)))
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "GRIDSUB_") }),
		envStateDir+"="+state, envSocket+"="+sock)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("gridsub serve with a bad planner checksum still runs after 20s\n%s", errb.String())
	}
	errs := errb.String()
	if cmd.ProcessState.ExitCode() == 0 {
		t.Fatalf("gridsub serve exited 0 with a bad planner checksum\n%s", errs)
	}
	for _, want := range []string{"broker.policy", tp, "sha256sum " + tp, fileSHA256Hex(t, tp)} {
		if !strings.Contains(errs, want) {
			t.Errorf("the error lacks %q:\n%s", want, errs)
		}
	}
	if _, err := os.Stat(sock); err == nil {
		t.Errorf("socket %s exists after a refused start", sock)
	}
}

// plannerProcs are the pids of running `BIN plugin serve planner ...`
// processes of this binary.
func plannerProcs(t *testing.T, bin string) []int {
	t.Helper()
	var out []int
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) >= 4 && args[0] == bin && args[1] == "plugin" && args[2] == "serve" && args[3] == "planner" && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// TestEmbeddedPlannerPlugin: the embedded `gridsub --config C job.yaml`
// plans with the configured planner plugin too, and stops it at its end.
func TestEmbeddedPlannerPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub")
	}
	bin := buildBinary(t)
	dir, state, _ := serveDirs(t)
	before := plannerProcs(t, bin)
	job := filepath.Join(dir, "job.yaml")
	os.WriteFile(job, []byte("name: emb\ncommand: [/bin/echo, hi]\nresources: {nodes: 2, walltime: 5m}\nsimulate: {runtime: 30s}\n"), 0o644)
	cmd := exec.Command(bin, "--config", plannerConfig(t, "plugin:builtin:greedy-easy", ""), job, "--out-dir", filepath.Join(dir, "out"), "-o", "json")
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "GRIDSUB_") }),
		envStateDir+"="+state, envSocket+"="+filepath.Join(dir, "none.sock"), "GRIDSUB_BROKER_OUTPUT_ROOT="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("embedded run: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var j listedJob
	if err := json.Unmarshal(stdout.Bytes(), &j); err != nil || j.State != "completed" {
		t.Fatalf("embedded run: %v %+v\n%s", err, j, stderr.String())
	}
	for _, pid := range plannerProcs(t, bin) {
		if !slices.Contains(before, pid) {
			t.Errorf("planner plugin pid %d outlived the embedded run", pid)
		}
	}
}

// TestServeBackendPluginEventsInMetrics: a backend plugin's supervisor
// events reach the daemon's log and /metrics: SIGKILLed, the external
// backend plugin is restarted, counted as a plugin-restarted event and in
// gridsub_plugin_restarts_total, and up again.
func TestServeBackendPluginEventsInMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub and starts a daemon")
	}
	bin := buildBinary(t)
	_, state, sock := serveDirs(t)
	t.Setenv(envSocket, sock)
	p := startServe(t, bin, state, sock, "--config", pluginConfig(t, bin, fileSHA256Hex(t, bin)))
	defer p.term(t, sock)
	backend := func() plugins.Listing {
		code, out, errs := cli("plugins", "--output", "json")
		var rows []plugins.Listing
		if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 || len(rows) != 1 {
			t.Fatalf("gridsub plugins: exit %d %v\n%s%s", code, err, out, errs)
		}
		return rows[0]
	}
	first := backend()
	if first.Pid <= 0 {
		t.Fatalf("%+v", first)
	}
	if err := syscall.Kill(first.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		l := backend()
		if l.Pid > 0 && l.Pid != first.Pid && l.Health == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not restarted within 30s: %+v", l)
		}
		time.Sleep(100 * time.Millisecond)
	}
	m := scrape(t, sock)
	if v := metric(m, `gridsub_plugin_events_total{event="plugin-restarted",plugin="proc"}`); v != 1 {
		t.Errorf("plugin-restarted events of proc = %v, want 1", v)
	}
	if v := metric(m, `gridsub_plugin_restarts_total{kind="backend",plugin="proc"}`); v != 1 {
		t.Errorf("gridsub_plugin_restarts_total of proc = %v, want 1", v)
	}
	if v := metric(m, `gridsub_plugin_up{kind="backend",mode="external",plugin="proc"}`); v != 1 {
		t.Errorf("gridsub_plugin_up of proc = %v, want 1", v)
	}
	if !strings.Contains(p.logs.String(), `"msg":"backend plugin","plugin":"proc","site":"proc","event":"plugin-restarted"`) {
		t.Errorf("the daemon's log lacks the backend plugin's restart event:\n%s", p.logs)
	}
}

// TestPlannerPluginDiesWithKilledDaemon: even a SIGKILLed `gridsub
// serve`, which closes nothing, leaves no plugin process behind, planner
// or backend (the kernel kills them with their parent: Pdeathsig).
func TestPlannerPluginDiesWithKilledDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub and starts a daemon")
	}
	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("Linux only (Pdeathsig)")
	}
	bin := buildBinary(t)
	_, state, sock := serveDirs(t)
	t.Setenv(envSocket, sock)
	raw, err := os.ReadFile(pluginConfig(t, bin, fileSHA256Hex(t, bin)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "both.yaml")
	os.WriteFile(cfg, append(raw, "broker: {policy: 'plugin:builtin:greedy-easy'}\n"...), 0o644)
	p := startServe(t, bin, state, sock, "--config", cfg)
	code, out, errs := cli("plugins", "--output", "json")
	var rows []plugins.Listing
	if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 || len(rows) != 2 {
		t.Fatalf("gridsub plugins: exit %d %v\n%s%s", code, err, out, errs)
	}
	for _, r := range rows {
		if !alive(r.Pid) {
			t.Fatalf("plugin %+v does not run", r)
		}
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	for _, r := range rows {
		waitGone(t, r.Pid, "the "+r.Kind+" plugin of a SIGKILLed gridsub serve")
	}
}
