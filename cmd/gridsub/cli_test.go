package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/api"
)

// This file is the CLI's script suite: each case runs the real binary as a
// user would (argv in, exit status, stdout and stderr out), with no daemon
// or against one started for the suite (gridsub serve, a child process).

// binCase is one invocation of the binary and what it must do.
type binCase struct {
	name   string
	args   []string
	code   int
	stdout []string // each must appear (regexp)
	stderr []string // each must appear (regexp)
	empty  bool     // stdout must be empty
}

// runBin runs the binary from dir with env added to the environment the
// suite sets (no daemon unless the socket says so).
func runBin(t *testing.T, bin, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("%v: %v", args, err)
	return 0, "", ""
}

func (c binCase) check(t *testing.T, code int, stdout, stderr string) {
	t.Helper()
	if code != c.code {
		t.Errorf("%s: gridsub %s: exit %d, want %d\nstdout: %s\nstderr: %s", c.name, strings.Join(c.args, " "), code, c.code, stdout, stderr)
	}
	for _, re := range c.stdout {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("%s: stdout lacks /%s/:\n%s", c.name, re, stdout)
		}
	}
	for _, re := range c.stderr {
		if !regexp.MustCompile(re).MatchString(stderr) {
			t.Errorf("%s: stderr lacks /%s/:\n%s", c.name, re, stderr)
		}
	}
	if c.empty && stdout != "" {
		t.Errorf("%s: stdout %q, want nothing", c.name, stdout)
	}
}

