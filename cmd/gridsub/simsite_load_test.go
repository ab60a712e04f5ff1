package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/simbackend/sshsite"
)

// loadGrid is the grid of the load tests: n sites, SLURM and PBS
// alternating, sizes cycling through sizes.
func loadGrid(n int, sizes []int) (nodes []int, dialects []string) {
	for i := range n {
		nodes = append(nodes, sizes[i%len(sizes)])
		d := sshsite.SLURM
		if i%2 == 1 {
			d = sshsite.PBS
		}
		dialects = append(dialects, d)
	}
	return nodes, dialects
}

// procUsage reads a process's CPU time (user+system) and peak RSS.
func procUsage(pid int) (cpu time.Duration, peakKB int64) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 {
			f := strings.Fields(s[i+2:])
			if len(f) > 12 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				k, _ := strconv.ParseInt(f[12], 10, 64)
				cpu = time.Duration(u+k) * 10 * time.Millisecond // CLK_TCK 100
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		if m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b); m != nil {
			peakKB, _ = strconv.ParseInt(string(m[1]), 10, 64)
		}
	}
	return cpu, peakKB
}

// childCPU reads the CPU time (user+system) of a process's waited-for
// children.
func childCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+2:])
	if len(f) <= 14 {
		return 0
	}
	u, _ := strconv.ParseInt(f[13], 10, 64)
	k, _ := strconv.ParseInt(f[14], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond // CLK_TCK 100
}

var attemptRe = regexp.MustCompile(`-a[0-9]+$`)

// checkExactlyOnce checks that every job ran exactly once over all sites:
// each component of its final placement once at its own site (a
// co-allocated job's components share the attempt's tag, one per site),
// and nothing else under any of its tags — no earlier attempt, no second
// copy. It also checks that the sites ran nothing that is no job of the
// test.
func checkExactlyOnce(t *testing.T, sites []*sshsite.Site, jobs []*bridge.Job) {
	t.Helper()
	want := map[string]map[string]int{} // job id -> site -> runs
	for _, j := range jobs {
		want[j.ID] = map[string]int{}
		for _, c := range j.Comps {
			want[j.ID][c.Site]++
		}
	}
	got := map[string]map[string]int{}
	where := map[string][]string{} // job id -> site:tag x n
	for _, s := range sites {
		for tag, n := range s.Executions() {
			id := attemptRe.ReplaceAllString(tag, "")
			if got[id] == nil {
				got[id] = map[string]int{}
			}
			got[id][s.Config().Name] += n
			where[id] = append(where[id], fmt.Sprintf("%s:%s x%d", s.Config().Name, tag, n))
		}
	}
	bad := 0
	for id, w := range want {
		if !maps.Equal(got[id], w) {
			bad++
			if bad <= 10 {
				t.Errorf("job %s ran at the sites %s, want once per component of its placement %v", id, strings.Join(where[id], ", "), w)
			}
		}
	}
	for id, n := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("the sites ran %q %v: no job of the test", id, n)
		}
	}
	if bad > 10 {
		t.Errorf("... %d jobs in all did not run exactly once", bad)
	}
}

