package bridge

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/pbs/pbslock"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/policy"
)

// These tests drive the broker against the real SLURM testbed (siteA) with
// native arrays on; without the testbed they are skipped.

// frozenStore stops recording at a moment a test chooses: what it holds
// then is what a daemon SIGKILLed at that moment left on disk.
type frozenStore struct {
	*MemStore
	mu     sync.Mutex
	frozen bool
	base   uint64
}

func (f *frozenStore) Put(ctx context.Context, j *Job) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return nil // the process is gone: nothing more reaches the disk
	}
	return f.MemStore.Put(ctx, j)
}

// NextID starts the job ids far from other runs': a native array's tag
// names its parent, and an earlier run's arrays are still at the site.
func (f *frozenStore) NextID(ctx context.Context) (uint64, error) {
	n, err := f.MemStore.NextID(ctx)
	return n + f.base, err
}

func (f *frozenStore) freeze() { f.mu.Lock(); f.frozen = true; f.mu.Unlock() }

// sbatchCounter counts the sbatch and qsub invocations that reach the
// site (alone, in a submission script or in a batch).
type sbatchCounter struct {
	run backends.Runner
	mu  sync.Mutex
	n   int
}

func (c *sbatchCounter) Run(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	c.mu.Lock()
	for i, w := range argv {
		switch {
		case i == 0 && w == "sbatch", strings.Contains(w, "exec sbatch"), i == 3 && (w == "gridsub-array" || w == "gridsub-submit"):
			c.n++
		case i == 2 && argv[0] == "/bin/sh":
			c.n += strings.Count("\n"+w, "\nsbatch ") + strings.Count(w, "gridsub-submit")
		}
	}
	c.mu.Unlock()
	return c.run.Run(ctx, argv, stdin)
}

func (c *sbatchCounter) count() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

// crashAfterArrays is a SLURM site whose daemon dies right after a native
// submission returned, before the broker records its outcome.
type crashAfterArrays struct {
	nativeSite
	store *frozenStore
}

// nativeSite is a real SSH batch site with native arrays on.
type nativeSite interface {
	backends.Backend
	backends.ArraySubmitter
	backends.Finder
	Exec() *sshbatch.Exec
}

func (c crashAfterArrays) SubmitArrays(ctx context.Context, specs []*backends.JobSpec) []backends.SubmitResult {
	res := c.nativeSite.SubmitArrays(ctx, specs)
	c.store.freeze()
	return res
}

