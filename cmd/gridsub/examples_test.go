package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/daemon"
	"github.com/gridsub/gridsub/internal/config"
)

// knownFailingUntilMerge lists the expectations (file and expect line, as
// "file.yaml: <line>") that other helpers' branches make true: the examples
// promise them, this branch cannot keep the promise yet. A listed
// expectation that fails is logged, not failed; one that passes fails the
// test, so the list cannot go stale. Delete the entries after merging
// h-placement (cores_per_node honoured in placement) and h-qoslive (the QoS
// tiers acted on).
var knownFailingUntilMerge = []string{}

// expectation is one "# expect:" line of an example:
//
//	# expect: [with CONFIG] [under serve:] OUTCOME
//
// CONFIG is a built-in configuration (default local.yaml, gridsub's own
// default: real processes here; local-slurm.yaml needs the SLURM testbed), "under serve" runs the job through a daemon
// (gridsub serve, --wait) instead of the embedded broker. OUTCOME is the
// final state, then any of: "on A+B" (exactly these sites), "exit N",
// "attempts N", "deadline-met", "in-window" (ran inside its reservation's
// window), "replicated" (copies were dispatched to several sites), and a "quoted" text the
// reason contains.
type expectation struct {
	line   string // as written after "expect: "
	config string
	serve  bool
	state  string
	sites  []string
	exit   *int
	tries  *int
	flags  []string // deadline-met, in-window, replicated
	reason string
}

func parseExpect(line string) (expectation, error) {
	e := expectation{line: line, config: "local.yaml"}
	rest := line
	if head, tail, ok := strings.Cut(line, ":"); ok && (strings.HasPrefix(head, "with ") || strings.HasPrefix(head, "under ")) {
		words := strings.Fields(head)
		for i := 0; i < len(words); i++ {
			switch {
			case words[i] == "with" && i+1 < len(words):
				e.config = words[i+1]
				i++
			case words[i] == "under" && i+1 < len(words) && words[i+1] == "serve":
				e.serve = true
				i++
			default:
				return e, fmt.Errorf("unknown modifier %q in %q", words[i], head)
			}
		}
		rest = tail
	}
	rest = strings.TrimSpace(rest)
	if i := strings.IndexByte(rest, '"'); i >= 0 {
		q, err := strconv.Unquote(rest[i:])
		if err != nil {
			return e, fmt.Errorf("reason text %s: %w", rest[i:], err)
		}
		e.reason, rest = q, rest[:i]
	}
	words := strings.Fields(rest)
	if len(words) == 0 {
		return e, fmt.Errorf("no state in %q", line)
	}
	e.state = words[0]
	if !slices.Contains([]string{"completed", "failed", "rejected", "cancelled"}, e.state) {
		return e, fmt.Errorf("state %q is not a final state", e.state)
	}
	num := func(i int) (*int, error) {
		if i >= len(words) {
			return nil, fmt.Errorf("%q wants a number", words[i-1])
		}
		n, err := strconv.Atoi(words[i])
		return &n, err
	}
	for i := 1; i < len(words); i++ {
		var err error
		switch w := words[i]; w {
		case "on":
			if i+1 >= len(words) {
				return e, fmt.Errorf("on wants sites")
			}
			e.sites = strings.Split(words[i+1], "+")
			slices.Sort(e.sites)
			i++
		case "exit":
			e.exit, err = num(i + 1)
			i++
		case "attempts":
			e.tries, err = num(i + 1)
			i++
		case "deadline-met", "in-window", "replicated":
			e.flags = append(e.flags, w)
		default:
			return e, fmt.Errorf("unknown word %q", w)
		}
		if err != nil {
			return e, err
		}
	}
	return e, nil
}

// examples returns every example job file with its expectations.
func examples(t *testing.T) map[string][]expectation {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	out := map[string][]expectation{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for n := 1; sc.Scan(); n++ {
			line, ok := strings.CutPrefix(sc.Text(), "# expect: ")
			if !ok {
				continue
			}
			e, err := parseExpect(line)
			if err != nil {
				t.Errorf("%s:%d: %v", filepath.Base(f), n, err)
				continue
			}
			out[f] = append(out[f], e)
		}
		if len(out[f]) == 0 {
			t.Errorf("%s has no \"# expect:\" line: every example must say what it does, so that a test can hold it to it", filepath.Base(f))
		}
	}
	return out
}

