package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// The QoS tiers live on real SLURM. A test that takes a site down starts a
// PRIVATE two-site testbed (scripts/slurm-testbed.sh with its own directory,
// munge, ports and key) and stops that testbed's daemons by pid, never the
// shared testbed's.

// slurmSite is one site of a testbed as its testbed.env describes it.
type slurmSite struct {
	name, conf, scratch, partition string
	sshPort, nodes, cpus           int
}

// testbed is a SLURM testbed's environment (shared or private).
type testbed struct {
	dir     string
	env     map[string]string
	sites   []slurmSite
	restart func() error // private testbeds: start what was stopped again
}

func readTestbed(t *testing.T, envFile string) *testbed {
	t.Helper()
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	tb := &testbed{env: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "=")
		if ok && !strings.HasPrefix(k, "#") {
			tb.env[k] = strings.Trim(v, `"`)
		}
	}
	tb.dir = tb.env["GRIDSUB_TESTBED_DIR"]
	for _, s := range []struct{ name, part string }{{"siteA", "batch"}, {"siteB", "compute"}} {
		up := strings.ToUpper(s.name)
		port, _ := strconv.Atoi(tb.env["GRIDSUB_"+up+"_SSH_PORT"])
		cpus, _ := strconv.Atoi(tb.env["GRIDSUB_"+up+"_CPUS_PER_NODE"])
		tb.sites = append(tb.sites, slurmSite{name: s.name, conf: tb.env["GRIDSUB_"+up+"_SLURM_CONF"], scratch: tb.env["GRIDSUB_"+up+"_SCRATCH"],
			partition: s.part, sshPort: port, nodes: len(strings.Fields(tb.env["GRIDSUB_"+up+"_NODES"])), cpus: cpus})
	}
	return tb
}