func realSiteA(t *testing.T, run func(backends.Runner) backends.Runner) *slurm.Backend {
	t.Helper()
	key := os.Getenv("GRIDSUB_SSH_KEY")
	port, _ := strconv.Atoi(os.Getenv("GRIDSUB_SITEA_SSH_PORT"))
	if key == "" || port == 0 {
		t.Skip("no SLURM testbed: run `bash scripts/slurm-testbed.sh start` and source its testbed.env")
	}
	c, err := transport.Dial(context.Background(), transport.Config{Host: os.Getenv("GRIDSUB_SSH_HOST"), Port: port,
		User: os.Getenv("GRIDSUB_SSH_USER"), KeyFiles: []string{key}, KnownHosts: []string{os.Getenv("GRIDSUB_SSH_KNOWN_HOSTS")}, MaxSessions: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return slurm.New(slurm.Config{Name: "siteA", RemoteDir: os.Getenv("GRIDSUB_SITEA_SCRATCH"), User: os.Getenv("GRIDSUB_SSH_USER"), NativeArrays: true},
		run(c), func(root string) backends.Stager { return c.Stager(root) })
}

// nativePBSSite is the OpenPBS testbed's server with native arrays on.
func nativePBSSite(t *testing.T, run func(backends.Runner) backends.Runner) *pbs.Backend {
	t.Helper()
	key := os.Getenv("GRIDSUB_PBS_SSH_KEY")
	port, _ := strconv.Atoi(os.Getenv("GRIDSUB_PBS_SSH_PORT"))
	if key == "" || port == 0 {
		t.Skip("no OpenPBS testbed: run `bash scripts/pbs-testbed.sh start` and source /var/tmp/gridsub-pbs/testbed.env")
	}
	c, err := transport.Dial(context.Background(), transport.Config{Host: os.Getenv("GRIDSUB_PBS_SSH_HOST"), Port: port,
		User: os.Getenv("GRIDSUB_PBS_SSH_USER"), KeyFiles: []string{key}, KnownHosts: []string{os.Getenv("GRIDSUB_PBS_SSH_KNOWN_HOSTS")}, MaxSessions: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	root := os.Getenv("GRIDSUB_PBS_HOME_DIR") + "/gridsub-test"
	return pbs.New(pbs.Config{Name: "pbs", RemoteDir: root, User: os.Getenv("GRIDSUB_PBS_SSH_USER"), BinDir: os.Getenv("GRIDSUB_PBS_BIN"),
		NativeArrays: true}, run(c), func(string) backends.Stager { return c.Stager(root) })
}

// cancelArray removes what is left of a test's native array.
func cancelArray(x *sshbatch.Exec, array string) {
	argv := []string{"scancel", array}
	if strings.Contains(array, ".") { // PBS: 12[].server
		bin := os.Getenv("GRIDSUB_PBS_BIN")
		if bin == "" {
			bin = pbs.DefaultBinDir
		}
		argv = []string{bin + "/qdel", "-W", "force", array + "[]" + ""}
	}
	_, _ = x.Run(context.Background(), argv, nil)
}

// allAtSite0 starts every queued job at site 0: the site queues what it
// cannot run yet (so one cycle dispatches a whole array).
func allAtSite0(_ *policy.Snapshot, j policy.Job) *policy.Decision {
	return &policy.Decision{Job: j.ID, Action: policy.Start, Chosen: policy.Option{Parts: []policy.Part{{Site: 0, Nodes: j.Width}}}}
}

// TestNativeArraySIGKILLAdoptsReal: a 200-element array goes to the real
// SLURM siteA as ONE sbatch --array; the daemon dies between that
// submission and its record (the store keeps only the dispatch intents); a
// restarted broker finds every element by its own tag and adopts it — no
// second sbatch — and every element completes, mapped back to its grid job.
func TestNativeArraySIGKILLAdoptsReal(t *testing.T) {
	if testing.Short() {
		t.Skip("real SLURM testbed")
	}
	cnt := &sbatchCounter{}
	nativeCrashAdopts(t, 200, cnt.count, func() nativeSite {
		return realSiteA(t, func(r backends.Runner) backends.Runner { cnt.run = r; return cnt })
	}, "_")
}

// TestNativeArrayPBSSIGKILLAdoptsReal is the same on the real OpenPBS
// server: ONE qsub -J 0-199, the crash, every subjob adopted.
func TestNativeArrayPBSSIGKILLAdoptsReal(t *testing.T) {
	if testing.Short() {
		t.Skip("real OpenPBS testbed")
	}
	if os.Getenv("GRIDSUB_PBS_SSH_KEY") != "" {
		pbslock.Hold(t) // one vnode, shared with the other packages' PBS tests
	}
	cnt := &sbatchCounter{}
	nativeCrashAdopts(t, 200, cnt.count, func() nativeSite {
		return nativePBSSite(t, func(r backends.Runner) backends.Runner { cnt.run = r; return cnt })
	}, "[")
}

// nativeCrashAdopts runs an n-element array through a broker that dies
// right after the native submission, then through a restarted one; sep
// separates the native array's id from the element's index in remote ids
// ("." for Grid Engine, whose task is the index plus one).
func nativeCrashAdopts(t *testing.T, n int, submissions func() int, site func() nativeSite, sep string) {
	mem := NewMemStore()
	fs := &frozenStore{MemStore: mem, base: uint64(time.Now().UnixNano()/1e6) % 1_000_000_000 * 1000}
	site1 := crashAfterArrays{site(), fs}
	b1, err := New(Options{Sites: []SiteConfig{{Name: "siteA", Backend: site1, H: 1}}, Planner: scriptPlanner{allAtSite0}, Store: fs})
	if err != nil {
		t.Fatal(err)
	}
	r := Request{Name: "native", Command: []string{"sh", "-c", `echo "element $GRIDSUB_ARRAY_INDEX"`}, Nodes: 1, CoresPerNode: 1,
		Estimate: time.Minute, Array: "0-" + strconv.Itoa(n-1)}
	ctx := context.Background()
	p, err := b1.Submit(ctx, r, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5 && !fs.frozen; i++ {
		if _, err := b1.Cycle(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if !fs.frozen {
		t.Fatal("no native submission in 5 cycles")
	}
	if got := submissions(); got != 1 {
		t.Fatalf("%d submission commands for the array's first dispatch, want 1", got)
	}
	els, _ := mem.List(ctx, Filter{Parent: p.ID})
	if len(els) != n {
		t.Fatalf("%d elements stored, want %d", len(els), n)
	}
	for _, e := range els {
		if e.State != Submitting || len(e.Comps) != 1 || e.Comps[0].RemoteID != "" {
			t.Fatalf("element %s stored %s %+v: want the bare dispatch intent (the crash hid the outcome)", e.ID, e.State, e.Comps)
		}
	}
	var array string
	t.Cleanup(func() {
		if array != "" {
			cancelArray(site1.Exec(), array)
		}
	})
	// The restarted daemon: a new broker and backend over what was stored.
	site2 := site()
	b2, err := New(Options{Sites: []SiteConfig{{Name: "siteA", Backend: site2, H: 1}}, Planner: scriptPlanner{allAtSite0}, Store: &frozenStore{MemStore: mem, base: fs.base}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b2.Recover(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for mustJob(t, b2, p.ID).State == Running {
		if time.Now().After(deadline) {
			t.Fatalf("array not done after 5 minutes: %+v", mustJob(t, b2, p.ID).Group)
		}
		if _, err := b2.Cycle(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	if got := submissions(); got != 1 {
		t.Fatalf("%d submission commands in all, want 1: an element was submitted again", got)
	}
	if st := mustJob(t, b2, p.ID); st.State != Completed || st.Group.Counts[Completed] != n {
		t.Fatalf("parent %s %+v %s", st.State, st.Group, st.Reason)
	}
	els, _ = mem.List(ctx, Filter{Parent: p.ID})
	for _, e := range els {
		_, ix, _ := strings.Cut(e.ID, p.ID+"_")
		if e.State != Completed || len(e.Comps) != 1 || e.Attempts != 1 {
			t.Fatalf("element %s: %s attempts %d %+v", e.ID, e.State, e.Attempts, e.Comps)
		}
		a, eix, ok := strings.Cut(string(e.Comps[0].RemoteID), sep)
		switch sep {
		case "[":
			eix, _, _ = strings.Cut(eix, "]")
		case ".": // Grid Engine: task i+1 is element i
			task, _ := strconv.Atoi(eix)
			eix = strconv.Itoa(task - 1)
		}
		if !ok || eix != ix || (array != "" && a != array) {
			t.Fatalf("element %s has remote id %s (array %s)", e.ID, e.Comps[0].RemoteID, array)
		}
		array = a
	}
}
