package killtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// Knobs (environment variables) and their defaults.
const (
	envJobs    = "GRIDSUB_KILLTEST_JOBS"    // jobs to run (default 1000)
	envKills   = "GRIDSUB_KILLTEST_KILLS"   // SIGKILLs (default 20)
	envSeed    = "GRIDSUB_KILLTEST_SEED"    // seed of the kill moments (default 5)
	envSpan    = "GRIDSUB_KILLTEST_SPAN"    // how long the submissions are spread over (default 15s)
	envTimeout = "GRIDSUB_KILLTEST_TIMEOUT" // bound on the whole run after the build (default 9m)
	envStall   = "GRIDSUB_KILLTEST_STALL"   // fail when no job becomes final for this long at the end (default 90s)
	envKeep    = "GRIDSUB_KILLTEST_KEEP"    // 1: keep the remote job directories, state and logs; 0: remove them even after a failure

	defJobs    = 1000
	defKills   = 20
	defSeed    = 5
	defSpan    = 15 * time.Second
	defTimeout = 8 * time.Minute
	defStall   = 90 * time.Second
)

// The sites of configs/local-slurm.yaml and the testbed variables that
// describe them.
var sites = []struct{ name, env string }{{"siteA", "SITEA"}, {"siteB", "SITEB"}}

func needTestbed(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the kill test runs a daemon on the real SLURM testbed for minutes")
	}
	if os.Getenv("GRIDSUB_SSH_KEY") == "" || os.Getenv("GRIDSUB_SITEA_SSH_PORT") == "" {
		t.Skip("no SLURM testbed: run `bash scripts/slurm-testbed.sh start && source /var/tmp/gridsub-local-testbed/testbed.env` (scripts/test.sh does both)")
	}
	for _, s := range sites {
		for _, v := range []string{"GRIDSUB_" + s.env + "_SCRATCH", "GRIDSUB_" + s.env + "_SSH_PORT", "GRIDSUB_" + s.env + "_JOBCOMP"} {
			if os.Getenv(v) == "" {
				t.Skipf("the testbed environment lacks %s (source /var/tmp/gridsub-local-testbed/testbed.env)", v)
			}
		}
		// The job directories are checked on the local file system: the
		// testbed runs on this machine.
		if fi, err := os.Stat(os.Getenv("GRIDSUB_" + s.env + "_SCRATCH")); err != nil || !fi.IsDir() {
			t.Skipf("%s's scratch directory %s is not on this machine (%v); the kill test reads the job directories locally",
				s.name, os.Getenv("GRIDSUB_"+s.env+"_SCRATCH"), err)
		}
	}
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a whole number >= 0", name, v)
	}
	return n
}

func envDur(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive Go duration such as 90s or 5m", name, v)
	}
	return d
}

// daemon is one run of `gridsub serve` as a child process.
type daemon struct {
	run     int
	cmd     *exec.Cmd
	logPath string
	done    chan error
	exited  atomic.Bool
}

// harness holds what every run of the daemon shares.
type harness struct {
	t        *testing.T
	bin, cfg string
	state    string
	sock     string
	logDir   string
	c        *api.Client
	runs     []*daemon
}

