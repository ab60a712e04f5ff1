package slurm_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// counting counts the sbatch and squeue invocations that pass through it
// (an sbatch inside a batch script counts once per line that runs it) and
// can cut the session after the native array's sbatch ran (cut).
type counting struct {
	run    backends.Runner
	mu     sync.Mutex
	sbatch int
	squeue int
	cut    bool
}

func sbatchesIn(argv []string) int {
	n := 0
	for i, w := range argv {
		switch {
		case w == "sbatch" && i == 0:
			n++
		case strings.Contains(w, "exec sbatch"):
			n++
		case i == 2 && argv[0] == sshbatch.Shell:
			n += strings.Count("\n"+w, "\nsbatch ")
		}
	}
	return n
}

func (c *counting) Run(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	c.mu.Lock()
	c.sbatch += sbatchesIn(argv)
	for _, w := range argv {
		if w == "squeue" {
			c.squeue++
		}
	}
	cut := c.cut && len(argv) > 0 && argv[0] == "sbatch"
	c.mu.Unlock()
	r, err := c.run.Run(ctx, argv, stdin)
	if cut && err == nil {
		return backends.Result{}, errors.New("connection lost (simulated, after the command ran)")
	}
	return r, err
}

func (c *counting) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sbatch, c.squeue
}

// arraySpecs are n elements of a grid array parent, attempt 1: element i
// prints its index and exits 7 when i%5 == 4, else 0.
func arraySpecs(parent string, n int) []*backends.JobSpec {
	specs := make([]*backends.JobSpec, n)
	for i := range specs {
		specs[i] = &backends.JobSpec{GridID: backends.ElementTag(parent, i, 1), Name: "arr", Nodes: 1, CoresPerNode: 1,
			Walltime: time.Minute, Env: map[string]string{"GRIDSUB_ARRAY_INDEX": fmt.Sprint(i)},
			Command: []string{"sh", "-c", `echo "element $GRIDSUB_ARRAY_INDEX in $PWD"; [ $((GRIDSUB_ARRAY_INDEX % 5)) -ne 4 ] || exit 7`}}
	}
	return specs
}

func nativeBackend(t testing.TB, s site, run backends.Runner) *slurm.Backend {
	c := dial(t, s)
	return slurm.New(slurm.Config{Name: s.name, RemoteDir: s.scratch, User: s.ssh.User, NativeArrays: true},
		run, func(root string) backends.Stager { return c.Stager(root) })
}

// TestNativeArrayReal: 200 elements of one grid array go to the real SLURM
// testbed as ONE sbatch (--array), every element runs in its own job
// directory, is tracked by one squeue per poll as <array>_<index>, ends
// with its own exit code, and a fresh backend (a restarted daemon) finds
// each element by its own tag.
func TestNativeArrayReal(t *testing.T) {
	s := testSite(t, "siteA")
	c := dial(t, s)
	cr := &counting{run: c}
	b := nativeBackend(t, s, cr)
	if !b.NativeArrays() {
		t.Fatal("NativeArrays is false with the option set on a SLURM site")
	}
	const n = 200
	parent := "arr" + strings.ReplaceAll(gridID("x"), "-", "")
	specs := arraySpecs(parent, n)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	t0 := time.Now()
	res := b.SubmitArrays(ctx, specs)
	took := time.Since(t0)
	ids := make([]backends.JobID, n)
	array := ""
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("element %d: %v", i, r.Err)
		}
		a, ix, ok := strings.Cut(string(r.ID), "_")
		if !ok || ix != fmt.Sprint(i) || (array != "" && a != array) {
			t.Fatalf("element %d got remote id %q (array %q)", i, r.ID, array)
		}
		array, ids[i] = a, r.ID
	}
	if sb, _ := cr.counts(); sb != 1 {
		t.Fatalf("%d sbatch invocations for %d elements, want 1 native array", sb, n)
	}
	t.Logf("native array %s of %d elements submitted in %s with 1 sbatch", array, n, took.Round(time.Millisecond))
	t.Cleanup(func() { _, _ = c.Run(context.Background(), []string{"scancel", array}, nil) })

	// Tracked by one squeue per poll until every element ended.
	var sts []backends.JobStatus
	for {
		_, q0 := cr.counts()
		var err error
		sts, err = b.Status(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		if _, q1 := cr.counts(); q1-q0 != 1 {
			t.Fatalf("one poll of %d elements ran %d squeue", n, q1-q0)
		}
		done := 0
		for _, st := range sts {
			if st.State.Final() {
				done++
			}
		}
		if done == n {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d elements ended", done, n)
		}
		time.Sleep(2 * time.Second)
	}
	for i, st := range sts {
		want, code := backends.StateCompleted, 0
		if i%5 == 4 {
			want, code = backends.StateFailed, 7
		}
		if st.ID != ids[i] || st.State != want || st.ExitCode != code || st.GridID != specs[i].GridID {
			t.Fatalf("element %d: %+v, want %s exit %d tag %s", i, st, want, code, specs[i].GridID)
		}
	}
	// Each element ran in its own job directory and wrote its own files.
	for _, i := range []int{0, 4, 137, n - 1} {
		dir := s.scratch + "/gridsub/" + specs[i].GridID
		r, err := c.Run(ctx, []string{"cat", dir + "/" + slurm.StdoutFile, dir + "/" + slurm.ExitFile}, nil)
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("element %d's files: %v %s", i, err, r.Stderr)
		}
		want := fmt.Sprintf("element %d in %s\n%d\n", i, dir, map[bool]int{true: 7, false: 0}[i%5 == 4])
		if !strings.HasSuffix(string(r.Stdout), want) || !strings.Contains(string(r.Stdout), "element") {
			t.Fatalf("element %d's stdout and exit file: %q, want %q", i, r.Stdout, want)
		}
	}
	// A restarted daemon (a backend that never saw the submission) finds
	// each element by its own tag, and only that one.
	fresh := nativeBackend(t, s, c)
	for _, i := range []int{0, 1, 99, n - 1} {
		found, err := fresh.FindByGridID(ctx, specs[i].GridID)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != 1 || found[0].ID != ids[i] {
			t.Fatalf("find by tag %s: %+v, want exactly %s", specs[i].GridID, found, ids[i])
		}
	}
}

