package main

import (
	"bytes"
	"context"
	"encoding/json"
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

// sweepExperiment is paper 001's figures 5-6 cut to three intervals (9 runs).
const sweepExperiment = "cmd/gridsub/testdata/sweep-paper001-fig5.yaml"

// TestSweepOnSlurmResumesAfterKill is the acceptance test of gridsub sim
// --on on the real SLURM testbed: a paper-001 figure swept over siteA and
// siteB through a real `gridsub serve` gives results.csv (and every table
// and plot) byte for byte as the local run, also when the daemon and the
// client are SIGKILLed mid-sweep and started again; the binary is staged
// once per site, every run is an element of one array per site and runs
// exactly once. It then times an uninterrupted sweep beside the local run
// (docs/sweeps.md).
func TestSweepOnSlurmResumesAfterKill(t *testing.T) {
	needSlurm(t)
	bin := buildBinary(t)
	root := t.TempDir()
	exp := filepath.Join(repoRoot, sweepExperiment)

	// The local run, in process.
	local := filepath.Join(root, "local")
	t0 := time.Now()
	if code, stdout, stderr := gridsub(t, "sim", sweepExperiment, "--out", local); code != 0 {
		t.Fatalf("local run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	localWall := time.Since(t0)

	cfg := sweepConfig(t, root, bin)
	state, sock := filepath.Join(root, "state"), filepath.Join(root, "gs.sock")
	d1 := startSweepDaemon(t, bin, cfg, state, sock)

	out := filepath.Join(root, "swept")
	c1 := startSweepClient(t, bin, cfg, sock, exp, out)
	ran := waitRuns(t, out, 1, 5*time.Minute, c1)
	// Both killed at once, mid-sweep: nothing may be lost or run twice.
	d1.cmd.Process.Kill()
	c1.cmd.Process.Kill()
	<-d1.done
	<-c1.done
	if ran >= 9 {
		t.Fatalf("all 9 runs were done before the kill; the test did not interrupt the sweep")
	}
	t.Logf("killed the daemon and the client with %d of 9 runs gathered", ran)

	d2 := startSweepDaemon(t, bin, cfg, state, sock)
	c2 := startSweepClient(t, bin, cfg, sock, exp, out)
	if err := waitClient(c2, 8*time.Minute); err != nil {
		t.Fatalf("resumed sweep: %v\nstdout:\n%s\nstderr:\n%s\ndaemon:\n%s", err, c2.stdout, c2.stderr, tail(d2.logs.String(), 4000))
	}
	if !strings.Contains(c2.stderr.String(), "resuming the sweep") {
		t.Errorf("the second client did not resume:\n%s", c2.stderr)
	}
	sameOutputs(t, local, out, 9)

	// Staged once per site, one array per site, every run one element
	// that completed once.
	st, err := loadSweepState(filepath.Join(out, sweepStateFile))
	if err != nil || st == nil {
		t.Fatalf("state: %v", err)
	}
	if len(st.Stage) != 2 || len(st.Arrays) != 2 {
		t.Fatalf("%d stage-in jobs and %d arrays, want one of each per site: %+v", len(st.Stage), len(st.Arrays), st)
	}
	c := api.NewUnixClient(sock)
	ctx := context.Background()
	all, err := c.ListAll(ctx, bridge.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	stages := 0
	for _, j := range all {
		if strings.HasPrefix(j.Req.Name, "sweep-stage-") {
			stages++
		}
	}
	if stages != 2 {
		t.Errorf("%d stage-in jobs in the daemon, want 2 (one per site)", stages)
	}
	seen, native := map[int]int{}, map[string]int{}
	for _, a := range st.Arrays {
		els, err := c.ListAll(ctx, bridge.Filter{Parent: a.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, el := range els {
			seen[el.Index]++
			// Ran once: one job directory of the element holds a run file. (A
			// daemon killed between an attempt's intent and its sbatch counts
			// that attempt as never sent after the restart's grace, so the
			// element may be at attempt 2 having run once.)
			scratch := os.Getenv("GRIDSUB_" + strings.ToUpper(a.Site) + "_SCRATCH")
			if ran, _ := filepath.Glob(filepath.Join(scratch, "gridsub", el.ID+"-a*", sweepRunFile)); len(ran) != 1 {
				t.Errorf("element %s ran %d times at %s: %v", el.ID, len(ran), a.Site, ran)
			}
			if el.State != bridge.Completed || len(el.Comps) != 1 || el.Comps[0].Site != a.Site {
				evs, _ := c.Events(ctx, el.ID)
				var lines []string
				for _, ev := range evs {
					lines = append(lines, ev.Time.Format("15:04:05.000")+" "+ev.Kind+" "+ev.Msg)
				}
				t.Errorf("element %s: %s, %d attempts, %+v (want completed at %s)\n%s", el.ID, el.State, el.Attempts, el.Comps, a.Site, strings.Join(lines, "\n"))
				continue
			}
			// siteA takes elements submitted together as a native array
			// (<array>_<index>; a lone one goes as a single job), siteB never.
			if strings.Contains(string(el.Comps[0].RemoteID), "_") {
				native[a.Site]++
			}
		}
	}
	if native["siteA"] == 0 || native["siteB"] != 0 {
		t.Errorf("elements run as native array elements per site: %v, want some at siteA, none at siteB", native)
	}
	for i := range 9 {
		if seen[i] != 1 {
			t.Errorf("run %d is %d elements, want 1", i, seen[i])
		}
	}
	// The elements linked the staged binary instead of receiving a copy,
	// and the sweep's cleanup jobs removed the staging area afterwards.
	for _, site := range []string{"siteA", "siteB"} {
		scratch := os.Getenv("GRIDSUB_" + strings.ToUpper(site) + "_SCRATCH")
		var links []string
		for _, a := range st.Arrays {
			if a.Site == site {
				m, _ := filepath.Glob(filepath.Join(scratch, "gridsub", a.ID+"_*-a*", "gridsub"))
				links = append(links, m...)
			}
		}
		if len(links) == 0 {
			t.Errorf("%s: no element directory holds gridsub", site)
		}
		for _, l := range links {
			target, err := os.Readlink(l)
			if err != nil || !strings.Contains(target, sweepArea+"/"+st.Key+"/gridsub") {
				t.Errorf("%s: %s is not a link to the staged binary: %q %v", site, l, target, err)
			}
		}
		id := st.Cleanup[site]
		if id == "" {
			t.Fatalf("%s: no cleanup job in the state: %+v", site, st.Cleanup)
		}
		waitJob(t, c, id, bridge.Completed, 3*time.Minute)
		if _, err := os.Stat(filepath.Join(scratch, sweepArea, st.Key)); !os.IsNotExist(err) {
			t.Errorf("%s: the staging area is still there after its cleanup job: %v", site, err)
		}
	}

	if os.Getenv("GRIDSUB_LONG") == "" {
		d2.term(t, sock)
		return
	}
	// GRIDSUB_LONG=1: an uninterrupted sweep, timed beside the local run
	// (docs/sweeps.md), with JSON progress.
	fresh := filepath.Join(root, "fresh")
	t1 := time.Now()
	c3 := startSweepClient(t, bin, cfg, sock, exp, fresh, "--on", "siteA,siteB", "--output", "json")
	if err := waitClient(c3, 8*time.Minute); err != nil {
		t.Fatalf("second sweep: %v\n%s\n%s", err, c3.stdout, c3.stderr)
	}
	sweepWall := time.Since(t1)
	sameOutputs(t, local, fresh, 9)
	var last struct{ Done, Total int }
	for _, l := range strings.Split(strings.TrimSpace(c3.stderr.String()), "\n") {
		if strings.HasPrefix(l, "{") {
			if err := json.Unmarshal([]byte(l), &last); err != nil {
				t.Errorf("progress line %q: %v", l, err)
			}
		}
	}
	if last.Done != 9 || last.Total != 9 {
		t.Errorf("last JSON progress %+v, want 9 of 9:\n%s", last, c3.stderr)
	}
	if st3, _ := loadSweepState(filepath.Join(fresh, sweepStateFile)); st3 != nil {
		t.Cleanup(func() {
			for _, site := range []string{"SITEA", "SITEB"} {
				os.RemoveAll(filepath.Join(os.Getenv("GRIDSUB_"+site+"_SCRATCH"), sweepArea, st3.Key))
			}
		})
	}
	t.Logf("paper001-fig5-6-small, 9 runs: local %s; swept on siteA+siteB (stage-in, 2 arrays) %s",
		localWall.Round(10*time.Millisecond), sweepWall.Round(10*time.Millisecond))
	d2.term(t, sock)
}

// sameOutputs: every file of the local run but summary.json (which holds
// wall times) is byte for byte in the sweep's directory, and summary.json's
// runs have the same metrics.
func sameOutputs(t *testing.T, local, swept string, runs int) {
	t.Helper()
	ents, err := os.ReadDir(local)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() || e.Name() == "summary.json" {
			continue
		}
		a, _ := os.ReadFile(filepath.Join(local, e.Name()))
		b, err := os.ReadFile(filepath.Join(swept, e.Name()))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs from the local run's (%v)", e.Name(), err)
		}
		n++
	}
	if n < 3 || !slices.ContainsFunc(ents, func(e os.DirEntry) bool { return e.Name() == "results.csv" }) {
		t.Fatalf("the local run wrote only %v", ents)
	}
	var sa, sb struct {
		Runs []struct {
			Index   int                `json:"index"`
			Metrics map[string]float64 `json:"metrics"`
		} `json:"runs"`
	}
	ja, _ := os.ReadFile(filepath.Join(local, "summary.json"))
	jb, _ := os.ReadFile(filepath.Join(swept, "summary.json"))
	if json.Unmarshal(ja, &sa) != nil || json.Unmarshal(jb, &sb) != nil || len(sa.Runs) != runs || len(sb.Runs) != runs {
		t.Fatalf("summary.json: %d and %d runs", len(sa.Runs), len(sb.Runs))
	}
	for i := range sa.Runs {
		for k, v := range sa.Runs[i].Metrics {
			if w := sb.Runs[i].Metrics[k]; w != v {
				t.Errorf("summary.json run %d %s: %v swept, %v local", i, k, w, v)
			}
		}
	}
}

// sweepConfig is configs/local-slurm.yaml with the test's input roots (the
// built binary, the repository), siteB without native arrays.
func sweepConfig(t *testing.T, root, bin string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "configs/local-slurm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "broker:\n", "broker:\n  input_roots: ["+filepath.Dir(bin)+", "+repoRoot+"]\n", 1)
	// siteA takes its array as a native SLURM array (the default), siteB
	// one sbatch per element.
	s = strings.Replace(s, "    partition: compute\n", "    partition: compute\n    native_arrays: false\n", 1)
	p := filepath.Join(root, "slurm.yaml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// sweepEnv is the environment with the testbed's variables and the test's
// daemon (TestMain points GRIDSUB_SOCKET elsewhere).
func sweepEnv(cfg, state, sock string) []string {
	env := slices.DeleteFunc(os.Environ(), func(e string) bool {
		for _, k := range []string{"GRIDSUB_CONFIG=", envStateDir + "=", envSocket + "=", envURL + "="} {
			if strings.HasPrefix(e, k) {
				return true
			}
		}
		return false
	})
	return append(env, "GRIDSUB_CONFIG="+cfg, envStateDir+"="+state, envSocket+"="+sock,
		"GRIDSUB_BROKER_OUTPUT_ROOT="+filepath.Dir(state))
}

func startSweepDaemon(t *testing.T, bin, cfg, state, sock string) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--log-format", "json")
	cmd.Env = sweepEnv(cfg, state, sock)
	p := &serveProc{cmd: cmd, logs: &logBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.done
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := api.NewUnixClient(sock).Health(context.Background()); err == nil {
			return p
		}
		select {
		case err := <-p.done:
			t.Fatalf("gridsub serve exited: %v\n%s", err, p.logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no daemon at %s after 60s\n%s", sock, p.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type sweepClient struct {
	cmd            *exec.Cmd
	stdout, stderr *logBuffer
	done           chan error
}

func startSweepClient(t *testing.T, bin, cfg, sock, exp, out string, args ...string) *sweepClient {
	t.Helper()
	if len(args) == 0 {
		args = []string{"--on", "siteA,siteB", "--limit", "2"}
	}
	cmd := exec.Command(bin, append([]string{"sim", exp, "--out", out, "--poll", "500ms", "--walltime", "10m"}, args...)...)
	cmd.Env = sweepEnv(cfg, filepath.Join(filepath.Dir(sock), "state"), sock)
	c := &sweepClient{cmd: cmd, stdout: &logBuffer{}, stderr: &logBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = c.stdout, c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGKILL)
			<-c.done
		}
	})
	return c
}

func waitClient(c *sweepClient, d time.Duration) error {
	select {
	case err := <-c.done:
		return err
	case <-time.After(d):
		c.cmd.Process.Kill()
		return <-c.done
	}
}

// waitRuns waits until at least n run files are in out/runs and returns
// how many there are.
func waitRuns(t *testing.T, out string, n int, d time.Duration, c *sweepClient) int {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		m, _ := filepath.Glob(filepath.Join(out, sweepRunsDir, "*.json"))
		if len(m) >= n {
			return len(m)
		}
		select {
		case err := <-c.done:
			t.Fatalf("the sweep client exited early: %v\n%s\n%s", err, c.stdout, c.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d run files after %s\n%s", len(m), d, c.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestSweepRetriesAKilledRun: the process of a run is killed at the site
// while it runs; the broker retries the element under QoS none and the
// sweep still gives the local run's results.csv byte for byte.
func TestSweepRetriesAKilledRun(t *testing.T) {
	needSlurm(t)
	bin := buildBinary(t)
	root := t.TempDir()
	const slow = "cmd/gridsub/testdata/sweep-paper001-slow.yaml"
	local := filepath.Join(root, "local")
	if code, stdout, stderr := gridsub(t, "sim", slow, "--out", local); code != 0 {
		t.Fatalf("local run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	cfg := sweepConfig(t, root, bin)
	state, sock := filepath.Join(root, "state"), filepath.Join(root, "gs.sock")
	d := startSweepDaemon(t, bin, cfg, state, sock)
	out := filepath.Join(root, "swept")
	c := startSweepClient(t, bin, cfg, sock, filepath.Join(repoRoot, slow), out, "--on", "siteB")
	scratch := os.Getenv("GRIDSUB_SITEB_SCRATCH")

	// The run's process at siteB (a child of the testbed's slurmd, on this
	// machine): found by its command line and its job directory.
	pid, deadline := 0, time.Now().Add(5*time.Minute)
	for pid == 0 {
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			b, _ := os.ReadFile(p)
			args := strings.Split(string(b), "\x00")
			if !slices.Contains(args, "--run-index") || !slices.Contains(args, "experiment.yaml") {
				continue
			}
			cwd, _ := os.Readlink(filepath.Join(filepath.Dir(p), "cwd"))
			if strings.HasPrefix(cwd, filepath.Join(scratch, "gridsub")+"/") && strings.HasSuffix(cwd, "_0-a1") {
				pid, _ = strconv.Atoi(filepath.Base(filepath.Dir(p)))
				break
			}
		}
		select {
		case err := <-c.done:
			t.Fatalf("the sweep ended before its run could be killed: %v\n%s\n%s", err, c.stdout, c.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never ran at siteB\n%s\n%s", c.stderr, tail(d.logs.String(), 4000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing the run (pid %d): %v", pid, err)
	}
	if err := waitClient(c, 6*time.Minute); err != nil {
		t.Fatalf("sweep: %v\nstdout:\n%s\nstderr:\n%s\ndaemon:\n%s", err, c.stdout, c.stderr, tail(d.logs.String(), 4000))
	}
	sameOutputs(t, local, out, 1)
	st, err := loadSweepState(filepath.Join(out, sweepStateFile))
	if err != nil || st == nil || len(st.Arrays) != 1 {
		t.Fatalf("state %+v: %v", st, err)
	}
	waitJob(t, api.NewUnixClient(sock), st.Cleanup["siteB"], bridge.Completed, 3*time.Minute)
	els, err := api.NewUnixClient(sock).ListAll(context.Background(), bridge.Filter{Parent: st.Arrays[0].ID})
	if err != nil || len(els) != 1 {
		t.Fatalf("elements %v: %v", els, err)
	}
	if el := els[0]; el.State != bridge.Completed || el.Attempts != 2 {
		t.Errorf("element %s: %s after %d attempts, want completed at the second", el.ID, el.State, el.Attempts)
	}
	d.term(t, sock)
}

// waitJob waits until job id ends, and requires state want.
func waitJob(t *testing.T, c *api.Client, id string, want bridge.JobState, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		j, err := c.Job(context.Background(), id)
		if err == nil && j.State.Final() {
			if j.State != want {
				t.Fatalf("job %s (%s) ended %s: %s", id, j.Req.Name, j.State, j.Reason)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not ended after %s (%v)", id, d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