// check compares a run's exit status and JSON summary with e.
func (e expectation) check(code int, stdout, stderr string) error {
	var j jobJSON
	if e.state == "rejected" && code == exitJobFailed && strings.TrimSpace(stdout) == "" {
		// Refused at submission (bridge.Feasible): nothing is stored, so
		// there is no summary; the reason is on stderr.
		if e.reason != "" && !strings.Contains(stderr, e.reason) {
			return fmt.Errorf("refused at submission, but stderr lacks %q:\n%s", e.reason, stderr)
		}
		return nil
	}
	if err := json.Unmarshal([]byte(stdout), &j); err != nil {
		return fmt.Errorf("exit %d, no JSON summary (%v)\nstdout:\n%s\nstderr:\n%s", code, err, stdout, stderr)
	}
	var bad []string
	if j.State != e.state {
		bad = append(bad, fmt.Sprintf("state %s (reason %q), want %s", j.State, j.Reason, e.state))
	}
	want := exitJobFailed
	if e.state == "completed" {
		want = exitOK
	}
	if code != want {
		bad = append(bad, fmt.Sprintf("exit status %d, want %d", code, want))
	}
	if e.sites != nil {
		var got []string
		for _, s := range j.Sites {
			if !slices.Contains(got, s.Site) {
				got = append(got, s.Site)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, e.sites) {
			bad = append(bad, fmt.Sprintf("sites %v, want %v", got, e.sites))
		}
	}
	if e.exit != nil && (j.ExitCode == nil || *j.ExitCode != *e.exit) {
		bad = append(bad, fmt.Sprintf("exit code %v, want %d", j.ExitCode, *e.exit))
	}
	if e.tries != nil && j.Attempts != *e.tries {
		bad = append(bad, fmt.Sprintf("%d attempt(s), want %d", j.Attempts, *e.tries))
	}
	if e.reason != "" && !strings.Contains(j.Reason, e.reason) {
		bad = append(bad, fmt.Sprintf("reason %q lacks %q", j.Reason, e.reason))
	}
	for _, f := range e.flags {
		switch f {
		case "deadline-met":
			if j.DeadlineMet == nil || !*j.DeadlineMet {
				bad = append(bad, fmt.Sprintf("deadline %v met %v, want met", j.Deadline, j.DeadlineMet))
			}
		case "in-window":
			r := j.Resv
			if r == nil || j.Start == nil || j.End == nil || j.Start.Before(r.Earliest) || j.End.After(r.Latest) {
				bad = append(bad, fmt.Sprintf("ran %v..%v, reservation %+v: want inside its window", j.Start, j.End, r))
			}
		case "replicated":
			if !slices.ContainsFunc(j.Events, func(ev bridge.Event) bool {
				// the broker's event: "dispatch" "attempt N: replicating: copy 0 at A:n, copy 1 at B:n, ..."
				return ev.Kind == "dispatch" && strings.Contains(ev.Msg, ": replicating: ")
			}) {
				bad = append(bad, "no replica was started (no replicating dispatch or replica-won event)")
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s\nstderr:\n%s", strings.Join(bad, "; "), stderr)
	}
	return nil
}

// verdict fails t for a broken promise, unless the expectation is listed as
// known to fail until a merge; a listed one that holds fails too.
func verdict(t *testing.T, file string, e expectation, err error) {
	t.Helper()
	key := filepath.Base(file) + ": " + e.line
	known := slices.Contains(knownFailingUntilMerge, key)
	switch {
	case err != nil && known:
		t.Logf("known to fail until merge (knownFailingUntilMerge): %s: %v", key, err)
	case err != nil:
		t.Errorf("%s promises %q: %v", filepath.Base(file), e.line, err)
	case known:
		t.Errorf("%q holds now: delete it from knownFailingUntilMerge", key)
	}
}

// TestExamplesKeepTheirPromises runs every file in examples/ on the
// built-in simulated testbeds (and the local-slurm.yaml ones on the real
// SLURM testbed, skipped without it) through the embedded broker, and
// checks the outcome its "# expect:" lines promise.
func TestExamplesKeepTheirPromises(t *testing.T) {
	t.Parallel()
	for file, exps := range examples(t) {
		for _, e := range exps {
			if e.serve {
				continue // TestExamplesUnderServe
			}
			t.Run(filepath.Base(file)+"/"+e.line, func(t *testing.T) {
				if e.config == "local-slurm.yaml" {
					needSlurm(t)
				}
				if e.config != "local.yaml" {
					// Each run mostly waits on its simulated or real sites.
					// The local site's runs go one at a time: one process
					// at a time owns its job directories.
					t.Parallel()
				}
				var out, errb bytes.Buffer
				code := run([]string{"--config", e.config, file, "--output", "json", "--quiet", "--embedded", "--out-dir", t.TempDir()}, &out, &errb)
				verdict(t, file, e, e.check(code, out.String(), errb.String()))
			})
		}
	}
}

// TestExamplesUnderServe runs the examples whose "# expect:" says "under
// serve" through a daemon on the default simulated testbed, as `gridsub
// FILE --wait` would: in particular examples/reservation.yaml, whose
// binding must run on the simulated clock.
func TestExamplesUnderServe(t *testing.T) {
	var todo []func(t *testing.T)
	for file, exps := range examples(t) {
		for _, e := range exps {
			if !e.serve {
				continue
			}
			if e.config != "testbed.yaml" {
				t.Errorf("%s: %q: the daemon of this test runs the simulated testbed; say \"with testbed.yaml under serve\"", filepath.Base(file), e.line)
				continue
			}
			todo = append(todo, func(t *testing.T) {
				t.Run(filepath.Base(file)+"/"+e.line, func(t *testing.T) {
					var out, errb bytes.Buffer
					code := run([]string{file, "--wait", "--output", "json", "--quiet"}, &out, &errb)
					verdict(t, file, e, e.check(code, out.String(), errb.String()))
				})
			})
		}
	}
	if len(todo) == 0 {
		t.Fatal("no example says \"under serve\"; examples/reservation.yaml should")
	}
	startInProcessDaemon(t)
	for _, f := range todo {
		f(t)
	}
}

// startInProcessDaemon starts a daemon on the default testbed in this
// process at the default time scale, and points the CLI at it (the env of
// this sequential test).
func startInProcessDaemon(t *testing.T) *daemon.Daemon {
	t.Helper()
	dir := t.TempDir()
	state, sock := filepath.Join(dir, "state"), filepath.Join(dir, "gs.sock")
	cfg, err := config.Load(os.Getenv("GRIDSUB_CONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Broker.OutputRoot = filepath.Join(dir, "out")
	spec, err := specFromConfig(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.Start(context.Background(), daemon.Options{Spec: spec, StateDir: state, Socket: sock,
		Interval: cfg.Broker.Interval, Cron: cfg.Broker.Cron})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Errorf("daemon shutdown: %v", err)
		}
	})
	t.Setenv(envStateDir, state)
	t.Setenv(envSocket, sock)
	return d
}

func TestParseExpect(t *testing.T) {
	e, err := parseExpect(`with sim-pair.yaml under serve: failed on B+A exit 3 attempts 2 deadline-met "too wide"`)
	if err != nil {
		t.Fatal(err)
	}
	if e.config != "sim-pair.yaml" || !e.serve || e.state != "failed" || !slices.Equal(e.sites, []string{"A", "B"}) ||
		*e.exit != 3 || *e.tries != 2 || !slices.Equal(e.flags, []string{"deadline-met"}) || e.reason != "too wide" {
		t.Fatalf("%+v", e)
	}
	for _, bad := range []string{"", "running", "completed on", "completed exit x", "completed sometimes", "within x: completed", `rejected "open`} {
		if _, err := parseExpect(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