func (h *harness) start(ctx context.Context) *daemon {
	h.t.Helper()
	run := len(h.runs)
	d := &daemon{run: run, logPath: filepath.Join(h.logDir, fmt.Sprintf("run-%02d.log", run)), done: make(chan error, 1)}
	lf, err := os.Create(d.logPath)
	if err != nil {
		h.t.Fatal(err)
	}
	d.cmd = exec.Command(h.bin, "--config", h.cfg, "serve", "--log-format", "json")
	d.cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool {
		for _, k := range []string{"GRIDSUB_STATE_DIR=", "GRIDSUB_SOCKET=", "GRIDSUB_URL=", "GRIDSUB_TOKEN="} {
			if strings.HasPrefix(e, k) {
				return true
			}
		}
		return false
	}), "GRIDSUB_STATE_DIR="+h.state, "GRIDSUB_SOCKET="+h.sock)
	d.cmd.Stderr, d.cmd.Stdout = lf, lf
	if err := d.cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	go func() {
		err := d.cmd.Wait()
		lf.Close()
		d.exited.Store(true)
		d.done <- err
	}()
	h.runs = append(h.runs, d)
	// Ready when this process answers on the socket (a killed run leaves its
	// socket file behind; the new run must cope with it).
	deadline := time.Now().Add(90 * time.Second)
	for {
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := h.c.Health(hctx)
		cancel()
		if err == nil {
			return d
		}
		if d.exited.Load() {
			err := <-d.done
			d.done <- err
			h.t.Fatalf("gridsub serve (run %d) exited before answering: %v\n%s", run, err, tail(d.logPath, 40))
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("gridsub serve (run %d) did not answer on %s within 90s: %v\n%s", run, h.sock, err, tail(d.logPath, 40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (d *daemon) kill(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil && !d.exited.Load() {
		t.Fatalf("SIGKILL run %d: %v", d.run, err)
	}
	err := <-d.done
	d.done <- err
	if !d.exited.Load() || d.cmd.ProcessState == nil {
		t.Fatalf("run %d did not exit after SIGKILL", d.run)
	}
	if ws, ok := d.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("run %d ended by itself (%v) before it was killed\n%s", d.run, err, tail(d.logPath, 40))
	}
}

// tail returns the last n lines of a file, for failure messages.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// recovered is the daemon's "recovered" log record (Broker.Recover's report).
type recovered struct {
	Queued, Live, Adopted, Unresolved int
	NeverReached                      int `json:"never_reached"`
	DuplicatesCancelled               int `json:"duplicates_cancelled"`
	Errors                            int
}

// readRecovered returns the recovery report a run logged, if it got that far.
func readRecovered(path string) (rec recovered, ok bool, cycleErrs []string) {
	f, err := os.Open(path)
	if err != nil {
		return rec, false, nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m struct {
			Msg   string `json:"msg"`
			Level string `json:"level"`
			Err   string `json:"err"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		switch {
		case m.Msg == "recovered":
			ok = json.Unmarshal(sc.Bytes(), &rec) == nil
		case m.Level == "WARN" && m.Err != "" && len(cycleErrs) < 5:
			cycleErrs = append(cycleErrs, m.Msg+": "+m.Err)
		}
	}
	return rec, ok, cycleErrs
}

// submitter hands the jobs to whichever daemon runs, never creating one
// twice: a request that got no answer is looked up by its unique name
// before it is sent again.
type submitter struct {
	c        *api.Client
	inflight atomic.Int64
	resent   atomic.Int64 // requests sent again after no answer (found not stored)
	found    atomic.Int64 // requests that got no answer but were stored
}

func (s *submitter) submit(ctx context.Context, req bridge.Request) (string, error) {
	for {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		s.inflight.Add(1)
		j, err := s.c.Submit(sctx, req)
		s.inflight.Add(-1)
		cancel()
		if err == nil {
			return j.ID, nil
		}
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status < 500 {
			return "", fmt.Errorf("the daemon refused %s: %w", req.Name, err)
		}
		// No answer (the daemon died or is restarting): was it stored?
		for {
			if ctx.Err() != nil {
				return "", fmt.Errorf("submitting %s: %w (last error: %v)", req.Name, ctx.Err(), err)
			}
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			js, _, lerr := s.c.List(lctx, bridge.Filter{Name: req.Name, Limit: 10})
			cancel()
			if lerr != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			switch len(js) {
			case 0:
				s.resent.Add(1)
			case 1:
				s.found.Add(1)
				return js[0].ID, nil
			default:
				ids := make([]string, len(js))
				for i, j := range js {
					ids[i] = j.ID
				}
				return "", fmt.Errorf("%s is stored %d times (%v) though the test sent it until the first answer", req.Name, len(js), ids)
			}
			break
		}
	}
}

// kill records one SIGKILL.
type kill struct {
	after    time.Duration           // since the test began
	inflight int64                   // submissions in flight at that moment
	states   map[bridge.JobState]int // before the kill (not taken for aimed kills)
	aimed    bool                    // waited for a dispatch under way
	hit      bool                    // and saw a new job directory just before the kill
}

func countStates(js []*bridge.Job) map[bridge.JobState]int {
	m := map[bridge.JobState]int{}
	for _, j := range js {
		m[j.State]++
	}
	return m
}

func statesString(m map[bridge.JobState]int) string {
	var parts []string
	for _, s := range []bridge.JobState{bridge.Queued, bridge.Submitting, bridge.Dispatched, bridge.Running,
		bridge.Completed, bridge.Failed, bridge.Cancelled, bridge.Rejected} {
		if m[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", s, m[s]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// ssh runs a command at a testbed site as the login user.
func ssh(ctx context.Context, siteEnv, command string) (string, error) {
	cmd := exec.CommandContext(ctx, "ssh", "-i", os.Getenv("GRIDSUB_SSH_KEY"), "-p", os.Getenv("GRIDSUB_"+siteEnv+"_SSH_PORT"),
		"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile="+os.Getenv("GRIDSUB_SSH_KNOWN_HOSTS"),
		os.Getenv("GRIDSUB_SSH_USER")+"@"+os.Getenv("GRIDSUB_SSH_HOST"), command)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// dirRe splits a job directory name: <grid id>-a<attempt>[-<component>].
var dirRe = regexp.MustCompile(`^(.+)-a(\d+)(?:-(\d+))?$`)

// execution is what one remote job directory shows.
type execution struct {
	dir     string
	attempt int
	runs    []string // ran.<slurm job id> markers: one per time the command ran
	exit    string   // .gridsub-exit content ("" = none)
}

// scanDirs reads every job directory below <base>/gridsub.
func scanDirs(base string) (map[string][]execution, error) {
	out := map[string][]execution{}
	ents, err := os.ReadDir(filepath.Join(base, "gridsub"))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		m := dirRe.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			return nil, fmt.Errorf("unexpected entry %s in %s/gridsub", e.Name(), base)
		}
		dir := filepath.Join(base, "gridsub", e.Name())
		ex := execution{dir: dir}
		ex.attempt, _ = strconv.Atoi(m[2])
		runs, _ := filepath.Glob(filepath.Join(dir, "ran.*"))
		for _, r := range runs {
			ex.runs = append(ex.runs, strings.TrimPrefix(filepath.Base(r), "ran."))
		}
		if b, err := os.ReadFile(filepath.Join(dir, ".gridsub-exit")); err == nil {
			ex.exit = strings.TrimSpace(string(b))
		}
		out[m[1]] = append(out[m[1]], ex)
	}
	return out, nil
}

var (
	compWorkDir = regexp.MustCompile(` WorkDir=(\S+)`)
	compState   = regexp.MustCompile(` JobState=(\S+)`)
	compExit    = regexp.MustCompile(` ExitCode=(\S+)`)
)

// jobComp counts, per grid id, the jobcomp records whose working directory
// is below prefix: all of them, and the COMPLETED ones with exit code 0:0.
func jobComp(file, prefix string, all, ok map[string]int) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(b), "\n") {
		wd := compWorkDir.FindStringSubmatch(l)
		if wd == nil || !strings.HasPrefix(wd[1], prefix+"/gridsub/") {
			continue
		}
		m := dirRe.FindStringSubmatch(filepath.Base(wd[1]))
		if m == nil {
			continue
		}
		all[m[1]]++
		st, ex := compState.FindStringSubmatch(l), compExit.FindStringSubmatch(l)
		if st != nil && ex != nil && st[1] == "COMPLETED" && ex[1] == "0:0" {
			ok[m[1]]++
		}
	}
	return nil
}

func TestDaemonSurvivesSIGKILL(t *testing.T) {
	needTestbed(t)
	n := envInt(t, envJobs, defJobs)
	nKills := envInt(t, envKills, defKills)
	seed := uint64(envInt(t, envSeed, defSeed))
	span := envDur(t, envSpan, defSpan)
	timeout := envDur(t, envTimeout, defTimeout)
	stall := envDur(t, envStall, defStall)
	keep := os.Getenv(envKeep) == "1"
	if n < 1 {
		t.Fatalf("%s must be >= 1", envJobs)
	}

	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found at %s: %v", root, err)
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "gridsub")
	build := exec.Command("go", "build", "-o", bin, "./cmd/gridsub")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gridsub: %v\n%s", err, out)
	}

	// The daemon's own remote directories, so nothing collides with other
	// tests on the testbed; the backend creates them (mkdir -p at submit).
	stamp := fmt.Sprintf("killtest-%s-%d", time.Now().UTC().Format("20060102T150405"), os.Getpid())
	remote := map[string]string{}
	raw, err := os.ReadFile(filepath.Join(root, "configs", "local-slurm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfgText := string(raw)
	for _, s := range sites {
		remote[s.env] = filepath.Join(os.Getenv("GRIDSUB_"+s.env+"_SCRATCH"), stamp)
		old := "remote_dir: ${GRIDSUB_" + s.env + "_SCRATCH}"
		if !strings.Contains(cfgText, old) {
			t.Fatalf("configs/local-slurm.yaml has no line %q to point at the test's own directory", old)
		}
		cfgText = strings.Replace(cfgText, old, "remote_dir: "+remote[s.env], 1)
	}
	// A quick scheduler budget: the test is about recovery and pushes 1,000
	// jobs through 12 nodes, so gridsub must see nodes free within seconds
	// (the default budget polls every 10-20 s and refreshes capacity every
	// 2 min, as a real centre wants).
	if n := strings.Count(cfgText, "      max_sessions: 8\n"); n != len(sites) {
		t.Fatalf("configs/local-slurm.yaml: %d sites with max_sessions: 8, want %d (to add the test's budget after)", n, len(sites))
	}
	cfgText = strings.ReplaceAll(cfgText, "      max_sessions: 8\n",
		"      max_sessions: 8\n    budget: {per_minute: 600, burst: 60, poll_fast: 2s, poll_slow: 2s, capacity_every: 2s, backoff_max: 4s}\n")
	// The staged input lives in tmp: the daemon may read it from there only.
	if !strings.Contains(cfgText, "\nbroker:\n") {
		t.Fatal("configs/local-slurm.yaml has no broker section to add the test's input root to")
	}
	cfgText = strings.Replace(cfgText, "\nbroker:\n", "\nbroker:\n  input_roots: ["+tmp+"]\n", 1)
	cfg := filepath.Join(tmp, "killtest.yaml")
	if err := os.WriteFile(cfg, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	// The daemon's state directory and logs, outside t.TempDir so that a
	// failure can keep them for a look.
	work, err := os.MkdirTemp("", "gridsub-killtest-")
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: daemon, then remote jobs, then dirs.
	t.Cleanup(func() {
		if keep || t.Failed() && os.Getenv(envKeep) != "0" {
			t.Logf("kept the remote job directories %v and the daemon's state and logs in %s (%s=0 removes them even after a failure)",
				remote, work, envKeep)
			return
		}
		for _, d := range append(slices.Collect(maps.Values(remote)), work) {
			if err := os.RemoveAll(d); err != nil {
				t.Errorf("removing %s: %v", d, err)
			}
		}
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, s := range sites {
			out, err := ssh(ctx, s.env, "squeue -h --me -o '%i %Z'")
			if err != nil {
				t.Errorf("listing leftover jobs at %s: %v\n%s", s.name, err, out)
				continue
			}
			var ids []string
			for _, l := range strings.Split(out, "\n") {
				f := strings.Fields(l)
				if len(f) == 2 && strings.HasPrefix(f[1], remote[s.env]+"/") {
					ids = append(ids, f[0])
				}
			}
			if len(ids) == 0 {
				continue
			}
			t.Logf("cancelling %d leftover job(s) at %s: %v", len(ids), s.name, ids)
			if out, err := ssh(ctx, s.env, "scancel "+strings.Join(ids, " ")); err != nil {
				t.Errorf("scancel at %s: %v\n%s", s.name, err, out)
			}
		}
	})

	stateDir := filepath.Join(work, "state")
	sockDir, err := os.MkdirTemp("", "gskt") // short: unix socket paths are limited to ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	logDir := filepath.Join(work, "logs")
	if err := os.Mkdir(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, bin: bin, cfg: cfg, state: stateDir, sock: filepath.Join(sockDir, "gridsub.sock"), logDir: logDir}
	h.c = api.NewUnixClient(h.sock)
	t.Cleanup(func() {
		if len(h.runs) > 0 {
			if d := h.runs[len(h.runs)-1]; !d.exited.Load() {
				d.cmd.Process.Kill()
				<-d.done
			}
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	began := time.Now()
	cur := h.start(ctx)

	// Submissions: spread over span by a pacer, 4 at a time, each retried
	// until it has an answer without ever storing a job twice.
	sub := &submitter{c: h.c}
	names := make([]string, n)
	ids := make([]string, n)
	errs := make([]error, n)
	prefix := fmt.Sprintf("kt%d", seed)
	// The job records each time it runs (ran.<SLURM job id> in its job
	// directory), so two runs of one attempt are seen too, not only the
	// exit file the second run would overwrite.
	// Each job also stages an input in (SFTP), which widens the window
	// between the write-ahead intent and sbatch; the job fails (exit 3) if
	// the input did not arrive whole.
	input := filepath.Join(tmp, "input.dat")
	payload := make([]byte, 8<<10)
	for i := range payload {
		payload[i] = byte(i*7 + int(seed))
	}
	if err := os.WriteFile(input, payload, 0o644); err != nil {
		t.Fatal(err)
	}
	command := []string{"sh", "-c", fmt.Sprintf(`[ "$(wc -c < input.dat)" -eq %d ] || exit 3; sleep 0.2; : > "$GRIDSUB_JOB_DIR/ran.$SLURM_JOB_ID"`, len(payload))}
	next := make(chan int)
	go func() {
		defer close(next)
		tk := time.NewTicker(max(span/time.Duration(n), time.Microsecond))
		defer tk.Stop()
		for i := range n {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			next <- i
		}
	}()
	var wg sync.WaitGroup
	var submitted atomic.Int64
	for range 4 {
		wg.Go(func() {
			for i := range next {
				names[i] = fmt.Sprintf("%s-%04d", prefix, i)
				ids[i], errs[i] = sub.submit(ctx, bridge.Request{Name: names[i], Command: command,
					Nodes: 1, CoresPerNode: 1, Estimate: 5 * time.Minute, DataSize: int64(len(payload)),
					Inputs: []backends.StageFile{{Local: input, Remote: "input.dat"}}})
				submitted.Add(1)
			}
		})
	}
	subDone := make(chan struct{})
	go func() { wg.Wait(); close(subDone) }()
	submitting := func() bool {
		select {
		case <-subDone:
			return false
		default:
			return true
		}
	}

	// The kills: a seeded random delay of 0.2-3 s after each (re)start.
	// While submissions go on, the kill waits (up to 2 s) for one to be in
	// flight, so some land in the middle of a request. Every third kill is
	// aimed: it waits (up to 3 s) for a new job directory to appear at a
	// site, the sign of a dispatch under way (staging, then sbatch), so
	// some land between the write-ahead intent and the site's answer, the
	// window Recover's reconciliation is for.
	rng := rand.New(rand.NewPCG(seed, 0x6b696c6c))
	var kills []kill
	for i := range nKills {
		time.Sleep(200*time.Millisecond + time.Duration(rng.Int64N(int64(2800*time.Millisecond))))
		aimed, hit := i%3 == 2, false
		if aimed {
			before := jobDirs(remote)
			for wait := time.Now().Add(3 * time.Second); !hit && time.Now().Before(wait); time.Sleep(time.Millisecond) {
				hit = jobDirs(remote) > before
			}
		}
		var states map[bridge.JobState]int
		if !aimed {
			lctx, lcancel := context.WithTimeout(ctx, 3*time.Second)
			if js, err := h.c.ListAll(lctx, bridge.Filter{Limit: api.MaxLimit}); err == nil {
				states = countStates(js)
			}
			lcancel()
		}
		for wait := time.Now().Add(2 * time.Second); !aimed && submitting() && sub.inflight.Load() == 0 && time.Now().Before(wait); {
			time.Sleep(time.Millisecond)
		}
		k := kill{after: time.Since(began), inflight: sub.inflight.Load(), states: states, aimed: aimed, hit: hit}
		cur.kill(t)
		kills = append(kills, k)
		if ctx.Err() != nil {
			t.Fatalf("the run took longer than %s (%s) during the kills", timeout, envTimeout)
		}
		cur = h.start(ctx)
	}
	killPhase := time.Since(began)

	// The last run goes on until every job is final.
	select {
	case <-subDone:
	case <-ctx.Done():
		t.Fatalf("after %s (%s) only %d of %d submissions had an answer", timeout, envTimeout, submitted.Load(), n)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	var jobs []*bridge.Job
	lastLog, lastFinal, progressAt := time.Now(), -1, time.Now()
	for {
		lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
		js, err := h.c.ListAll(lctx, bridge.Filter{Limit: api.MaxLimit, Events: true})
		lcancel()
		if err == nil {
			jobs = js
			final := 0
			for _, j := range js {
				if j.State.Final() {
					final++
				}
			}
			if final == len(js) && len(js) >= n {
				break
			}
			if final != lastFinal {
				lastFinal, progressAt = final, time.Now()
			}
			if time.Since(lastLog) > 30*time.Second {
				t.Logf("%s: %s", time.Since(began).Round(time.Second), statesString(countStates(js)))
				lastLog = time.Now()
			}
		}
		switch {
		case ctx.Err() != nil:
			t.Fatalf("after %s (%s) not every job is final: %s (last list error: %v); for example:\n%s\nlast daemon log:\n%s",
				timeout, envTimeout, statesString(countStates(jobs)), err, stuckJobs(jobs), tail(cur.logPath, 20))
		case time.Since(progressAt) > stall:
			t.Fatalf("no job became final for %s (%s) after the last restart: %s; stuck:\n%s\nlast daemon log:\n%s",
				stall, envStall, statesString(countStates(jobs)), stuckJobs(jobs), tail(cur.logPath, 20))
		}
		time.Sleep(time.Second)
	}
	wall := time.Since(began)

	// A graceful stop: exit status 0, socket removed.
	if err := cur.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cur.done:
		cur.done <- err
		if err != nil {
			t.Errorf("gridsub serve after SIGTERM: %v\n%s", err, tail(cur.logPath, 20))
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("gridsub serve did not stop within 40s of SIGTERM\n%s", tail(cur.logPath, 20))
	}
	if _, err := os.Lstat(h.sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket %s is still there after SIGTERM (%v)", h.sock, err)
	}

	// The store: every submitted job exactly once, completed, with a
	// consistent history.
	byName := map[string][]*bridge.Job{}
	for _, j := range jobs {
		byName[j.Req.Name] = append(byName[j.Req.Name], j)
	}
	if len(jobs) != n {
		t.Errorf("the store holds %d jobs; %d were submitted", len(jobs), n)
	}
	var problems []string
	bad := func(format string, a ...any) {
		problems = append(problems, fmt.Sprintf(format, a...))
	}
	reconciledEvents, requeuedEvents, attempts := 0, 0, 0
	for i, name := range names {
		js := byName[name]
		switch {
		case len(js) == 0:
			bad("%s (%s): lost, not in the store", name, ids[i])
			continue
		case len(js) > 1:
			bad("%s: stored %d times", name, len(js))
			continue
		}
		j := js[0]
		attempts += j.Attempts
		if j.ID != ids[i] {
			bad("%s: the store says %s, the submission answered %s", name, j.ID, ids[i])
		}
		if j.State != bridge.Completed {
			bad("%s: %s, not completed (%s)", j.ID, j.State, j.Reason)
		}
		if len(j.Events) == 0 {
			bad("%s: no events", j.ID)
			continue
		}
		if j.Events[0].Kind != "submitted" {
			bad("%s: the first event is %q, not \"submitted\"", j.ID, j.Events[0].Kind)
		}
		dispatches := 0
		for k, e := range j.Events {
			if k > 0 && e.Time.Before(j.Events[k-1].Time) {
				bad("%s: event %d (%s at %s) is earlier than event %d (%s at %s)", j.ID, k, e.Kind, e.Time.Format(time.RFC3339Nano),
					k-1, j.Events[k-1].Kind, j.Events[k-1].Time.Format(time.RFC3339Nano))
			}
			switch e.Kind {
			case "dispatch":
				dispatches++
			case "reconciled":
				reconciledEvents++
			case "requeued":
				requeuedEvents++
			}
		}
		if dispatches != j.Attempts {
			bad("%s: %d dispatch events for %d attempts", j.ID, dispatches, j.Attempts)
		}
		if last := j.Events[len(j.Events)-1]; j.State.Final() && last.Kind != string(j.State) {
			bad("%s: state %s but the last event is %q (%s)", j.ID, j.State, last.Kind, last.Msg)
		}
	}

	// The sites: exactly one successful execution per job, in the directory
	// of its last attempt, and the jobcomp logs agree.
	remoteRuns := map[string][]execution{}
	compAll, compOK := map[string]int{}, map[string]int{}
	for _, s := range sites {
		m, err := scanDirs(remote[s.env])
		if err != nil {
			t.Fatalf("scanning %s's job directories: %v", s.name, err)
		}
		for id, exs := range m {
			remoteRuns[id] = append(remoteRuns[id], exs...)
		}
		if err := jobComp(os.Getenv("GRIDSUB_"+s.env+"_JOBCOMP"), remote[s.env], compAll, compOK); err != nil {
			t.Fatalf("reading %s's jobcomp log: %v", s.name, err)
		}
	}
	executions, failedRuns := 0, 0
	for i, id := range ids {
		var j *bridge.Job
		if js := byName[names[i]]; len(js) == 1 {
			j = js[0]
		}
		ok := 0
		for _, ex := range remoteRuns[id] {
			executions += len(ex.runs)
			if len(ex.runs) > 1 {
				bad("%s: attempt directory %s ran %d times (SLURM jobs %v)", id, ex.dir, len(ex.runs), ex.runs)
			}
			if ex.exit == "0" {
				ok += len(ex.runs)
				if j != nil && ex.attempt != j.Attempts {
					bad("%s: attempt %d ran successfully (%s) but the job's last attempt is %d", id, ex.attempt, ex.dir, j.Attempts)
				}
			} else if len(ex.runs) > 0 {
				failedRuns++
			}
		}
		if ok != 1 {
			bad("%s: %d successful remote executions, want exactly 1 (dirs %v)", id, ok, remoteRuns[id])
		}
		if compOK[id] != 1 {
			bad("%s: %d COMPLETED 0:0 records in the jobcomp logs, want 1 (%d records in all)", id, compOK[id], compAll[id])
		}
		delete(remoteRuns, id)
	}
	for id, exs := range remoteRuns {
		bad("job directories of a grid id no submission answered: %s %v", id, exs)
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		shown := problems
		if len(shown) > 40 {
			shown = shown[:40]
		}
		t.Errorf("%d problem(s):\n  %s", len(problems), strings.Join(shown, "\n  "))
	}

	// What Recover did, from the daemon's logs.
	var sum recovered
	logged := 0
	for _, d := range h.runs {
		rec, ok, warns := readRecovered(d.logPath)
		if ok {
			logged++
			sum.Queued += rec.Queued
			sum.Live += rec.Live
			sum.Adopted += rec.Adopted
			sum.NeverReached += rec.NeverReached
			sum.Unresolved += rec.Unresolved
			sum.DuplicatesCancelled += rec.DuplicatesCancelled
			sum.Errors += rec.Errors
		}
		for _, w := range warns {
			t.Logf("run %d warned: %s", d.run, w)
		}
	}
	if logged == len(h.runs) && sum.Unresolved == 0 && reconciledEvents != sum.Adopted+sum.NeverReached {
		t.Errorf("the jobs carry %d \"reconciled\" events, the daemons' recovery reports %d adopted + %d never reached",
			reconciledEvents, sum.Adopted, sum.NeverReached)
	}
	if sum.DuplicatesCancelled > 0 {
		t.Errorf("recovery cancelled %d duplicate remote job(s): a tag was submitted twice", sum.DuplicatesCancelled)
	}

	midReq, hits := 0, 0
	var lines []string
	for i, k := range kills {
		if k.inflight > 0 {
			midReq++
		}
		what := "jobs " + statesString(k.states)
		switch {
		case k.hit:
			what = "aimed: just after a new job directory appeared at a site"
			hits++
		case k.aimed:
			what = "aimed, but no new job directory appeared within 3s"
		}
		lines = append(lines, fmt.Sprintf("  kill %2d at %6.1fs: %d request(s) in flight; %s", i+1, k.after.Seconds(), k.inflight, what))
	}
	t.Logf("kills:\n%s", strings.Join(lines, "\n"))
	t.Logf("N=%d jobs, %d kills (%d with a submission in flight, %d aimed just after a new job directory appeared), %d daemon runs (%d logged a recovery); kill phase %s, wall time %s (build excluded)",
		n, len(kills), midReq, hits, len(h.runs), logged, killPhase.Round(100*time.Millisecond), wall.Round(100*time.Millisecond))
	t.Logf("client: %d submissions answered only after a restart were found stored, %d sent again (not stored)", sub.found.Load(), sub.resent.Load())
	t.Logf("recover (sum over runs): queued %d, live %d, adopted %d, never reached %d (requeued), unresolved %d, duplicates cancelled %d, errors %d; jobs carry %d reconciled and %d requeued events; %d attempts for %d jobs",
		sum.Queued, sum.Live, sum.Adopted, sum.NeverReached, sum.Unresolved, sum.DuplicatesCancelled, sum.Errors, reconciledEvents, requeuedEvents, attempts, n)
	t.Logf("remote: %d executions recorded, %d of them not successful; jobcomp records of the test: %d", executions, failedRuns, sumMap(compAll))
}

// jobDirs counts the job directories below the remote directories.
func jobDirs(remote map[string]string) int {
	n := 0
	for _, d := range remote {
		f, err := os.Open(filepath.Join(d, "gridsub"))
		if err != nil {
			continue
		}
		names, _ := f.Readdirnames(-1)
		f.Close()
		n += len(names)
	}
	return n
}

// stuckJobs describes (up to 10 of) the jobs that are not final.
func stuckJobs(jobs []*bridge.Job) string {
	var out []string
	for _, j := range jobs {
		if j.State.Final() {
			continue
		}
		if len(out) == 10 {
			out = append(out, "  ...")
			break
		}
		last := ""
		if len(j.Events) > 0 {
			e := j.Events[len(j.Events)-1]
			last = e.Kind + ": " + e.Msg
		}
		var comps []string
		for _, c := range j.Comps {
			comps = append(comps, fmt.Sprintf("%s remote job %q in state %s", c.Site, c.RemoteID, c.State))
		}
		out = append(out, fmt.Sprintf("  %s (%s) %s, attempt %d, components [%s]; last event %q",
			j.ID, j.Req.Name, j.State, j.Attempts, strings.Join(comps, "; "), last))
	}
	return strings.Join(out, "\n")
}

func sumMap(m map[string]int) int {
	s := 0
	for _, v := range m {
		s += v
	}
	return s
}