// TestSimsiteLoadThroughServe: jobs submitted to `gridsub serve` over a
// grid of SSH-served simulated sites (both dialects) all complete, none
// lost or duplicated, each run exactly once at a site. In the suite: 120
// jobs, 12 sites (bounded for the suite's time). GRIDSUB_LONG=1: 10,000 jobs, 50 sites
// (GRIDSUB_SIMSITE_LOAD_JOBS / _SITES override; _CLIENTS the concurrent
// submitters, 8 by default). It reports jobs/s through
// the broker, SSH sessions and remote commands per site per minute, the
// broker's CPU time and peak RSS (docs/simsite.md).
func TestSimsiteLoadThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub and runs a daemon over simulated SSH sites")
	}
	// Small sites in the suite, so that the jobs spread over every site
	// and both dialects; the long run has grid50's sizes.
	jobs, nsites, sizes := 120, 12, []int{48, 32}
	if os.Getenv("GRIDSUB_LONG") == "1" {
		jobs, nsites, sizes = 10000, 50, []int{512, 4, 256, 8, 128, 16, 64, 32}
	}
	if v, err := strconv.Atoi(os.Getenv("GRIDSUB_SIMSITE_LOAD_JOBS")); err == nil && v > 0 {
		jobs = v
	}
	if v, err := strconv.Atoi(os.Getenv("GRIDSUB_SIMSITE_LOAD_SITES")); err == nil && v > 0 {
		nsites = v
	}
	bin := buildBinary(t)
	t.Parallel() // mostly waiting on the daemon's cycles
	nodes, dialects := loadGrid(nsites, sizes)
	cfg, sites := simGrid(t, nodes, dialects, "greedy-easy")
	d := t.TempDir()
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	p := startServe(t, bin, state, sock, "--config", cfg)
	c := api.NewUnixClient(sock)
	ctx := context.Background()
	t0 := time.Now()
	ids := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	go func() {
		for i := range jobs {
			next <- i
		}
		close(next)
	}()
	clients := 8
	if v, err := strconv.Atoi(os.Getenv("GRIDSUB_SIMSITE_LOAD_CLIENTS")); err == nil && v > 0 {
		clients = v
	}
	for range clients {
		wg.Go(func() {
			for i := range next {
				j, err := c.Submit(ctx, bridge.Request{Name: fmt.Sprintf("load-%d", i), Command: []string{"/bin/true"},
					Nodes: 1, Estimate: time.Minute})
				if err != nil {
					t.Errorf("submit %d: %v", i, err)
					return
				}
				mu.Lock()
				if ids[j.ID] {
					t.Errorf("id %s handed out twice", j.ID)
				}
				ids[j.ID] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	submitted := time.Since(t0)
	limit := time.Duration(jobs)*150*time.Millisecond + 2*time.Minute
	lastLog := time.Now()
	// Waiting asks for the jobs not yet final only, once a second (the
	// first version listed all 10,000 jobs five times a second: that
	// listing was half the daemon's CPU and most of its allocations, a
	// load of the test, not of the broker); one full listing at the end.
	live := bridge.Filter{States: []bridge.JobState{bridge.Queued, bridge.Submitting, bridge.Dispatched, bridge.Running,
		bridge.Reserved, bridge.Held}, Limit: api.MaxLimit}
	for {
		open, err := c.ListAll(ctx, live)
		if err != nil {
			t.Fatal(err)
		}
		if len(open) == 0 {
			break
		}
		if time.Since(lastLog) > 30*time.Second {
			lastLog = time.Now()
			cpu, peak := procUsage(p.cmd.Process.Pid)
			t.Logf("%s: %d not final: %s (broker CPU %s, peak RSS %d MB, load %s)", time.Since(t0).Round(time.Second), len(open),
				statesString(countStates(open)), cpu, peak/1024, loadAvg())
		}
		if time.Since(t0) > limit {
			cpu, peak := procUsage(p.cmd.Process.Pid)
			t.Fatalf("after %s %d of %d jobs are not final: %s (broker CPU %s, peak RSS %d MB)", limit, len(open), jobs,
				statesString(countStates(open)), cpu, peak/1024)
		}
		time.Sleep(time.Second)
	}
	wall := time.Since(t0)
	cpu, peak := procUsage(p.cmd.Process.Pid)
	siteCPU, _ := procUsage(os.Getpid()) // the sites and the clients, in this process
	jobCPU := childCPU(os.Getpid())      // the jobs' processes and the batch commands' shells the sites ran
	all, err := c.ListAll(ctx, bridge.Filter{Limit: api.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	p.term(t, sock)
	if len(all) != jobs || len(ids) != jobs {
		t.Errorf("%d jobs listed, %d acknowledged, want %d", len(all), len(ids), jobs)
	}
	for _, j := range all {
		if j.State != bridge.Completed {
			t.Errorf("job %s is %s (%s), want completed", j.ID, j.State, j.Reason)
		}
		if !ids[j.ID] {
			t.Errorf("job %s listed but never acknowledged", j.ID)
		}
	}
	checkExactlyOnce(t, sites, all)
	t.Log(batchLogSummary(p.logs.Bytes()))
	var sessions, commands, sbatch, qsub, status int64
	for _, s := range sites {
		st := s.Stats()
		sessions += st.Sessions
		commands += st.Commands
		sbatch += st.Batch["sbatch"]
		qsub += st.Batch["qsub"]
		status += st.Batch["squeue"] + st.Batch["qstat"]
	}
	perSiteMin := func(n int64) float64 { return float64(n) / float64(len(sites)) / wall.Minutes() }
	t.Logf("simsite load: %d jobs over %d sites in %s (submitted in %s): %.1f jobs/s end to end; per site per minute %.0f SSH sessions, %.0f remote commands (%.0f squeue/qstat); sbatch %d, qsub %d; broker CPU %s (%.0f%% of one core), peak RSS %d MB; test process (sites, clients) CPU %s, its children (jobs, shells, stubs) %s; load average %s",
		jobs, len(sites), wall.Round(time.Millisecond), submitted.Round(time.Millisecond), float64(jobs)/wall.Seconds(),
		perSiteMin(sessions), perSiteMin(commands), perSiteMin(status), sbatch, qsub, cpu, 100*cpu.Seconds()/wall.Seconds(), peak/1024, siteCPU.Round(time.Millisecond), jobCPU.Round(time.Millisecond), loadAvg())
}

// batchLogSummary sums up the daemon's "batched submission" log lines per
// dialect (the sites are named <dialect><i>): how many batches, jobs per
// batch, and how long one took (mean, max).
func batchLogSummary(logs []byte) string {
	type sum struct {
		n, jobs   int
		took, top time.Duration
	}
	by := map[string]*sum{}
	for _, l := range strings.Split(string(logs), "\n") {
		var rec struct {
			Msg  string
			Site string
			Jobs int
			Took time.Duration // slog's JSON handler writes a duration in nanoseconds
		}
		if json.Unmarshal([]byte(l), &rec) != nil || rec.Msg != "batched submission" {
			continue
		}
		d := strings.TrimRight(rec.Site, "0123456789")
		if by[d] == nil {
			by[d] = &sum{}
		}
		x := by[d]
		x.n++
		x.jobs += rec.Jobs
		x.took += rec.Took
		x.top = max(x.top, rec.Took)
	}
	if len(by) == 0 {
		return "no batched submissions logged"
	}
	var parts []string
	for _, d := range slices.Sorted(maps.Keys(by)) {
		x := by[d]
		parts = append(parts, fmt.Sprintf("%s sites: %d SubmitBatch calls, %d jobs, %.1f jobs each, %s each on average, %s at most",
			d, x.n, x.jobs, float64(x.jobs)/float64(x.n), (x.took/time.Duration(x.n)).Round(time.Millisecond), x.top.Round(time.Millisecond)))
	}
	return "batched submissions: " + strings.Join(parts, "; ")
}

// loadAvg is the machine's load average over 1, 5 and 15 minutes.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// statesString and countStates for []*bridge.Job.
func countStates(js []*bridge.Job) map[bridge.JobState]int {
	m := map[bridge.JobState]int{}
	for _, j := range js {
		m[j.State]++
	}
	return m
}

func statesString(m map[bridge.JobState]int) string {
	var b strings.Builder
	for s, n := range m {
		fmt.Fprintf(&b, "%s=%d ", s, n)
	}
	return b.String()
}
