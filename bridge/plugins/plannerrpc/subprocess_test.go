package plannerrpc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/simbackend/replay"
	"github.com/gridsub/gridsub/simbackend/swf"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// testPlanner builds internal/testplanner (once per test binary) and
// returns its path.
func testPlanner(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "plannerrpc-test-"); buildErr != nil {
			return
		}
		buildPath = filepath.Join(buildDir, "testplanner")
		cmd := exec.Command("go", "build", "-o", buildPath, "./internal/testplanner")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./internal/testplanner: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

func sha256File(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// load starts the test planner with args; it is closed with the test.
func load(t testing.TB, args ...string) *Plugin {
	t.Helper()
	bin := testPlanner(t)
	p, err := Load(context.Background(), Config{Path: bin, Args: args, SHA256: sha256File(t, bin), Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// ctcJobs is the first n jobs of CTC-SP2 shaped as paper 000's Workload 1.
func ctcJobs(tb testing.TB, n int) []replay.Job {
	tb.Helper()
	dir, ok := swf.WorkloadsDir()
	if !ok {
		tb.Skip("workload traces not found: set GRIDSUB_WORKLOADS (e.g. /work/shared/workloads) to run the trace replays")
	}
	r, err := swf.Open(filepath.Join(dir, "CTC-SP2-1996-3.1-cln.swf.gz"))
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	jobs, err := swf.ReadJobs(r, swf.StrongFilter{MaxProcs: 338}.Apply, n)
	if err != nil {
		tb.Fatal(err)
	}
	sh, err := swf.Shape(jobs, swf.ShapeOptions{N: n, WidthCap: 32, Sites: 3, Seed: 7})
	if err != nil {
		tb.Fatal(err)
	}
	return replay.FromShaped(sh)
}

func paperSetup(pl policy.Planner) replay.Setup {
	sites := []replay.Site{{Name: "Beijing", Nodes: 128, H: 1}, {Name: "Shanghai", Nodes: 64, H: 1}, {Name: "Harbin", Nodes: 32, H: 1}}
	links := make([][]policy.Link, len(sites))
	for i := range links {
		links[i] = make([]policy.Link, len(sites))
		for k := range links[i] {
			if i != k {
				links[i][k] = policy.Link{SecPerByte: 1e-6, Latency: 575 * time.Millisecond}
			}
		}
	}
	return replay.Setup{Sites: sites, Links: links, MultiSite: 1.1, Planner: pl}
}

// resultsCSV is a replay's outcome as a results file: one row per job
// (times in ns from the epoch), then the counts.
func resultsCSV(t testing.TB, res *replay.Result) []byte {
	t.Helper()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"id", "submit", "start", "end", "width", "parts", "rejected"})
	for _, r := range res.Records {
		var parts []string
		for _, p := range r.Parts {
			parts = append(parts, fmt.Sprintf("%d:%d", p.Site, p.Nodes))
		}
		w.Write([]string{r.ID, strconv.FormatInt(r.Submit.UnixNano(), 10), strconv.FormatInt(r.Start.UnixNano(), 10),
			strconv.FormatInt(r.End.UnixNano(), 10), strconv.Itoa(r.Width), strings.Join(parts, " "), strconv.FormatBool(r.Rejected)})
	}
	w.Write([]string{"failed", strconv.Itoa(res.Failed), "unfinished", strconv.Itoa(res.Unfinished), "cycles", strconv.Itoa(res.Cycles)})
	w.Flush()
	if err := w.Error(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sameCSV(t testing.TB, what string, want, got []byte) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := range min(len(wl), len(gl)) {
		if wl[i] != gl[i] {
			t.Fatalf("%s: results differ at line %d:\nin process %s\n%-10s %s", what, i+1, wl[i], "plugin", gl[i])
		}
	}
	t.Fatalf("%s: results differ: %d lines in process, %d through the plugin", what, len(wl), len(gl))
}

// plain hides a planner's sessions (as TestDirectMatchesBroker does).
type plain struct{ policy.Planner }

const replayJobs = 10000

// TestReplayThroughPluginProcess: a 10,000-job CTC replay (2,000 with
// -short or -race) gives byte for
// byte the same results with greedy-easy in process and with greedy-easy
// as a plugin process, on the Session path (the replay's driver uses the
// plugin's policy.Incremental) and on the snapshot path (sessions hidden,
// and a plugin that serves none).
func TestReplayThroughPluginProcess(t *testing.T) {
	n := replayJobs
	if testing.Short() || raceOn {
		n = 2000
	}
	jobs := ctcJobs(t, n)
	run := func(pl policy.Planner) []byte {
		t.Helper()
		start := time.Now()
		res, err := replay.Run(context.Background(), paperSetup(pl), jobs, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) != n {
			t.Fatalf("%d records of %d jobs", len(res.Records), n)
		}
		t.Logf("%T: %d cycles in %s", pl, res.Cycles, time.Since(start).Round(time.Millisecond))
		return resultsCSV(t, res)
	}
	want := run(builtin(t, "greedy-easy"))
	if w := run(plain{builtin(t, "greedy-easy")}); !bytes.Equal(w, want) {
		t.Fatal("in process, the Session and the snapshot paths differ: the replay itself is broken")
	}

	sess := load(t, "greedy-easy").Planner()
	if _, ok := sess.(policy.Incremental); !ok {
		t.Fatal("the plugin serves sessions but was loaded as a plain planner")
	}
	sameCSV(t, "Session path", want, run(sess))
	sameCSV(t, "snapshot path (sessions hidden)", want, run(plain{load(t, "greedy-easy").Planner()}))
	snap := load(t, "-plain", "greedy-easy").Planner()
	if _, ok := snap.(policy.Incremental); ok {
		t.Fatal("a plugin without sessions was loaded as a policy.Incremental")
	}
	sameCSV(t, "snapshot path (a plugin without sessions)", want, run(snap))
}

// TestReplayPluginKilled: a planner plugin SIGKILLed in the middle of a
// replay is restarted (its session re-seeded from the mirror) or, with no
// restarts allowed, replaced by the built-in fallback; either way the run
// completes, with the same results as in process, and the switch is
// reported.
func TestReplayPluginKilled(t *testing.T) {
	n := 5000
	if testing.Short() || raceOn {
		n = 2000
	}
	jobs := ctcJobs(t, n)
	want, err := replay.Run(context.Background(), paperSetup(builtin(t, "greedy-easy")), jobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantCSV := resultsCSV(t, want)
	cases := []struct {
		name        string
		args        []string
		hide        bool
		maxRestarts int
	}{
		{"session/restart", []string{"greedy-easy"}, false, 0},
		{"session/fallback", []string{"greedy-easy"}, false, -1},
		{"snapshot/restart", []string{"-plain", "greedy-easy"}, true, 0},
		{"snapshot/fallback", []string{"-plain", "greedy-easy"}, true, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := load(t, c.args...)
			var rec recorder
			var prim policy.Planner = p.Planner()
			if c.hide {
				prim = plainRestartable{prim}
			}
			pl := (&Fallback{Primary: prim, Fallback: builtin(t, "greedy-easy"), OnSwitch: rec.on, MaxRestarts: c.maxRestarts}).Planner()
			killed := 0
			res, err := replay.Run(context.Background(), paperSetup(pl), jobs, func(submitted, _ int) {
				if submitted >= n/2 && killed == 0 {
					pid := p.Pid()
					if pid == 0 {
						t.Error("no plugin process to kill")
						return
					}
					if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
						t.Error(err)
					}
					killed = pid
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if killed == 0 {
				t.Fatal("the plugin was never killed")
			}
			sameCSV(t, c.name, wantCSV, resultsCSV(t, res))
			if len(rec.got) != 1 || !errors.Is(rec.got[0], ErrPluginExited) || rec.got[0].Restarted != (c.maxRestarts >= 0) {
				t.Fatalf("reports %v; want one %s for the killed plugin", rec.got, c.name)
			}
			if c.maxRestarts >= 0 {
				if pid := p.Pid(); pid == 0 || pid == killed {
					t.Fatalf("after the restart the plugin's pid is %d (killed: %d)", pid, killed)
				}
			}
			t.Logf("%s: killed pid %d half way through: %v", c.name, killed, rec.got[0])
		})
	}
}

// plainRestartable hides a planner's sessions but keeps its Restart.
type plainRestartable struct{ policy.Planner }

func (p plainRestartable) Restart(ctx context.Context) error {
	return p.Planner.(Restarter).Restart(ctx)
}

// TestLoadRefuses: a checksum that does not match, a path that is not
// executable or does not exist, and a malformed checksum fail with an
// error naming the plugin and what to do.
func TestLoadRefuses(t *testing.T) {
	bin := testPlanner(t)
	ctx := context.Background()
	wrong := strings.Repeat("ab", 32)
	_, err := Load(ctx, Config{Path: bin, Args: []string{"greedy-easy"}, SHA256: wrong, Log: io.Discard})
	if err == nil || !strings.Contains(err.Error(), bin) || !strings.Contains(err.Error(), "update the checksum") {
		t.Fatalf("wrong checksum: err = %v", err)
	}
	_, err = Load(ctx, Config{Path: bin, SHA256: "xyz", Log: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "64 hex digits") {
		t.Fatalf("malformed checksum: err = %v", err)
	}
	notExec := filepath.Join(t.TempDir(), "planner.txt")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	if _, err = Load(ctx, Config{Path: notExec, Log: io.Discard}); err == nil || !strings.Contains(err.Error(), notExec) {
		t.Fatalf("not executable: err = %v", err)
	}
	// A process that never says hello: the start timeout ends the wait.
	hang := filepath.Join(t.TempDir(), "hang.sh")
	os.WriteFile(hang, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755)
	start := time.Now()
	_, err = Load(ctx, Config{Path: hang, StartTimeout: 500 * time.Millisecond, Log: io.Discard})
	if err == nil || !strings.Contains(err.Error(), hang) || time.Since(start) > 10*time.Second {
		t.Fatalf("hung handshake: err = %v after %s", err, time.Since(start))
	}
	// The right checksum starts it; Close stops it.
	p, err := Load(ctx, Config{Path: bin, Args: []string{"single-site-easy"}, SHA256: "sha256:" + sha256File(t, bin), Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if p.Planner().Name() != "single-site-easy" || p.Pid() == 0 {
		t.Fatalf("loaded %q with pid %d", p.Planner().Name(), p.Pid())
	}
	p.Close()
	if !p.Exited() {
		t.Fatal("the plugin runs after Close")
	}
	if _, err := p.Planner().Plan(ctx, &policy.Snapshot{}); !errors.Is(err, ErrPluginExited) {
		t.Fatalf("Plan after Close: err = %v, want ErrPluginExited", err)
	}
}

// TestHungPluginReplaced: a plugin process that stops answering in the
// middle of a replay is restarted after CallTimeout, hangs again, and is
// replaced by the fallback; the run completes with the in-process results.
func TestHungPluginReplaced(t *testing.T) {
	jobs := ctcJobs(t, 600)
	want, err := replay.Run(context.Background(), paperSetup(builtin(t, "greedy-easy")), jobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := load(t, "-hang-after", "200", "greedy-easy")
	var rec recorder
	pl := (&Fallback{Primary: p.Planner(), Fallback: builtin(t, "greedy-easy"), OnSwitch: rec.on, MaxRestarts: 1,
		CallTimeout: 300 * time.Millisecond}).Planner()
	res, err := replay.Run(context.Background(), paperSetup(pl), jobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameCSV(t, "hung plugin", resultsCSV(t, want), resultsCSV(t, res))
	if len(rec.got) != 2 || !rec.got[0].Restarted || rec.got[1].Restarted || !errors.Is(rec.got[1], context.DeadlineExceeded) {
		t.Fatalf("reports %v; want a restart, then a switch, both for the deadline", rec.got)
	}
}

// TestPluginGetsNoHostEnvironment: the plugin process sees only the
// variables Config.Env names (and go-plugin's own), none of the host's.
func TestPluginGetsNoHostEnvironment(t *testing.T) {
	t.Setenv("GRIDSUB_TEST_SECRET", "do-not-leak")
	bin := testPlanner(t)
	p, err := Load(context.Background(), Config{Path: bin, Args: []string{"greedy-easy"}, Env: []string{"CENTRE_TUNING=7"}, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.Pid()))
	if err != nil {
		t.Skipf("cannot read the plugin's environment: %v", err)
	}
	env := strings.Split(string(raw), "\x00")
	if slices.Contains(env, "GRIDSUB_TEST_SECRET=do-not-leak") || !slices.Contains(env, "CENTRE_TUNING=7") {
		t.Fatalf("plugin environment %q: want CENTRE_TUNING and not the host's GRIDSUB_TEST_SECRET", env)
	}
}