// config writes a gridsub configuration for the testbed with literal
// values (a daemon started by a test does not inherit GRIDSUB_*).
func (tb *testbed) config(t *testing.T, dir string, downAfter time.Duration) string {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("sites:\n")
	for _, s := range tb.sites {
		fmt.Fprintf(&sb, `  - name: %s
    kind: slurm
    nodes: %d
    cores_per_node: %d
    h: 1.0
    partition: %s
    remote_dir: %s
    ssh:
      host: 127.0.0.1
      port: %d
      user: %s
      key_file: %s
      known_hosts: %s
      max_sessions: 8
`, s.name, s.nodes, s.cpus, s.partition, s.scratch, s.sshPort, tb.env["GRIDSUB_SSH_USER"], tb.env["GRIDSUB_SSH_KEY"], tb.env["GRIDSUB_SSH_KNOWN_HOSTS"])
	}
	fmt.Fprintf(&sb, "broker:\n  policy: optimal-easy\n  interval: 1s\n  poll_interval: 1s\n  qos:\n    down_after: %s\n", downAfter)
	p := filepath.Join(dir, "gridsub.yaml")
	if err := os.WriteFile(p, []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// squeue lists the site's active jobs (what squeue shows by default) as
// comment -> state.
func (tb *testbed) squeue(t *testing.T, site int) map[string]string {
	t.Helper()
	cmd := exec.Command("squeue", "-h", "-o", "%k|%T")
	cmd.Env = append(os.Environ(), "SLURM_CONF="+tb.sites[site].conf)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("squeue at %s: %v\n%s", tb.sites[site].name, err, out)
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(l, "|"); ok {
			m[k] = v
		}
	}
	return m
}

// waitRunning waits until a job whose comment has the prefix runs at some
// site and returns that site's index.
func (tb *testbed) waitRunning(t *testing.T, prefix string, timeout time.Duration) int {
	t.Helper()
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		for s := range tb.sites {
			for k, v := range tb.squeue(t, s) {
				if strings.HasPrefix(k, prefix) && v == "RUNNING" {
					return s
				}
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("no job tagged %s* running after %s", prefix, timeout)
	return -1
}

// privateTestbed starts a two-site SLURM testbed of its own (2 nodes per
// site) on free ports, and removes it (daemons, key, directory) at the end.
func privateTestbed(t *testing.T) *testbed {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a private SLURM testbed needs root (scripts/slurm-testbed.sh)")
	}
	if _, err := exec.LookPath("slurmctld"); err != nil {
		if _, err := os.Stat("/usr/sbin/slurmctld"); err != nil {
			t.Skip("no SLURM installed")
		}
	}
	dir, err := os.MkdirTemp("", "gsqos-tb")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // the login user reaches its scratch below it
		t.Fatal(err)
	}
	// The script's ports: slurmctld base+1 and base+101, slurmd base+11.. and base+111...
	slurmBase, sshBase := freeBlock(t, 32000, 1, 11, 12, 101, 111, 112), freeBlock(t, 42000, 0, 1)
	script := filepath.Join(repoRoot, "scripts", "slurm-testbed.sh")
	env := append(os.Environ(), "GRIDSUB_TESTBED_DIR="+dir, "GRIDSUB_SLURM_PORT_BASE="+strconv.Itoa(slurmBase),
		"GRIDSUB_SSH_PORT_BASE="+strconv.Itoa(sshBase), "GRIDSUB_SITEA_NODES=2", "GRIDSUB_SITEB_NODES=2", "GRIDSUB_MIN_JOB_AGE=60",
		"GRIDSUB_CLIENT_MESSAGE_TIMEOUT=2", // squeue against a stopped slurmctld fails in ~1 s, not ~9 s
		// Two sites, no accounting, whatever the suite's testbed runs
		// (scripts/test.sh sets both for its own).
		"GRIDSUB_SITES=siteA siteB", "GRIDSUB_SLURMDBD=0")
	run := func(verb string) error {
		cmd := exec.Command("bash", script, verb)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("slurm-testbed.sh %s: %v\n%s", verb, err, out)
		}
		if testing.Verbose() {
			t.Logf("slurm-testbed.sh %s:\n%s", verb, out)
		}
		return nil
	}
	t.Cleanup(func() {
		t0 := time.Now()
		if err := run("clean"); err != nil {
			t.Error(err)
		}
		os.RemoveAll(dir)
		t.Logf("private testbed removed in %s", time.Since(t0).Round(100*time.Millisecond))
	})
	if err := run("start"); err != nil {
		t.Fatal(err)
	}
	tb := readTestbed(t, filepath.Join(dir, "testbed.env"))
	tb.restart = func() error { return run("start") }
	return tb
}

// freeBlock finds a base port in [lo, lo+10000) such that base+off is
// free now for every offset.
func freeBlock(t *testing.T, lo int, offs ...int) int {
	t.Helper()
	for try := 0; try < 50; try++ {
		base := lo + (os.Getpid()*7+try*977)%10000
		ok := true
		for _, off := range offs {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+off))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port block")
	return 0
}

// stopDaemon stops one daemon of a private testbed by its pid file (the
// failure injector): site's slurmctld ("slurmctld") or sshd ("sshd").
func (tb *testbed) stopDaemon(t *testing.T, site int, which string) {
	t.Helper()
	pidFile := filepath.Join(tb.dir, tb.sites[site].name, "run", "slurmctld.pid")
	if which == "sshd" {
		pidFile = filepath.Join(tb.dir, tb.sites[site].name, "ssh", "sshd.pid")
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Fatalf("pid file %s: %q", pidFile, b)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// runEmbedded runs gridsub with args in a goroutine (the test meanwhile
// takes a site down) and returns a channel with its JSON summary.
func runEmbedded(t *testing.T, args ...string) <-chan qosRun {
	t.Helper()
	t.Chdir(repoRoot)
	ch := make(chan qosRun, 1)
	go func() {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		var r qosRun
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			r.State = fmt.Sprintf("exit %d, no JSON: %v\n%s\n%s", code, err, out.String(), errb.String())
		}
		ch <- r
	}()
	return ch
}

func waitRun(t *testing.T, ch <-chan qosRun, timeout time.Duration) qosRun {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(timeout):
		t.Fatalf("the job did not end within %s", timeout)
	}
	return qosRun{}
}