// TestNativeArrayCutReal: the session is cut after the array's sbatch ran
// (its answer lost): the elements are found by their tags among the live
// jobs and get their ids — none is reported unsubmitted, and no second
// sbatch runs.
func TestNativeArrayCutReal(t *testing.T) {
	s := testSite(t, "siteA")
	c := dial(t, s)
	cr := &counting{run: c, cut: true}
	b := nativeBackend(t, s, cr)
	parent := "cut" + strings.ReplaceAll(gridID("x"), "-", "")
	specs := arraySpecs(parent, 12)
	for _, sp := range specs {
		sp.Command = []string{"sleep", "30"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := b.SubmitArrays(ctx, specs)
	var array string
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("element %d: %v", i, r.Err)
		}
		a, ix, _ := strings.Cut(string(r.ID), "_")
		if ix != fmt.Sprint(i) {
			t.Fatalf("element %d: id %s", i, r.ID)
		}
		array = a
	}
	t.Cleanup(func() { _, _ = c.Run(context.Background(), []string{"scancel", array}, nil) })
	if sb, _ := cr.counts(); sb != 1 {
		t.Fatalf("%d sbatch invocations, want 1", sb)
	}
	if err := b.Cancel(ctx, res[3].ID); err != nil {
		t.Fatalf("cancel element 3: %v", err)
	}
}

// TestNativeArrayTimingReal (GRIDSUB_LONG=1) measures, side by side in one
// run, the submission of 200 elements as one native array and as a batch
// of 200 sbatch (docs/arrays.md); the jobs are cancelled right after.
func TestNativeArrayTimingReal(t *testing.T) {
	if os.Getenv("GRIDSUB_LONG") == "" {
		t.Skip("a measurement: GRIDSUB_LONG=1")
	}
	s := testSite(t, "siteA")
	c := dial(t, s)
	ctx := context.Background()
	const n = 200
	for round := range 3 {
		for _, native := range []bool{true, false} {
			cr := &counting{run: c}
			b := nativeBackend(t, s, cr)
			parent := fmt.Sprintf("tm%v%d%s", native, round, strings.ReplaceAll(gridID("x"), "-", ""))
			specs := arraySpecs(parent, n)
			t0 := time.Now()
			var res []backends.SubmitResult
			if native {
				res = b.SubmitArrays(ctx, specs)
			} else {
				res = b.SubmitBatch(ctx, specs)
			}
			took := time.Since(t0)
			sb, _ := cr.counts()
			for i, r := range res {
				if r.Err != nil {
					t.Fatalf("element %d: %v", i, r.Err)
				}
			}
			t.Logf("round %d native=%v: %d elements in %s, %d sbatch", round, native, n, took.Round(time.Millisecond), sb)
			ids := map[string]bool{}
			for _, r := range res {
				a, _, _ := strings.Cut(string(r.ID), "_")
				ids[a] = true
			}
			argv := []string{"scancel"}
			for a := range ids {
				argv = append(argv, a)
			}
			_, _ = c.Run(ctx, argv, nil)
		}
	}
}
