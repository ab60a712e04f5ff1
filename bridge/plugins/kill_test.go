package plugins_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/policy/coalloc"
)

// TestPluginKilledMidRun runs GRIDSUB_PLUGINKILL_JOBS (default 200) tiny
// jobs through the broker on both real SLURM sites of the testbed, each
// site's backend an isolated plugin under a Supervisor, and SIGKILLs the
// plugins GRIDSUB_PLUGINKILL_KILLS times (default 6, at seeded random
// moments) while the jobs are submitted and run. Every execution of a job
// leaves a marker file named after the job; at the end every job must be
// completed and have exactly one marker: nothing lost, nothing run twice.
func TestPluginKilledMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs hundreds of jobs on the real SLURM testbed")
	}
	specA, _ := slurmSpec(t, "siteA")
	specB, _ := slurmSpec(t, "siteB")
	njobs, kills := envInt("GRIDSUB_PLUGINKILL_JOBS", 200), envInt("GRIDSUB_PLUGINKILL_KILLS", 6)
	stamp := fmt.Sprintf("pk%d", time.Now().UnixNano()%1_000_000_000)
	// Both sites' compute nodes run on this machine: one marker directory,
	// in siteA's scratch (writable by the job user), serves both.
	markers := filepath.Join(os.Getenv("GRIDSUB_SITEA_SCRATCH"), "pluginkill-"+stamp)
	defer os.RemoveAll(markers)
	ev := &events{}
	opts := plugins.SuperviseOptions{PingInterval: 200 * time.Millisecond, PingTimeout: 5 * time.Second,
		Backoff: 100 * time.Millisecond, CrashLoop: kills + 5, OnEvent: ev.add}
	var sups []*plugins.Supervisor
	var sites []bridge.SiteConfig
	for _, spec := range []plugins.BackendSpec{specA, specB} {
		spec.Config.RemoteDir = filepath.Join(spec.Config.RemoteDir, stamp)
		s, err := plugins.Supervise(context.Background(), spec, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		sups = append(sups, s)
		sites = append(sites, bridge.SiteConfig{Name: spec.Config.Name, Backend: s, H: 1})
	}
	planner, err := coalloc.ByName("greedy-easy")
	if err != nil {
		t.Fatal(err)
	}
	b, err := bridge.New(bridge.Options{Sites: sites, Planner: planner, IDPrefix: stamp + "-", MaxAttempts: 20})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ids []string
	for i := range njobs {
		name := fmt.Sprintf("job%04d", i)
		cmd := fmt.Sprintf("mkdir -p %s && touch %s/%s.$SLURM_JOB_ID && sleep 1", markers, markers, name)
		j, err := b.Submit(ctx, bridge.Request{Name: name, Command: []string{"sh", "-c", cmd}, Nodes: 1, CoresPerNode: 1,
			Estimate: 2 * time.Minute, NoSplit: true}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	rng := rand.New(rand.NewPCG(13, 0))
	start := time.Now()
	var killAt []time.Duration
	for range kills {
		killAt = append(killAt, time.Duration(rng.Int64N(int64(25*time.Second))))
	}
	killed, seen := 0, map[int]bool{}
	deadline := start.Add(8 * time.Minute)
	for {
		for k := range killAt {
			if killAt[k] >= 0 && time.Since(start) > killAt[k] {
				killAt[k] = -1
				s := sups[rng.IntN(len(sups))]
				// A pid already killed may linger as a zombie until
				// its supervisor notices: count each process once.
				if pid := pidOf(s); pid != 0 && !seen[pid] && syscall.Kill(pid, syscall.SIGKILL) == nil {
					seen[pid] = true
					killed++
				}
			}
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, _ = b.Cycle(cctx, time.Now())
		cancel()
		if b.Idle() && allFinal(t, b, ids) && !slices.ContainsFunc(killAt, func(d time.Duration) bool { return d >= 0 }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs not done after %s (%d kills)", time.Since(start), killed)
		}
		time.Sleep(200 * time.Millisecond)
	}
	counts := map[string]int{}
	es, err := os.ReadDir(markers)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		counts[strings.SplitN(e.Name(), ".", 2)[0]]++
	}
	restarts := 0
	waitFor(t, "every killed plugin restarted", 30*time.Second, func() bool {
		restarts = 0
		for _, s := range sups {
			if s.Health().State != "ok" {
				return false
			}
			restarts += s.Health().Restarts
		}
		return restarts >= killed
	})
	bad := 0
	for i, id := range ids {
		j, _ := b.Job(id)
		name := fmt.Sprintf("job%04d", i)
		if j.State != bridge.Completed || counts[name] != 1 {
			bad++
			if bad < 10 {
				t.Errorf("job %s (%s): %s, ran %d times", id, name, j.State, counts[name])
			}
		}
	}
	t.Logf("%d jobs, %d SIGKILLs, %d restarts, %d adopted submissions, %s", njobs, killed, restarts, countOf(ev, "plugin-adopted"), time.Since(start).Round(time.Second))
	if restarts < killed {
		t.Errorf("%d kills but %d restarts", killed, restarts)
	}
}

func allFinal(t *testing.T, b *bridge.Broker, ids []string) bool {
	for _, id := range ids {
		j, err := b.Job(id)
		if err != nil {
			t.Fatal(err)
		}
		if !j.State.Final() {
			return false
		}
	}
	return true
}

func countOf(e *events, kind string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, k := range e.list {
		if k == kind {
			n++
		}
	}
	return n
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