func writeQoSJob(t *testing.T, dir, qos, script string) string {
	t.Helper()
	p := filepath.Join(dir, "job.yaml")
	body := fmt.Sprintf("name: qos-live\ncommand: [\"/bin/sh\", \"-c\", %q]\nresources: {nodes: 1, walltime: 5m}\noutputs: [result.txt]\nscheduling: {qos: %s}\n", script, qos)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func readResult(t *testing.T, r qosRun) string {
	t.Helper()
	var got []string
	for _, o := range r.Outputs {
		if filepath.Base(o) == "result.txt" {
			b, err := os.ReadFile(o)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, strings.TrimSpace(string(b)))
		}
	}
	if len(got) != 1 {
		t.Fatalf("want one result.txt, got %v (outputs %v)", got, r.Outputs)
	}
	return got[0]
}

// sharedTestbed is the running shared testbed (read-only use: no daemon of
// it is stopped).
func sharedTestbed(t *testing.T) *testbed {
	t.Helper()
	needSlurm(t)
	return readTestbed(t, filepath.Join(os.Getenv("GRIDSUB_TESTBED_DIR"), "testbed.env"))
}

// TestRealSlurmQoSHigh: a qos: high job runs one copy at siteA and one at
// siteB; the siteB copy succeeds first, the siteA copy is cancelled (gone
// from squeue), and only the winner's result.txt comes back.
func TestRealSlurmQoSHigh(t *testing.T) {
	tb := sharedTestbed(t)
	dir := t.TempDir()
	job := writeQoSJob(t, dir, "high", `if [ "$SLURM_CLUSTER_NAME" = siteb ]; then sleep 2; else sleep 120; fi; echo "won at $SLURM_CLUSTER_NAME" > result.txt`)
	r := waitRun(t, runEmbedded(t, "--config", "configs/local-slurm.yaml", job, "--output", "json", "--out-dir", filepath.Join(dir, "out")), 90*time.Second)
	if r.State != "completed" || r.Tier != bridge.TierHigh || r.Attempts != 1 {
		t.Fatalf("%+v", r)
	}
	var at []string
	for _, e := range r.events("submitted-remote") {
		at = append(at, e.Site)
	}
	slices.Sort(at)
	if strings.Join(at, ",") != "siteA,siteB" {
		t.Fatalf("copies submitted at %v, want one at siteA and one at siteB", at)
	}
	if len(r.Sites) != 1 || r.Sites[0].Site != "siteB" || len(r.Withdrawn) != 1 || r.Withdrawn[0].Site != "siteA" || r.Withdrawn[0].State != "cancelled" {
		t.Fatalf("result %+v, withdrawn %+v; want siteB's copy, siteA's cancelled", r.Sites, r.Withdrawn)
	}
	if got := readResult(t, r); got != "won at siteb" {
		t.Fatalf("result.txt %q", got)
	}
	for k, v := range tb.squeue(t, 0) {
		if strings.HasPrefix(k, "gridsub:"+r.ID+"-") {
			t.Fatalf("the losing copy is still in siteA's squeue: %s %s", k, v)
		}
	}
}

