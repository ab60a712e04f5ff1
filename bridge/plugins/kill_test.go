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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/policy/coalloc"
)

// TestPluginKilledMidRun runs GRIDSUB_PLUGINKILL_JOBS (default 200) tiny
// jobs through the broker on both real SLURM sites of the testbed, each
// site's backend an isolated plugin under a Supervisor, and SIGKILLs the
// plugins GRIDSUB_PLUGINKILL_KILLS times (default 6, at seeded random
// moments) while the jobs are submitted and run, and as many times again
// in the middle of a Submit (a few milliseconds into the sbatch), where
// the site may have accepted the job before the host heard of it. Every
// execution of a job
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
		Backoff: 100 * time.Millisecond, CrashLoop: 2*kills + 5, OnEvent: ev.add}
	seen := &killed{pids: map[int]bool{}, left: kills, rng: rand.New(rand.NewPCG(17, 0))}
	var sups []*plugins.Supervisor
	var sites []bridge.SiteConfig
	for _, spec := range []plugins.BackendSpec{specA, specB} {
		spec.Config.RemoteDir = filepath.Join(spec.Config.RemoteDir, stamp)
		// The testbed's scratch is on this machine: remove this run's job
		// directories once it passed (kept after a failure, to look at).
		dir := spec.Config.RemoteDir
		t.Cleanup(func() {
			if !t.Failed() {
				os.RemoveAll(dir)
			}
		})
		s, err := plugins.Supervise(context.Background(), spec, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		sups = append(sups, s)
		sites = append(sites, bridge.SiteConfig{Name: spec.Config.Name, Backend: &killingSubmits{Supervisor: s, seen: seen}, H: 1})
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
	deadline := start.Add(8 * time.Minute)
	for {
		for k := range killAt {
			if killAt[k] >= 0 && time.Since(start) > killAt[k] {
				killAt[k] = -1
				s := sups[rng.IntN(len(sups))]
				// A pid already killed may linger as a zombie until
				// its supervisor notices: count each process once.
				seen.kill(pidOf(s))
			}
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, _ = b.Cycle(cctx, time.Now())
		cancel()
		if b.Idle() && allFinal(t, b, ids) && !slices.ContainsFunc(killAt, func(d time.Duration) bool { return d >= 0 }) && seen.leftInSubmit() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs not done after %s (%d kills)", time.Since(start), seen.count())
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
	killed := seen.count()
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
	t.Logf("%d jobs, %d SIGKILLs (%d inside a Submit), %d restarts, %d submissions adopted after the plugin died in them, %s",
		njobs, killed, seen.inSubmit, restarts, countOf(ev, "plugin-adopted"), time.Since(start).Round(time.Second))
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

// killed SIGKILLs plugin processes, each once (a pid already killed may
// linger as a zombie until its supervisor notices).
type killed struct {
	mu       sync.Mutex
	pids     map[int]bool
	n        int
	left     int // kills still to make inside a Submit
	inSubmit int
	submits  int
	rng      *rand.Rand
}

func (k *killed) kill(pid int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if pid == 0 || k.pids[pid] || syscall.Kill(pid, syscall.SIGKILL) != nil {
		return false
	}
	k.pids[pid] = true
	k.n++
	return true
}

func (k *killed) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.n
}

func (k *killed) leftInSubmit() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.left
}

// killingSubmits is the site's backend (the supervisor, with every
// capability it declares) whose every 15th Submit, while kills are left,
// has the plugin SIGKILLed 0-60ms into the call.
type killingSubmits struct {
	*plugins.Supervisor
	seen *killed
}

func (b *killingSubmits) Submit(ctx context.Context, spec *backends.JobSpec) (backends.JobID, error) {
	b.maybeKill(1)
	return b.Supervisor.Submit(ctx, spec)
}

// SubmitBatch: the broker submits a cycle's jobs for a site in one batch
// (backends.BatchSubmitter), so the kills must land in batches too: a
// batch holding a 15th submission has the plugin SIGKILLed 0-60ms into it.
func (b *killingSubmits) SubmitBatch(ctx context.Context, specs []*backends.JobSpec) []backends.SubmitResult {
	b.maybeKill(len(specs))
	return b.Supervisor.SubmitBatch(ctx, specs)
}

// maybeKill counts n submissions and, when one of them is a 15th while
// kills are left, SIGKILLs the plugin shortly after.
func (b *killingSubmits) maybeKill(n int) {
	k := b.seen
	k.mu.Lock()
	hit := false
	for range n {
		k.submits++
		if k.left > 0 && k.submits%15 == 0 {
			hit = true
		}
	}
	var delay time.Duration
	if hit {
		k.left--
		delay = time.Duration(k.rng.Int64N(int64(60 * time.Millisecond)))
	}
	k.mu.Unlock()
	if hit {
		pid := pidOf(b.Supervisor)
		time.AfterFunc(delay, func() {
			if k.kill(pid) {
				k.mu.Lock()
				k.inSubmit++
				k.mu.Unlock()
			}
		})
	}
}