// TestCLIScriptWithoutDaemon: did-you-mean, version, and the exit codes
// README documents for usage errors, through the real binary.
func TestCLIScriptWithoutDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	cases := []binCase{
		{name: "did-you-mean", args: []string{"lsit"}, code: exitUsage, empty: true,
			stderr: []string{`^gridsub: unknown command 'lsit'; did you mean 'list'\?`}},
		{name: "did-you-mean a swap", args: []string{"stauts"}, code: exitUsage, stderr: []string{`did you mean 'status'\?`}},
		{name: "did-you-mean below the root", args: []string{"store", "chek"}, code: exitUsage, stderr: []string{`unknown command 'chek' of gridsub store; did you mean 'check'\?`}},
		{name: "nothing close", args: []string{"xyzzy"}, code: exitUsage, stderr: []string{`unknown command 'xyzzy', and no job file of that name`}},
		{name: "missing job file", args: []string{"jobs/none.yaml"}, code: exitUsage, stderr: []string{`job file jobs/none.yaml: no such file`}},
		{name: "extra argument", args: []string{"status", "a", "b"}, code: exitUsage, stderr: []string{`gridsub status: accepts between 0 and 1 arg\(s\), received 2`}},
		{name: "missing argument of logs", args: []string{"logs"}, code: exitUsage},
		{name: "extra argument", args: []string{"list", "x"}, code: exitUsage},
		{name: "unknown flag", args: []string{"list", "--bogus"}, code: exitUsage, stderr: []string{`unknown flag: --bogus`}},
		{name: "unknown state", args: []string{"list", "--state", "bogus"}, code: exitUsage,
			stderr: []string{`--state: no state "bogus" \(valid: held, queued, reserved, submitting, dispatched, running, completed, failed, timeout, cancelled, rejected\)`}},
		{name: "misspelt state", args: []string{"list", "--state", "runing"}, code: exitUsage, stderr: []string{`no state "runing"; did you mean "running"\?`}},
		{name: "no daemon", args: []string{"status", "000001"}, code: exitInternal, stderr: []string{`no gridsub daemon answers`}},
		{name: "version", args: []string{"version"}, code: exitOK, stdout: []string{`^gridsub \S+ \(commit (devel|[0-9a-f]{12}(\+modified)?), go1\.\d+`}},
		{name: "--version", args: []string{"--version"}, code: exitOK, stdout: []string{`^gridsub \S+ \(commit `}},
		{name: "version json", args: []string{"version", "-o", "json"}, code: exitOK, stdout: []string{`"commit": "`}},
	}
	for _, c := range cases {
		code, stdout, stderr := runBin(t, bin, dir, nil, c.args...)
		c.check(t, code, stdout, stderr)
	}
	// --version and version say the same, and name the commit Go stamped
	// into the binary when it did (a build in a git checkout).
	_, v1, _ := runBin(t, bin, dir, nil, "--version")
	_, v2, _ := runBin(t, bin, dir, nil, "version")
	if v1 != v2 {
		t.Errorf("--version %q, version %q", v1, v2)
	}
	if m, err := exec.Command("go", "version", "-m", bin).Output(); err == nil {
		if rev := regexp.MustCompile(`vcs\.revision=([0-9a-f]{40})`).FindSubmatch(m); rev != nil && !strings.Contains(v2, string(rev[1][:12])) {
			t.Errorf("version %q does not name the stamped commit %s", v2, rev[1])
		}
	}
	// A word that is an existing file is a job file, even if it is close
	// to a command.
	if err := os.WriteFile(filepath.Join(dir, "lsit"), []byte("name: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runBin(t, bin, dir, nil, "lsit")
	if code != exitUsage || strings.Contains(stderr, "did you mean") || !strings.Contains(stderr, "lsit") {
		t.Errorf("an existing file lsit: exit %d %q; want it read as a job file (and refused as one)", code, stderr)
	}
}

// TestCLIScriptWithDaemon: short ids, --state reserved, logs -f, times on
// the simulated clock marked, Ctrl-C during --wait, against a real daemon.
func TestCLIScriptWithDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := buildBinary(t)
	d := t.TempDir()
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	p := startServe(t, bin, state, sock, "--time-scale", "600")
	env := []string{envStateDir + "=" + state, envSocket + "=" + sock}
	examples := filepath.Join(repoRoot, "examples")
	gs := func(args ...string) (int, string, string) { return runBin(t, bin, d, env, args...) }

	// Two jobs: ids g<...>-000001 and -000002.
	var ids []string
	for range 2 {
		code, stdout, stderr := gs(filepath.Join(examples, "hello.yaml"))
		if code != 0 {
			t.Fatalf("submit: %d %s %s", code, stdout, stderr)
		}
		ids = append(ids, strings.TrimSpace(stdout))
	}
	prefix := ids[0][:strings.LastIndexByte(ids[0], '-')+1] // common to both
	for _, c := range []binCase{
		{name: "suffix", args: []string{"status", "000002"}, code: exitOK, stdout: []string{`summary of ` + ids[1]}},
		{name: "short suffix", args: []string{"status", "1"}, code: exitOK, stdout: []string{`summary of ` + ids[0]}},
		{name: "prefix", args: []string{"events", ids[1][:len(ids[1])-1]}, code: exitUsage,
			stderr: []string{`ambiguous: matches ` + ids[0] + `, ` + ids[1]}},
		{name: "ambiguous", args: []string{"status", prefix}, code: exitUsage, empty: true,
			stderr: []string{`"` + prefix + `" is ambiguous: matches ` + ids[0] + `, ` + ids[1]}},
		{name: "no match", args: []string{"status", "zz9"}, code: exitUsage, empty: true, stderr: []string{`no job matches "zz9"`}},
		{name: "watch by suffix", args: []string{"watch", "-q", "000001"}, code: exitOK, stdout: []string{`state      completed \(exit 0\)`}},
		{name: "logs by suffix", args: []string{"logs", "000001"}, code: exitOK,
			stdout: []string{`^\[gridsub sim\] hello: /bin/echo hello from gridsub started on \w+ nodes 1 at `, `ran on \w+ nodes 1 from .* exit 0\n$`}},
		{name: "list marks the sim clock", args: []string{"list"}, code: exitOK, stdout: []string{`\d\d:\d\d:\d\d \(sim\)`}},
		{name: "output --cat has headers", args: []string{"output", "--cat", "000001"}, code: exitOK,
			stdout: []string{`(?m)^==> \S+/` + ids[0] + `/gridsub\.out <==$`, `(?m)^==> \S+/gridsub\.err <==$`}},
	} {
		code, stdout, stderr := gs(c.args...)
		c.check(t, code, stdout, stderr)
	}

	// An advance reservation is listed as reserved and found by --state reserved.
	code, stdout, stderr := gs(filepath.Join(examples, "reservation.yaml"))
	resv := strings.TrimSpace(stdout)
	if code != 0 {
		t.Fatalf("reservation: %d %s %s", code, stdout, stderr)
	}
	if code, stdout, _ := gs("list", "--state", "reserved", "-o", "json"); code != 0 || !strings.Contains(stdout, `"id": "`+resv+`"`) {
		if j := jobState(t, sock, resv); j == "reserved" {
			t.Errorf("list --state reserved: exit %d %s; the job is reserved", code, stdout)
		}
	}

	// logs -f follows a running job to its end: the start line comes
	// first, the end line later, then it returns 0 by itself.
	long := filepath.Join(d, "long.yaml")
	if err := os.WriteFile(long, []byte("name: slow\ncommand: [/bin/true]\nresources: {nodes: 1, walltime: 3h}\nsimulate: {runtime: 40m}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = gs(long)
	slow := strings.TrimSpace(stdout)
	if code != 0 {
		t.Fatal(code)
	}
	start := time.Now()
	code, stdout, stderr = gs("logs", "-f", slow)
	if code != 0 || !strings.Contains(stdout, "started on") || !strings.HasSuffix(stdout, "exit 0\n") || strings.Count(stdout, "\n") != 2 {
		t.Fatalf("logs -f: exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
	if el := time.Since(start); el < 2*time.Second {
		t.Errorf("logs -f returned after %s; a 40-minute job at scale 600 runs 4 s: it did not follow", el)
	}

	// Ctrl-C during --wait: exit 130, the job left running and said so.
	cmd := exec.Command(bin, long, "--wait")
	cmd.Dir, cmd.Env = d, append(os.Environ(), env...)
	var errLog logBuffer // written by exec's copying goroutine while the test reads it
	cmd.Stderr = &errLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(string(errLog.Bytes()), "in the daemon at") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted || !strings.Contains(string(errLog.Bytes()), "goes on in the daemon") {
		t.Fatalf("Ctrl-C during --wait: %v\n%s", err, string(errLog.Bytes()))
	}
	id := regexp.MustCompile(`is (g\S+-\d{6}) in the daemon`).FindStringSubmatch(string(errLog.Bytes()))
	if id == nil {
		t.Fatalf("no id in %q", string(errLog.Bytes()))
	}
	if st := jobState(t, sock, id[1]); st == "cancelled" || st == "failed" {
		t.Errorf("after Ctrl-C of --wait the job is %s; it must go on", st)
	}

	// --dry-run (h-placement's): places without submitting, when present.
	if _, help, _ := gs("submit", "--help"); strings.Contains(help, "--dry-run") {
		_, before, _ := gs("list", "-o", "json")
		code, stdout, stderr := gs("submit", "--dry-run", filepath.Join(examples, "hello.yaml"))
		_, after, _ := gs("list", "-o", "json")
		// Jobs may change state meanwhile; a dry run must add none.
		nb, na := strings.Count(before, `"id":`), strings.Count(after, `"id":`)
		if code != 0 || !strings.Contains(stdout+stderr, "dry run (nothing submitted)") || nb != na {
			t.Errorf("--dry-run: exit %d, %s %s; %d jobs before, %d after", code, stdout, stderr, nb, na)
		}
	} else {
		t.Log("TODO(lead): gridsub submit --dry-run is not in this branch (h-placement adds it); this case runs once it is")
	}
	p.term(t, sock)
}

// jobState asks the daemon for a job's state directly (API).
func jobState(t *testing.T, sock, id string) string {
	t.Helper()
	j, err := api.NewUnixClient(sock).Job(context.Background(), id)
	if err != nil {
		t.Fatalf("job %s: %v", id, err)
	}
	return string(j.State)
}

// TestReadBuildInfo: the -X main.commit fallback names the commit when Go
// stamped none; a binary without either says devel.
func TestReadBuildInfo(t *testing.T) {
	bi := readBuildInfo()
	if bi.Commit == "" || bi.Go == "" || !strings.Contains(bi.String(), "(commit ") {
		t.Fatalf("%+v", bi)
	}
	old := commit
	t.Cleanup(func() { commit = old })
	commit = "0123456789abcdef0123"
	if bi := readBuildInfo(); bi.Commit != commit || !strings.Contains(bi.String(), "commit 0123456789ab") {
		t.Fatalf("with -X main.commit: %+v %s", bi, bi.String())
	}
}

func TestSuggest(t *testing.T) {
	root := newRoot(&bytes.Buffer{}, &bytes.Buffer{})
	for word, want := range map[string][]string{"lsit": {"list"}, "stauts": {"status"}, "hist": {"history"},
		"cancle": {"cancel"}, "xyzzy": nil, "servce": {"serve"}} {
		if got := suggest(root, word); !slices.Equal(got, want) {
			t.Errorf("suggest(%q) = %v, want %v", word, got, want)
		}
	}
}

// TestStateCompletion: --state completes from the one list of states,
// item by item.
func TestStateCompletion(t *testing.T) {
	code, stdout, _ := cli("__complete", "list", "--state", "running,re")
	if code != 0 || !strings.Contains(stdout, "running,reserved\n") || !strings.Contains(stdout, "running,rejected\n") || strings.Contains(stdout, "queued") {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	code, stdout, _ = cli("__complete", "")
	if code != 0 || !strings.Contains(stdout, "yaml") || !strings.Contains(stdout, "logs") || !strings.Contains(stdout, ":8") {
		t.Fatalf("root completion (commands and *.yaml files, directive FilterFileExt=8): exit %d\n%s", code, stdout)
	}
}
