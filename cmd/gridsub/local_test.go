package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if !strings.Contains(j.Reason, "killed at its walltime at local") {
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
