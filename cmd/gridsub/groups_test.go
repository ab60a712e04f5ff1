package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// TestServeArrayAndPipelineAcrossSIGKILL is issue 16's acceptance for
// arrays and dependencies: examples/array.yaml (100 elements, at most 10
// at once) and examples/pipeline.yaml (three afterok steps on two sites)
// run under `gridsub serve` on the default simulated testbed; the daemon
// is SIGKILLed once part of the array has completed and restarted on the
// same state directory. In the end both completed, every element exists
// exactly once and completed once, no more than 10 elements were ever
// unfinished at once (watched through the API all along, and checked
// again on the elements' run intervals), and the pipeline's steps ran in
// order on the sites their file names.
func TestServeArrayAndPipelineAcrossSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the daemon")
	}
	bin := buildBinary(t)
	t.Chdir("../..")
	d, err := os.MkdirTemp("", "gsarr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	t.Setenv(envSocket, sock)
	p := startServe(t, bin, state, sock, "--time-scale", "300")
	ctx := context.Background()
	c := api.NewUnixClient(sock)

	code, stdout, stderr := cli("examples/array.yaml")
	arr := strings.TrimSpace(stdout)
	if code != 0 || arr == "" {
		t.Fatalf("array: exit %d %q %s", code, stdout, stderr)
	}
	code, stdout, stderr = cli("examples/pipeline.yaml")
	pipe := strings.TrimSpace(stdout)
	if code != 0 || pipe == "" {
		t.Fatalf("pipeline: exit %d %q %s", code, stdout, stderr)
	}

	// Watch the array's unfinished elements through the API all along
	// (also while the daemon is down: those polls fail and are skipped).
	var mu sync.Mutex
	maxOpen, polls := 0, 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			els, err := api.NewUnixClient(sock).ListAll(ctx, bridge.Filter{Parent: arr, Limit: api.MaxLimit})
			if err != nil {
				continue
			}
			open := 0
			for _, e := range els {
				if !e.State.Final() {
					open++
				}
			}
			mu.Lock()
			maxOpen, polls = max(maxOpen, open), polls+1
			mu.Unlock()
		}
	})
	t.Cleanup(func() { close(stop); wg.Wait() })

	completed := func() int {
		j, err := c.Job(ctx, arr)
		if err != nil || j.Group == nil {
			return -1
		}
		return j.Group.Counts[bridge.Completed]
	}
	deadline := time.Now().Add(30 * time.Second)
	for completed() < 30 {
		if time.Now().After(deadline) {
			t.Fatalf("30 s and only %d elements completed", completed())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := completed(); n >= 100 {
		t.Fatalf("the array completed before the kill (%d)", n)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	p = startServe(t, bin, state, sock, "--time-scale", "300")

	final := func(id string) *bridge.Job {
		deadline := time.Now().Add(60 * time.Second)
		for {
			j, err := c.Job(ctx, id)
			if err == nil && j.State.Final() {
				return j
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not final after 60 s: %+v %v\n%s", id, j, err, p.logs)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	a, pl := final(arr), final(pipe)
	if a.State != bridge.Completed || a.Group.Made != 100 || a.Group.Counts[bridge.Completed] != 100 {
		t.Fatalf("array %s %q %+v", a.State, a.Reason, a.Group)
	}
	els, err := c.ListAll(ctx, bridge.Filter{Parent: arr, Limit: api.MaxLimit, Events: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	type span struct {
		at time.Time
		d  int
	}
	var edges []span
	for _, e := range els {
		if seen[e.Index] || e.ID != bridge.ElementID(arr, e.Index) || e.Index < 1 || e.Index > 100 {
			t.Errorf("element %s index %d: duplicate or misnamed", e.ID, e.Index)
		}
		seen[e.Index] = true
		n := 0
		for _, ev := range e.Events {
			if ev.Kind == "completed" {
				n++
			}
		}
		if e.State != bridge.Completed || n != 1 {
			t.Errorf("element %s %s with %d completed events", e.ID, e.State, n)
		}
		edges = append(edges, span{e.Start, 1}, span{e.End, -1})
	}
	if len(seen) != 100 {
		t.Fatalf("%d distinct elements, want 100", len(seen))
	}
	// The run intervals never overlap more than 10 deep (an end and a start
	// at the same instant: the end first).
	slices.SortFunc(edges, func(x, y span) int {
		if c := x.at.Compare(y.at); c != 0 {
			return c
		}
		return x.d - y.d
	})
	depth, deepest := 0, 0
	for _, e := range edges {
		depth += e.d
		deepest = max(deepest, depth)
	}
	mu.Lock()
	t.Logf("array: %d polls, at most %d elements unfinished at once, %d running at once", polls, maxOpen, deepest)
	if maxOpen > 10 || deepest > 10 || polls < 10 || maxOpen == 0 {
		t.Errorf("limit 10: %d unfinished, %d running at once (%d polls)", maxOpen, deepest, polls)
	}
	mu.Unlock()

	if pl.State != bridge.Completed || pl.Group.Counts[bridge.Completed] != 3 {
		t.Fatalf("pipeline %s %q %+v", pl.State, pl.Reason, pl.Group)
	}
	steps, err := c.ListAll(ctx, bridge.Filter{Parent: pipe, Limit: api.MaxLimit, Events: true})
	if err != nil || len(steps) != 3 {
		t.Fatalf("%d steps: %v", len(steps), err)
	}
	for i, want := range []string{"Shanghai", "Beijing", "Shanghai"} {
		s := steps[i]
		if s.Index != i+1 || s.State != bridge.Completed || len(s.Comps) != 1 || s.Comps[0].Site != want {
			t.Errorf("step %d: %s %s %v, want completed on %s", i+1, s.ID, s.State, s.Comps, want)
		}
		if i > 0 && s.Start.Before(steps[i-1].End) {
			t.Errorf("step %d started %s, before step %d ended %s\n%v\n%v", i+1, s.Start, i, steps[i-1].End, steps[i-1].Events, s.Events)
		}
	}

	// status summarises a group; list folds its elements into its row.
	code, stdout, _ = cli("status", arr)
	if code != 0 || !strings.Contains(stdout, "100 of 100 ended (100 completed)") {
		t.Errorf("status %s: exit %d\n%s", arr, code, stdout)
	}
	code, stdout, _ = cli("status", pipe)
	for _, w := range []string{"prepare", "compute", "collect", bridge.ElementID(pipe, 3)} {
		if code != 0 || !strings.Contains(stdout, w) {
			t.Errorf("status %s lacks %q:\n%s", pipe, w, stdout)
		}
	}
	code, stdout, _ = cli("list")
	if code != 0 || strings.Contains(stdout, bridge.ElementID(arr, 5)+" ") || !strings.Contains(stdout, arr) {
		t.Errorf("list does not fold the array's elements:\n%s", stdout)
	}
	code, stdout, _ = cli("list", "--parent", arr)
	if code != 0 || strings.Count(stdout, arr+"_") != 100 {
		t.Errorf("list --parent %s: %d elements", arr, strings.Count(stdout, arr+"_"))
	}
	// A dependency on an unknown id is refused (a bad job file: exit 2)
	// with the field and the reason; one on the completed array is taken
	// and runs.
	dep := filepath.Join(d, "dep.yaml")
	write := func(after string) {
		if err := os.WriteFile(dep, []byte("name: dep\ncommand: [/bin/true]\nresources: {nodes: 1, walltime: 1m}\nafterok: ["+after+"]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("g999999")
	if code, _, stderr := cli(dep); code != exitUsage || !strings.Contains(stderr, "afterok[0]: ") || !strings.Contains(stderr, `no job "g999999"`) {
		t.Errorf("afterok on an unknown id: exit %d\n%s", code, stderr)
	}
	write(arr)
	code, stdout, stderr = cli("submit", dep, "--wait", "-q")
	if code != 0 || !strings.Contains(stdout, "completed") {
		t.Errorf("afterok on the completed array: exit %d\n%s\n%s", code, stdout, stderr)
	}
	p.term(t, sock)
}

// TestSweepExampleEmbedded: examples/sweep.yaml on the embedded broker: all
// 6 elements complete, the summary in JSON counts them.
func TestSweepExampleEmbedded(t *testing.T) {
	t.Chdir("../..")
	out := t.TempDir()
	code, stdout, stderr := cli("--embedded", "examples/sweep.yaml", "--out-dir", out, "-o", "json", "-q")
	var j struct {
		State string `json:"state"`
		Group struct {
			Kind  string         `json:"kind"`
			Total int            `json:"total"`
			Limit int            `json:"limit"`
			Ended map[string]int `json:"ended"`
		} `json:"group"`
	}
	if err := json.Unmarshal([]byte(stdout), &j); code != 0 || err != nil {
		t.Fatalf("exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	if j.State != "completed" || j.Group.Kind != "sweep" || j.Group.Total != 6 || j.Group.Limit != 4 || j.Group.Ended["completed"] != 6 {
		t.Fatalf("%+v", j)
	}
}
