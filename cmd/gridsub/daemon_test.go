package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/internal/config"
	"github.com/gridsub/gridsub/simbackend/sshsite"
)

// TestMain points every test at a socket where no daemon runs, so a daemon
// the developer happens to run does not take the tests' jobs (the tests
// that want a daemon start their own), and at the simulated testbed unless
// GRIDSUB_CONFIG names another configuration.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "simsite" && os.Args[2] == "cmd" {
		os.Exit(sshsite.CmdMain(os.Args[3:])) // the batch commands of simsite_test.go's sites
	}
	d, err := os.MkdirTemp("", "gsnone")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv(envStateDir, filepath.Join(d, "state"))
	// The tests were written for the simulated testbed, gridsub's default
	// before the local site; the ones about the default unset it.
	if os.Getenv("GRIDSUB_CONFIG") == "" {
		os.Setenv("GRIDSUB_CONFIG", "testbed")
	}
	os.Setenv(envSocket, filepath.Join(d, "nobody.sock"))
	os.Unsetenv(envURL)
	code := m.Run()
	os.RemoveAll(d)
	if builtBinary != "" {
		os.RemoveAll(filepath.Dir(builtBinary))
	}
	os.Exit(code)
}

// cli runs the CLI in process (from the current directory).
func cli(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestClientCommandsNeedADaemon(t *testing.T) {
	sock := os.Getenv(envSocket)
	for _, args := range [][]string{{"list"}, {"status", "g000001"}, {"watch", "g000001"}, {"events", "g000001"},
		{"cancel", "g000001"}, {"history"}} {
		code, stdout, stderr := cli(args...)
		if code != exitInternal || stdout != "" {
			t.Errorf("%v: exit %d stdout %q, want exit %d and nothing on stdout", args, code, stdout, exitInternal)
		}
		for _, want := range []string{"no gridsub daemon answers at " + sock, "gridsub serve &"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%v: stderr %q lacks %q", args, stderr, want)
			}
		}
	}
}

// serveProc is `gridsub serve` running as a child process.
type serveProc struct {
	cmd  *exec.Cmd
	logs *logBuffer
	done chan error
}

// logBuffer is a daemon's stderr as it is written: exec's copying goroutine
// writes while a test reads, so every access holds the lock.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// Bytes returns a copy of what was written so far.
func (l *logBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

func (l *logBuffer) String() string { return string(l.Bytes()) }

// buildBinary builds gridsub once per test binary run.
var builtBinary string

func buildBinary(t *testing.T) string {
	t.Helper()
	if builtBinary != "" {
		return builtBinary
	}
	dir, err := os.MkdirTemp("", "gsbin")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "gridsub")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	builtBinary = bin
	return bin
}

func startServe(t *testing.T, bin, state, sock string, args ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--log-format", "json"}, args...)...)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, "GRIDSUB_") && !strings.HasPrefix(e, envCPUProfile+"=") && !strings.HasPrefix(e, envMemProfile+"=")
	}), envStateDir+"="+state, envSocket+"="+sock, "GRIDSUB_CONFIG="+os.Getenv("GRIDSUB_CONFIG"),
		// The tests' --out-dir are beside the state directory.
		config.EnvName("broker.output_root")+"="+filepath.Dir(state))
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
	deadline := time.Now().Add(20 * time.Second)
	for {
		if fi, err := os.Lstat(sock); err == nil && fi.Mode()&fs.ModeSocket != 0 {
			if _, err := api.NewUnixClient(sock).Health(context.Background()); err == nil {
				return p // this daemon answers (not a stale socket of a killed one)
			}
		}
		select {
		case err := <-p.done:
			t.Fatalf("gridsub serve exited: %v\n%s", err, p.logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket at %s after 20s\n%s", sock, p.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// term sends SIGTERM and waits for a clean exit.
func (p *serveProc) term(t *testing.T, sock string) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("gridsub serve after SIGTERM: %v\n%s", err, p.logs)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("gridsub serve did not stop within 15s of SIGTERM\n%s", p.logs)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket %s still there after SIGTERM: %v", sock, err)
	}
	var msgs []string
	sc := bufio.NewScanner(bytes.NewReader(p.logs.Bytes()))
	for sc.Scan() {
		var rec struct{ Msg string }
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Errorf("log line is not JSON: %q", sc.Text())
			continue
		}
		msgs = append(msgs, rec.Msg)
	}
	for _, want := range []string{"recovered", "serving", "shutting down", "stopped"} {
		if !slices.Contains(msgs, want) {
			t.Errorf("logs lack %q: %v", want, msgs)
		}
	}
}