// TestRealSlurmQoSFailover stops siteA's slurmctld (of a private testbed,
// by pid) under two running jobs: the qos: low one completes through its
// backup at siteB (its tier runs copies: the primary counts as lost); the
// qos: none one is unknown, not lost — SLURM keeps it running while only
// slurmctld is down — is not rerun anywhere, and completes at siteA once
// the controller is back (issue 23). Both run at once on one daemon, so
// the outage is waited out once.
func TestRealSlurmQoSFailover(t *testing.T) {
	needSlurm(t)
	t.Parallel() // its own private testbed; mostly waiting for the stopped slurmctld's timeouts
	t0 := time.Now()
	tb := privateTestbed(t)
	t.Logf("private testbed up in %s", time.Since(t0).Round(100*time.Millisecond))
	bin := buildBinary(t)
	t.Logf("binary after %s", time.Since(t0).Round(100*time.Millisecond))
	d, err := os.MkdirTemp("", "gsqf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	cfg := tb.config(t, d, 3*time.Second)
	startServe(t, bin, state, sock, "--config", cfg)
	c := api.NewUnixClient(sock)
	ctx := context.Background()
	ids := map[string]string{}
	for _, qos := range []string{"low", "none"} {
		j, err := c.Submit(ctx, bridge.Request{Name: "qos-" + qos, Command: []string{"/bin/sh", "-c",
			`sleep 5; echo "done at $SLURM_CLUSTER_NAME" > result.txt`}, Nodes: 1, Estimate: 5 * time.Minute, QoS: qos,
			Outputs: []string{"result.txt"}, OutputDir: "out-" + qos, Prefer: []string{"siteA"}})
		if err != nil {
			t.Fatal(err)
		}
		ids[qos] = j.ID
	}
	for end := time.Now().Add(60 * time.Second); ; {
		q := tb.squeue(t, 0)
		if q["gridsub:"+bridge.RemoteTag(ids["low"], 1)] == "RUNNING" && q["gridsub:"+bridge.RemoteTag(ids["none"], 1)] == "RUNNING" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("both jobs not running at siteA after 60s: %v, siteB %v", q, tb.squeue(t, 1))
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("both running at siteA after %s", time.Since(t0).Round(100*time.Millisecond))
	killed := time.Now()
	tb.stopDaemon(t, 0, "slurmctld")
	jobs := map[string]*bridge.Job{}
	for end := time.Now().Add(90 * time.Second); jobs["low"] == nil; {
		if j, err := c.Job(ctx, ids["low"]); err == nil && j.State.Final() {
			jobs["low"] = j
		}
		if time.Now().After(end) {
			t.Fatalf("low not ended 90s after siteA's slurmctld stopped")
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("low ended %s after the stop", time.Since(killed).Round(time.Second))
	// Past down_after: the none job is unknown at siteA, not rerun.
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		j, err := c.Job(ctx, ids["none"])
		if err != nil {
			t.Fatal(err)
		}
		if j.State.Final() || j.Attempts != 1 || j.Sites() != "siteA:1" {
			t.Fatalf("none during the outage: %s on %s after %d attempts; want it left at siteA", j.State, j.Sites(), j.Attempts)
		}
		if len(j.Comps) == 1 && j.Comps[0].State.String() == "unknown" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("none's component at siteA is %s, want unknown while the controller is down", j.Comps[0].State)
		}
	}
	if err := tb.restart(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	for end := time.Now().Add(150 * time.Second); jobs["none"] == nil; {
		if j, err := c.Job(ctx, ids["none"]); err == nil && j.State.Final() {
			jobs["none"] = j
		}
		if time.Now().After(end) {
			t.Fatalf("none not ended 150s after siteA's slurmctld came back")
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("none reconciled and ended %s after siteA's slurmctld came back", time.Since(back).Round(time.Second))
	for qos, j := range jobs {
		evs, _ := c.Events(ctx, j.ID)
		var kinds []string
		for _, e := range evs {
			kinds = append(kinds, e.Kind)
		}
		site := map[string]string{"low": "siteB:1", "none": "siteA:1"}[qos]
		if j.State != bridge.Completed || j.Sites() != site || j.Tier != qos {
			t.Fatalf("%s: %s on %s (tier %s): %v; want completed on %s", qos, j.State, j.Sites(), j.Tier, kinds, site)
		}
		want := map[string]string{"low": "backup-activated", "none": "unknown"}[qos]
		if !slices.Contains(kinds, want) {
			t.Fatalf("%s: no %s event: %v", qos, want, kinds)
		}
		if qos == "low" && (len(j.Withdrawn) != 1 || j.Withdrawn[0].Site != "siteA" || j.Withdrawn[0].State.String() != "lost") {
			t.Fatalf("low: withdrawn %+v", j.Withdrawn)
		}
		if qos == "none" && j.Attempts != 1 {
			t.Fatalf("none: %d attempts, want 1 (never rerun)", j.Attempts)
		}
		var result []string
		for _, o := range j.Outputs {
			if filepath.Base(o) == "result.txt" {
				b, _ := os.ReadFile(o)
				result = append(result, strings.TrimSpace(string(b)))
			}
		}
		if wantRes := "done at " + strings.ToLower(strings.TrimSuffix(site, ":1")); len(result) != 1 || result[0] != wantRes {
			t.Fatalf("%s: result.txt %v (outputs %v), want %q", qos, result, j.Outputs, wantRes)
		}
	}
	// siteA's slurmctld back: nothing of these jobs stays active there.
	t.Logf("siteA restarted after %s", time.Since(t0).Round(100*time.Millisecond))
	defer func() { t.Logf("checked after %s", time.Since(t0).Round(100*time.Millisecond)) }()
	for end := time.Now().Add(30 * time.Second); ; {
		left := ""
		for k, v := range tb.squeue(t, 0) {
			if strings.HasPrefix(k, "gridsub:"+ids["low"]) || strings.HasPrefix(k, "gridsub:"+ids["none"]) {
				left += k + " " + v + "; "
			}
		}
		if left == "" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("still active at siteA 30s after its slurmctld came back: %s", left)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestRealSlurmQoSHighDaemonKilled: the daemon is SIGKILLed while both
// copies of a replicated job run; restarted on the same state, it ends the
// job exactly once, from the copy that succeeded, with no copy left
// running and nothing submitted twice.
func TestRealSlurmQoSHighDaemonKilled(t *testing.T) {
	tb := sharedTestbed(t)
	bin := buildBinary(t)
	d, err := os.MkdirTemp("", "gsqk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	cfg := tb.config(t, d, 2*time.Minute)
	p := startServe(t, bin, state, sock, "--config", cfg)
	c := api.NewUnixClient(sock)
	ctx := context.Background()
	j, err := c.Submit(ctx, bridge.Request{Name: "qos-kill", Command: []string{"/bin/sh", "-c",
		`if [ "$SLURM_CLUSTER_NAME" = siteb ]; then sleep 6; else sleep 120; fi`}, Nodes: 1, Estimate: 5 * time.Minute, QoS: "high"})
	if err != nil {
		t.Fatal(err)
	}
	tag0, tag1 := "gridsub:"+bridge.CopyTag(j.ID, 1, 0), "gridsub:"+bridge.CopyTag(j.ID, 1, 1)
	end := time.Now().Add(60 * time.Second)
	for {
		a, b := tb.squeue(t, 0), tb.squeue(t, 1)
		running := func(tag string) bool { return a[tag] == "RUNNING" || b[tag] == "RUNNING" }
		if running(tag0) && running(tag1) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("both copies not running after 60s: siteA %v siteB %v", a, b)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	startServe(t, bin, state, sock, "--config", cfg)
	var got *bridge.Job
	for end := time.Now().Add(60 * time.Second); ; {
		if got, err = c.Job(ctx, j.ID); err == nil && got.State.Final() {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("job not ended 60s after the restart: %+v %v", got, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	evs, err := c.Events(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	ends := 0
	for _, e := range evs {
		if e.Kind == "completed" || e.Kind == "failed" {
			ends++
		}
	}
	if got.State != bridge.Completed || ends != 1 || got.Sites() != "siteB:1" {
		t.Fatalf("job %s on %s, ended %d times", got.State, got.Sites(), ends)
	}
	// Nothing left running, nothing submitted twice (squeue -t all keeps
	// ended jobs for MinJobAge).
	n := 0
	for s := range tb.sites {
		for k, v := range tb.squeue(t, s) {
			if strings.HasPrefix(k, "gridsub:"+j.ID+"-") {
				t.Errorf("a copy is still in %s's squeue: %s %s", tb.sites[s].name, k, v)
			}
		}
		cmd := exec.Command("squeue", "-h", "-t", "all", "-o", "%k")
		cmd.Env = append(os.Environ(), "SLURM_CONF="+tb.sites[s].conf)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(out), "gridsub:"+j.ID+"-")
	}
	if n != 2 {
		t.Fatalf("%d remote jobs carry the job's tags, want 2 (one per copy)", n)
	}
}
