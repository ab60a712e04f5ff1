package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadmeFirstCommandPrintsHello: the README's first command,
// `gridsub examples/hello.yaml` with no configuration and a fresh home,
// runs /bin/echo on the default local site and prints its output.
func TestReadmeFirstCommandPrintsHello(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "examples"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, "examples", "hello.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "examples", "hello.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := []string{"GRIDSUB_CONFIG=", "HOME=" + home, "XDG_STATE_HOME=", envStateDir + "=", envSocket + "=" + filepath.Join(home, "none.sock")}
	code, stdout, stderr := runBin(t, bin, dir, env, "examples/hello.yaml")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if first, _, _ := strings.Cut(stdout, "\n"); first != "hello from gridsub" {
		t.Errorf("stdout begins %q, want the job's own output\n%s", first, stdout)
	}
	for _, want := range []string{"state      completed (exit 0)", "sites      local:1"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "on real sites (local ") {
		t.Errorf("the header does not name the local site:\n%s", stderr)
	}
	// Where the other backends put them: gridsub.out in the job directory
	// under the state directory, and among the fetched outputs.
	for _, glob := range []string{filepath.Join(home, ".local/state/gridsub/sites/local/*/gridsub.out"), filepath.Join(dir, "gridsub-out/*/gridsub.out")} {
		files, _ := filepath.Glob(glob)
		if len(files) != 1 {
			t.Fatalf("%s: %v", glob, files)
		}
		if b, _ := os.ReadFile(files[0]); string(b) != "hello from gridsub\n" {
			t.Errorf("%s: %q", files[0], b)
		}
	}
}