type listedJob struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	State string `json:"state"`
	Sites []struct {
		Site  string `json:"site"`
		Nodes int    `json:"nodes"`
	} `json:"sites"`
	ExitCode *int     `json:"exit_code"`
	Outputs  []string `json:"outputs"`
}

func TestServeAndClients(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := buildBinary(t)
	t.Chdir("../..")
	d, err := os.MkdirTemp("", "gss")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	t.Setenv(envSocket, sock)
	p := startServe(t, bin, state, sock, "--time-scale", "3000")
	out := filepath.Join(d, "out")

	// Without --wait: the id at once.
	code, stdout, stderr := cli("examples/hello.yaml", "--out-dir", out)
	id1 := strings.TrimSpace(stdout)
	if code != 0 || !regexp.MustCompile(`^g[0-9a-z]+-\d{6}$`).MatchString(id1) {
		t.Fatalf("submit to the daemon: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "gridsub watch "+id1) {
		t.Errorf("stderr does not say how to follow: %q", stderr)
	}
	// With --wait: followed to the end, JSON summary, outputs fetched.
	code, stdout, stderr = cli("submit", "examples/hello.yaml", "--wait", "--out-dir", out, "-o", "json")
	var j listedJob
	if err := json.Unmarshal([]byte(stdout), &j); err != nil || code != 0 {
		t.Fatalf("submit --wait: exit %d, %v\nstdout %s\nstderr %s", code, err, stdout, stderr)
	}
	if j.State != "completed" || j.ExitCode == nil || *j.ExitCode != 0 || len(j.Outputs) == 0 ||
		!strings.HasPrefix(j.Outputs[0], filepath.Join(out, j.ID)+"/") {
		t.Fatalf("submit --wait: %+v", j)
	}
	if !strings.Contains(stderr, "placement:") || !strings.Contains(stderr, "completed") {
		t.Errorf("no progress on stderr: %q", stderr)
	}

	code, stdout, _ = cli("output", j.ID)
	if code != 0 || strings.TrimSpace(stdout) != strings.Join(j.Outputs, "\n") {
		t.Errorf("output: exit %d %q, want %q", code, stdout, j.Outputs)
	}
	code, stdout, _ = cli("output", j.ID, "--cat")
	if code != 0 || !strings.Contains(stdout, "gridsub sim") {
		t.Errorf("output --cat: exit %d %q", code, stdout)
	}
	// watch the first one to its end.
	code, stdout, stderr = cli("watch", id1)
	if code != 0 || !strings.Contains(stdout, "state      completed (exit 0)") {
		t.Fatalf("watch: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// A long job to cancel.
	long := filepath.Join(d, "long.yaml")
	os.WriteFile(long, []byte("name: long\ncommand: [/bin/sleep, '1000']\nresources: {nodes: 2, walltime: 100h}\n"), 0o644)
	code, stdout, stderr = cli("submit", long, "-o", "json")
	var lj listedJob
	if err := json.Unmarshal([]byte(stdout), &lj); err != nil || code != 0 || lj.State != "queued" {
		t.Fatalf("submit long: exit %d %v %s %s", code, err, stdout, stderr)
	}

	if code, _, stderr := cli("output", lj.ID); code != exitJobFailed || !strings.Contains(stderr, "outputs are fetched when it ends") {
		t.Errorf("output of a queued job: exit %d %q", code, stderr)
	}
	code, stdout, _ = cli("list", "-o", "json")
	var all []listedJob
	if err := json.Unmarshal([]byte(stdout), &all); err != nil || code != 0 || len(all) != 3 {
		t.Fatalf("list -o json: exit %d %v\n%s", code, err, stdout)
	}
	if all[0].ID != id1 || all[0].Name != "hello" || all[0].State != "completed" || len(all[0].Sites) != 1 || all[2].Name != "long" {
		t.Fatalf("list -o json: %+v", all)
	}
	code, stdout, _ = cli("list", "--state", "completed", "--name", "hello")
	if code != 0 || strings.Count(stdout, "hello") != 2 || strings.Contains(stdout, "long") {
		t.Fatalf("list --state completed --name hello: %d\n%s", code, stdout)
	}
	code, stdout, _ = cli("list", "--site", all[0].Sites[0].Site, "--limit", "1")
	if code != 0 || !strings.Contains(stdout, id1) || strings.Count(stdout, "\n") != 2 {
		t.Fatalf("list --site --limit 1: %d\n%s", code, stdout)
	}
	if code, _, stderr := cli("list", "--state", "bogus"); code != exitUsage || !strings.Contains(stderr, "valid:") {
		t.Errorf("list --state bogus: exit %d %q", code, stderr)
	}
	code, stdout, _ = cli("status", id1)
	if code != 0 || !strings.Contains(stdout, "summary of "+id1) || !strings.Contains(stdout, "completed") {
		t.Errorf("status: %d\n%s", code, stdout)
	}
	if code, _, stderr := cli("status", "g999999"); code != exitUsage || !strings.Contains(stderr, "no such job") {
		t.Errorf("status of an unknown id: exit %d %q", code, stderr)
	}
	code, stdout, _ = cli("events", id1)
	if code != 0 || !strings.Contains(stdout, "submitted-remote") || !strings.Contains(stdout, "completed") {
		t.Errorf("events: %d\n%s", code, stdout)
	}
	code, stdout, _ = cli("events", id1, "-o", "json")
	var evs []struct{ Kind string }
	if err := json.Unmarshal([]byte(stdout), &evs); err != nil || code != 0 || len(evs) < 4 || evs[0].Kind != "submitted" {
		t.Errorf("events -o json: %d %v %s", code, err, stdout)
	}
	code, stdout, _ = cli("cancel", lj.ID)
	if code != 0 || strings.TrimSpace(stdout) != lj.ID+" cancelled" {
		t.Errorf("cancel: %d %q", code, stdout)
	}
	if code, _, stderr := cli("cancel", lj.ID); code != exitJobFailed || !strings.Contains(stderr, "already ended") {
		t.Errorf("second cancel: exit %d %q", code, stderr)
	}
	code, stdout, _ = cli("history", "-o", "json")
	var hist []listedJob
	if err := json.Unmarshal([]byte(stdout), &hist); err != nil || code != 0 || len(hist) != 3 || hist[2].State != "cancelled" {
		t.Errorf("history: %d %v %s", code, err, stdout)
	}
	// The last two, still oldest first: the newest-first page turned back.
	code, stdout, _ = cli("history", "--limit", "2", "-o", "json")
	var last2 []listedJob
	if err := json.Unmarshal([]byte(stdout), &last2); err != nil || code != 0 || len(last2) != 2 || len(hist) != 3 ||
		last2[0].ID != hist[1].ID || last2[1].ID != hist[2].ID {
		t.Errorf("history --limit 2: %d %v %s; want the last two of %v", code, err, stdout, hist)
	}
	if code, _, stderr := cli("history", "--state", "running"); code != exitUsage || !strings.Contains(stderr, "not a final state") {
		t.Errorf("history --state running: exit %d %q", code, stderr)
	}
	// Shell completion of job ids asks the daemon.
	code, stdout, _ = cli("__complete", "status", "g")
	if code != 0 || !strings.Contains(stdout, id1+"\thello completed") || !strings.Contains(stdout, lj.ID+"\tlong cancelled") {
		t.Errorf("completion of job ids: %d\n%s", code, stdout)
	}
	// --embedded runs here, not in the daemon.
	code, stdout, _ = cli("examples/hello.yaml", "--embedded", "--out-dir", filepath.Join(d, "emb"), "-q")
	if code != 0 || !strings.Contains(stdout, "state      completed (exit 0)") {
		t.Errorf("--embedded: %d\n%s", code, stdout)
	}
	if _, stdout, _ := cli("list"); strings.Count(stdout, "\n") != 4 {
		t.Errorf("the embedded run reached the daemon:\n%s", stdout)
	}

	p.term(t, sock)
	if code, _, stderr := cli("list"); code != exitInternal || !strings.Contains(stderr, "no gridsub daemon answers") {
		t.Errorf("list after SIGTERM: %d %q", code, stderr)
	}
	// Without the daemon the job file runs on the embedded broker as before.
	code, stdout, _ = cli("examples/hello.yaml", "--out-dir", filepath.Join(d, "emb"), "-q")
	if code != 0 || !strings.Contains(stdout, "state      completed (exit 0)") {
		t.Errorf("without a daemon: %d\n%s", code, stdout)
	}

	// Restarted on the same state directory, it knows every job.
	p = startServe(t, bin, state, sock)
	code, stdout, _ = cli("list", "-o", "json")
	var again []listedJob
	if err := json.Unmarshal([]byte(stdout), &again); err != nil || code != 0 || len(again) != 3 {
		t.Fatalf("list after restart: %d %v %s", code, err, stdout)
	}
	for i := range again {
		if again[i].ID != all[i].ID || again[i].Name != all[i].Name {
			t.Errorf("after restart job %d is %+v, was %+v", i, again[i], all[i])
		}
	}
	if code, stdout, _ := cli("status", id1, "-o", "json"); code != 0 || !strings.Contains(stdout, `"state": "completed"`) {
		t.Errorf("status after restart: %d %s", code, stdout)
	}
	// Advance reservations: admitted or refused at once, listed.
	code, stdout, stderr = cli("examples/reservation.yaml")
	resv := strings.TrimSpace(stdout)
	if code != 0 || !strings.Contains(stderr, "advance reservation admitted") {
		t.Fatalf("reservation: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	big := filepath.Join(d, "big.yaml")
	if err := os.WriteFile(big, []byte("name: big\ncommand: [\"true\"]\nresources: {nodes: 200, walltime: 10m}\nscheduling:\n  reservation: {earliest_start: +15m, latest_end: +45m}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = cli(big)
	refused := strings.TrimSpace(stdout)
	if code != exitJobFailed || !strings.Contains(stderr, "rejected: reservation not admitted: no candidate resource") {
		t.Fatalf("refused reservation: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = cli("reservations", "--all", "-o", "json")
	var rs []api.Reservation
	if err := json.Unmarshal([]byte(stdout), &rs); err != nil || code != 0 || len(rs) != 2 ||
		rs[0].Job != resv || rs[0].State != "admitted" || rs[1].Job != refused || rs[1].State != "failed" || rs[1].Reason == "" {
		t.Fatalf("reservations --all: exit %d, %v: %s", code, err, stdout)
	}
	p.term(t, sock)
}

func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__start_gridsub", "zsh": "#compdef gridsub", "fish": "complete -c gridsub"} {
		code, stdout, stderr := cli("completion", shell)
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("completion %s: exit %d, %d bytes, lacks %q; %s", shell, code, len(stdout), want, stderr)
		}
	}
}

// TestCLIDocsUpToDate fails when docs/cli is not what the commands
// generate: run `go run ./cmd/gridsub gen-docs` after changing a command.
func TestCLIDocsUpToDate(t *testing.T) {
	dir := t.TempDir()
	if err := genDocs(dir); err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	have, _ := filepath.Glob(filepath.Join("..", "..", docsDir, "*.md"))
	base := func(ps []string) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = filepath.Base(p)
		}
		return out
	}
	if !slices.Equal(base(want), base(have)) {
		t.Fatalf("docs/cli has %v, the commands generate %v; run `go run ./cmd/gridsub gen-docs`", base(have), base(want))
	}
	for _, p := range want {
		w, _ := os.ReadFile(p)
		h, _ := os.ReadFile(filepath.Join("..", "..", docsDir, filepath.Base(p)))
		if !bytes.Equal(w, h) {
			t.Errorf("docs/cli/%s is stale; run `go run ./cmd/gridsub gen-docs`", filepath.Base(p))
		}
	}
	if len(want) < 10 {
		t.Errorf("only %d pages generated", len(want))
	}
}