// localRun runs a job file through the embedded broker on the local
// configuration, in a state directory of its own; it returns the exit
// status and the JSON summary.
func localRun(t *testing.T, job string, args ...string) (int, jobJSON, string) {
	t.Helper()
	t.Setenv(envStateDir, t.TempDir())
	dir := t.TempDir()
	path := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(path, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run(append([]string{"--config", "local", path, "--output", "json", "--quiet", "--out-dir", filepath.Join(dir, "out")}, args...), &out, &errb)
	var j jobJSON
	if err := json.Unmarshal(out.Bytes(), &j); err != nil {
		t.Fatalf("exit %d, no JSON summary: %v\nstdout:\n%s\nstderr:\n%s", code, err, out.String(), errb.String())
	}
	return code, j, errb.String()
}

// TestLocalWalltimeKillIsTimeout: a job that outlives its walltime on the
// local site is killed and reported as timeout, once, with no retry the
// user did not ask for (qos none retries failures).
func TestLocalWalltimeKillIsTimeout(t *testing.T) {
	code, j, stderr := localRun(t, `name: sleepy
command: ["sleep", "120"]
resources: {nodes: 1, walltime: 2s}
scheduling: {qos: none}
`)
	if code != exitJobFailed || j.State != "timeout" || j.Attempts != 1 {
		t.Fatalf("exit %d, %s after %d attempt(s) (%s)\n%s", code, j.State, j.Attempts, j.Reason, stderr)
	}
	if j.Reason != "killed at its walltime of 2s at local" {
		t.Errorf("reason %q", j.Reason)
	}
}

// TestConfigOtherThanTheDaemons: a job whose --config names other sites
// than the running daemon's is refused with the reason, not sent to the
// daemon's sites; the daemon's own configuration and --embedded go ahead.
// gridsub sim refuses --config, which it would not read.
func TestConfigOtherThanTheDaemons(t *testing.T) {
	startInProcessDaemon(t) // the simulated testbed
	code, stdout, stderr := cli("--config", "sim-pair", filepath.Join(repoRoot, "examples/hello.yaml"))
	if code != exitUsage || stdout != "" {
		t.Fatalf("exit %d stdout %q, want %d and nothing", code, stdout, exitUsage)
	}
	for _, want := range []string{"runs the sites Beijing, Shanghai, Harbin", "names Nanjing, Wuhan", "nothing was sent", "--embedded"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if code, _, stderr := cli("--config", "testbed", "list"); code != 0 {
		t.Errorf("the daemon's own configuration: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := cli("--config", "testbed", "sim", "configs/experiments/ctc-easy-reference.yaml"); code != exitUsage ||
		!strings.Contains(stderr, "takes its sites from the experiment file") {
		t.Errorf("sim --config: exit %d\n%s", code, stderr)
	}
}

// waitFinal polls a daemon's job until it ended (generous deadline: the
// machine may be loaded).
func waitFinal(t *testing.T, id string) jobJSON {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, stdout, stderr := cli("status", id, "-o", "json")
		var j jobJSON
		if code == 0 || code == exitJobFailed {
			if err := json.Unmarshal([]byte(stdout), &j); err == nil && (j.State == "completed" || j.State == "failed" ||
				j.State == "cancelled" || j.State == "rejected" || j.State == "timeout") {
				return j
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not end: exit %d %s %s", id, code, stdout, stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDayOneFrictions walks what a new user tries against a daemon: the
// daemon's errors read as sentences, dependencies by short id and on the
// command line, cancel by name and state, list's columns, did-you-mean for
// --site and --state, logs and output of a group's parent and of a job
// cancelled before it ran, and SLURM verbs pointing at gridsub's commands.
func TestDayOneFrictions(t *testing.T) {
	startInProcessDaemon(t) // the simulated testbed
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	job := write("job.yaml", "name: one\ncommand: [/bin/true]\nresources: {nodes: 1, walltime: 1m}\nsimulate: {runtime: 10s}\n")

	// An unknown dependency: one sentence, the job file's field name, no
	// HTTP status, no doubled prefix, exit status 2.
	code, _, stderr := cli(job, "--afterok", "g999999")
	if code != exitUsage || !strings.HasPrefix(stderr, "gridsub: afterok[0]: no job \"g999999\"") ||
		strings.Contains(stderr, "HTTP") || strings.Contains(stderr, "gridsub daemon:") || strings.Contains(stderr, "AfterOK") ||
		strings.Contains(stderr, "bad request") {
		t.Errorf("unknown dependency: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := cli("status", "nosuchjob"); code != exitUsage || strings.Contains(stderr, "HTTP") || strings.Contains(stderr, "gridsub daemon:") {
		t.Errorf("unknown job: exit %d\n%s", code, stderr)
	}

	// A dependency by a shortened id, on the command line.
	code, stdout, stderr := cli(job, "-q")
	first := strings.TrimSpace(stdout)
	if code != 0 || first == "" {
		t.Fatalf("submit: exit %d %s", code, stderr)
	}
	code, stdout, stderr = cli(job, "-q", "--afterok", first[len(first)-6:])
	second := strings.TrimSpace(stdout)
	if code != 0 {
		t.Fatalf("--afterok by suffix: exit %d %s", code, stderr)
	}
	if j := waitFinal(t, second); j.State != "completed" {
		t.Errorf("the dependent job %s", j.State)
	}

	// list: nodes, elapsed and time limit; did-you-mean for --site and --state.
	code, stdout, _ = cli("list")
	if code != 0 || !strings.Contains(stdout, "NODES") || !strings.Contains(stdout, "ELAPSED") || !strings.Contains(stdout, "TIME_LIMIT") {
		t.Errorf("list columns:\n%s", stdout)
	}
	if code, _, stderr := cli("list", "--site", "Beijng"); code != exitUsage || !strings.Contains(stderr, `did you mean "Beijing"?`) {
		t.Errorf("--site Beijng: exit %d %s", code, stderr)
	}
	if code, _, stderr := cli("list", "--state", "runing"); code != exitUsage || !strings.Contains(stderr, `did you mean "running"?`) {
		t.Errorf("--state runing: exit %d %s", code, stderr)
	}

	// Cancel by name: every unfinished job of that name, and nothing else.
	long := write("long.yaml", "name: longone\ncommand: [/bin/true]\nresources: {nodes: 1, walltime: 10h}\nsimulate: {runtime: 9h}\n")
	var longIDs []string
	for range 2 {
		_, stdout, _ := cli(long, "-q")
		longIDs = append(longIDs, strings.TrimSpace(stdout))
	}
	code, stdout, stderr = cli("cancel", "--name", "longone")
	if code != 0 || strings.Count(stdout, " cancelled") != 2 {
		t.Fatalf("cancel --name: exit %d\n%s%s", code, stdout, stderr)
	}
	// Logs of a job cancelled before it ran say so (not "no such job").
	held := write("held.yaml", "name: heldone\ncommand: [/bin/true]\nresources: {nodes: 1, walltime: 1m}\n")
	_, stdout, _ = cli(long, "-q")
	blocker := strings.TrimSpace(stdout)
	_, stdout, _ = cli(held, "-q", "--afterok", blocker)
	h := strings.TrimSpace(stdout)
	if code, stdout, stderr := cli("cancel", "--state", "held"); code != 0 || !strings.Contains(stdout, h+" cancelled") {
		t.Fatalf("cancel --state held: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := cli("logs", h); code != 0 || !strings.Contains(stderr, "cancelled before it ran") {
		t.Errorf("logs of a job cancelled before it ran: exit %d %s", code, stderr)
	}
	cli("cancel", blocker)

	// Requeue a running job: stopped at its site, placed again; hold a
	// waiting one, release it.
	_, stdout, _ = cli(long, "-q")
	run1 := strings.TrimSpace(stdout)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, stdout, _ := cli("status", run1, "-o", "json")
		var j jobJSON
		if json.Unmarshal([]byte(stdout), &j) == nil && j.State == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never ran: %s", run1, stdout)
		}
	}
	if code, stdout, stderr := cli("hold", run1); code != exitUsage || !strings.Contains(stderr, "requeue it first") {
		t.Errorf("hold of a running job: exit %d %s %s", code, stdout, stderr)
	}
	if code, stdout, stderr := cli("requeue", run1); code != 0 || !strings.Contains(stdout, run1+" queued") {
		t.Fatalf("requeue: exit %d %s %s", code, stdout, stderr)
	}
	_, stdout, _ = cli(held, "-q", "--afterok", run1)
	h2 := strings.TrimSpace(stdout)
	if code, stdout, stderr := cli("hold", h2); code != 0 || !strings.Contains(stdout, h2+" held") {
		t.Fatalf("hold: exit %d %s %s", code, stdout, stderr)
	}
	if _, stdout, _ := cli("status", h2); !strings.Contains(stdout, "held by the user") {
		t.Errorf("status of a held job:\n%s", stdout)
	}
	if code, stdout, stderr := cli("release", h2); code != 0 || !strings.Contains(stdout, h2+" held") {
		t.Fatalf("release: exit %d %s %s", code, stdout, stderr)
	}
	if code, _, stderr := cli("release", h2); code != exitUsage || !strings.Contains(stderr, "not held by the user") {
		t.Errorf("second release: exit %d %s", code, stderr)
	}
	cli("cancel", run1, h2)

	// A sweep's parent: logs and outputs are its elements'.
	code, stdout, stderr = cli(filepath.Join(repoRoot, "examples/sweep.yaml"), "-q")
	sweep := strings.TrimSpace(stdout)
	if code != 0 {
		t.Fatalf("sweep: exit %d %s", code, stderr)
	}
	if j := waitFinal(t, sweep); j.State != "completed" {
		t.Fatalf("sweep %s", j.State)
	}
	if code, stdout, stderr := cli("logs", sweep); code != 0 || strings.Count(stdout, "==> "+sweep+"_") != 6 {
		t.Errorf("logs of the sweep: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr := cli("output", sweep); code != 0 || strings.Count(stdout, "gridsub.out") != 6 {
		t.Errorf("output of the sweep: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// SLURM and PBS verbs without a front-end point at gridsub's own
	// commands (squeue, scancel, qsub... are front-ends: fe_test.go).
	for verb, want := range map[string]string{"srun": "gridsub JOB.yaml", "sinfo": "gridsub sites", "pbsnodes": "gridsub sites", "salloc": "no interactive nodes"} {
		if code, _, stderr := cli(verb, "-u", "me"); code != exitUsage || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d %s", verb, code, stderr)
		}
	}
	// No doubled prefix on a flag error.
	if _, _, stderr := cli("--bogus"); !strings.HasPrefix(stderr, "gridsub: unknown flag: --bogus") {
		t.Errorf("flag error: %q", stderr)
	}
}

// TestLocalJobSurvivesDaemonKill: on the default local site, a job running
// when its daemon is SIGKILLed goes on; the restarted daemon re-attaches it
// (it is not run twice), and it completes with its output fetched.
func TestLocalJobSurvivesDaemonKill(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub and starts a daemon")
	}
	bin := buildBinary(t)
	dir, state, sock := serveDirs(t)
	t.Setenv(envSocket, sock)
	t.Setenv(envStateDir, state)
	mark := filepath.Join(dir, "runs")
	job := filepath.Join(dir, "job.yaml")
	src := "name: survivor\ncommand: [/bin/sh, -c, 'echo run >> \"$MARK\"; sleep 4; echo finished']\nenv: {MARK: " + mark + "}\nresources: {nodes: 1, walltime: 1m}\n"
	if err := os.WriteFile(job, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, bin, state, sock, "--config", "local")
	code, stdout, stderr := cli("--config", "local", job, "-q")
	id := strings.TrimSpace(stdout)
	if code != 0 || id == "" {
		t.Fatalf("submit: exit %d %s", code, stderr)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if b, _ := os.ReadFile(mark); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job never started\n%s", p.logs)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	startServe(t, bin, state, sock, "--config", "local")
	j := waitFinal(t, id)
	if j.State != "completed" {
		t.Fatalf("after the restart: %s (%s)", j.State, j.Reason)
	}
	if b, _ := os.ReadFile(mark); string(b) != "run\n" {
		t.Errorf("the job ran %d times: %q", strings.Count(string(b), "run"), b)
	}
	code, stdout, stderr = cli("logs", id)
	if code != 0 || stdout != "finished\n" {
		t.Errorf("logs after the restart: exit %d %q %s", code, stdout, stderr)
	}
}
