package gridengine_test

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
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/examples/plugins/gridengine"
)

// qsubCounter counts the qsub invocations (an array's, a job's, or those
// in a batch) and the status commands that reach the site, and can lose
// the answer of the array's qsub after it ran (cut).
type qsubCounter struct {
	run    backends.Runner
	mu     sync.Mutex
	qsub   int
	status int
	cut    bool
}

func (c *qsubCounter) Run(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	c.mu.Lock()
	array := len(argv) > 3 && argv[3] == "gridsub-array"
	switch {
	case array || len(argv) > 3 && argv[3] == "gridsub-submit":
		c.qsub++
	case len(argv) > 2 && argv[0] == sshbatch.Shell:
		c.qsub += strings.Count(argv[2], "gridsub-submit")
	case len(argv) > 3 && argv[3] == "gridsub-status":
		c.status++
	}
	cut := c.cut && array
	c.mu.Unlock()
	r, err := c.run.Run(ctx, argv, stdin)
	if cut && err == nil {
		return backends.Result{}, errors.New("connection lost (simulated, after the command ran)")
	}
	return r, err
}

func (c *qsubCounter) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.qsub, c.status
}

func nativeGE(s site, run backends.Runner, stage backends.Stager) *gridengine.Backend {
	cfg := s.config()
	cfg.NativeArrays = true
	return gridengine.New(cfg, run, func(string) backends.Stager { return stage })
}

func geArraySpecs(parent string, n int, cmd []string) []*backends.JobSpec {
	specs := make([]*backends.JobSpec, n)
	for i := range specs {
		specs[i] = &backends.JobSpec{GridID: backends.ElementTag(parent, i, 1), Name: "arr", Nodes: 1, CoresPerNode: 1,
			Walltime: 2 * time.Minute, Env: map[string]string{"GRIDSUB_ARRAY_INDEX": fmt.Sprint(i)}, Command: cmd}
	}
	return specs
}

// waitAll polls ids until every one has ended, checking that each poll is
// one status command.
func waitAll(t *testing.T, ctx context.Context, b *gridengine.Backend, cr *qsubCounter, ids []backends.JobID) []backends.JobStatus {
	t.Helper()
	polls := 0
	for {
		_, q0 := cr.counts()
		sts, err := b.Status(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		polls++
		if _, q1 := cr.counts(); q1-q0 != 1 {
			t.Fatalf("one poll of %d elements ran %d status commands", len(ids), q1-q0)
		}
		done := 0
		for _, st := range sts {
			if st.State.Final() {
				done++
			}
		}
		if done == len(ids) {
			t.Logf("%d elements ended, %d polls", len(ids), polls)
			return sts
		}
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d elements ended", done, len(ids))
		}
		time.Sleep(2 * time.Second)
	}
}

// TestNativeArrayGEReal: 200 elements of one grid array go to the real
// Grid Engine as ONE qsub -t 1-200:1; element i is task i+1 (`N.i+1`),
// runs in its own job directory, is tracked by one status command per
// poll (qstat -xml for the live tasks, qacct for the ended ones), ends
// with its own exit code, and a fresh backend (a restarted daemon) finds
// each element by its own tag.
func TestNativeArrayGEReal(t *testing.T) {
	s := testSite(t)
	c := dial(t, s)
	cr := &qsubCounter{run: c}
	stage := c.Stager(s.home + "/gridsub-test")
	b := nativeGE(s, cr, stage)
	n := 200
	if testing.Short() {
		n = 20
	}
	parent := "garr" + strings.ReplaceAll(gridID("x"), "-", "")
	specs := geArraySpecs(parent, n, []string{"sh", "-c", `echo "element $GRIDSUB_ARRAY_INDEX in $PWD"; [ $((GRIDSUB_ARRAY_INDEX % 5)) -ne 4 ] || exit 7`})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
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
		a, task, ok := strings.Cut(string(r.ID), ".")
		if !ok || task != fmt.Sprint(i+1) || (array != "" && a != array) {
			t.Fatalf("element %d got remote id %q, want <array>.%d", i, r.ID, i+1)
		}
		array, ids[i] = a, r.ID
	}
	t.Cleanup(func() { _, _ = c.Run(context.Background(), []string{gridengine.DefaultBinDir + "/qdel", array}, nil) })
	if q, _ := cr.counts(); q != 1 {
		t.Fatalf("%d qsub invocations for %d elements, want 1 native array", q, n)
	}
	t.Logf("native array %s of %d elements submitted in %s with 1 qsub", array, n, took.Round(time.Millisecond))
	sts := waitAll(t, ctx, b, cr, ids)
	for i, st := range sts {
		want, code := backends.StateCompleted, 0
		if i%5 == 4 {
			want, code = backends.StateFailed, 7
		}
		if st.ID != ids[i] || st.State != want || st.ExitCode != code || st.GridID != specs[i].GridID {
			t.Fatalf("element %d: %+v, want %s exit %d tag %s", i, st, want, code, specs[i].GridID)
		}
	}
	for _, i := range []int{0, 4, n - 1} {
		dir := s.home + "/gridsub-test/gridsub/" + specs[i].GridID
		r, err := c.Run(ctx, []string{"cat", dir + "/" + sshbatch.StdoutFile, dir + "/" + sshbatch.ExitFile, dir + "/" + gridengine.IDFile}, nil)
		want := fmt.Sprintf("element %d in %s\n%d\n%s\n", i, dir, map[bool]int{true: 7, false: 0}[i%5 == 4], ids[i])
		if err != nil || string(r.Stdout) != want {
			t.Fatalf("element %d's files: %q %v, want %q", i, r.Stdout, err, want)
		}
	}
	fresh := nativeGE(s, c, stage)
	for _, i := range []int{0, n / 2, n - 1} {
		found, err := fresh.FindByGridID(ctx, specs[i].GridID)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != 1 || found[0].ID != ids[i] || found[0].State != sts[i].State || found[0].ExitCode != sts[i].ExitCode {
			t.Fatalf("find by tag %s: %+v, want exactly %s %s", specs[i].GridID, found, ids[i], sts[i].State)
		}
	}
}

// TestNativeArrayGECutCancelReal: the answer of the array's qsub is lost
// after it ran: every task is found by its element's tag among the live
// jobs (none is reported unsubmitted, no second qsub runs); a fresh
// backend finds a pending or running element by tag; deleting one element
// (qdel N -t T) ends that task alone as Cancelled, then deleting every
// other one (the whole array) ends them all as Cancelled and leaves no
// task of the array at the site; a second delete of an ended task is no
// error.
func TestNativeArrayGECutCancelReal(t *testing.T) {
	s := testSite(t)
	c := dial(t, s)
	cr := &qsubCounter{run: c, cut: true}
	stage := c.Stager(s.home + "/gridsub-test")
	b := nativeGE(s, cr, stage)
	parent := "gcut" + strings.ReplaceAll(gridID("x"), "-", "")
	n := 12 // more than the queue's slots: some wait
	specs := geArraySpecs(parent, n, []string{"sleep", "300"})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res := b.SubmitArrays(ctx, specs)
	ids := make([]backends.JobID, n)
	var array string
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("element %d: %v", i, r.Err)
		}
		a, task, _ := strings.Cut(string(r.ID), ".")
		if task != fmt.Sprint(i+1) {
			t.Fatalf("element %d: id %s", i, r.ID)
		}
		array, ids[i] = a, r.ID
	}
	t.Cleanup(func() { _, _ = c.Run(context.Background(), []string{gridengine.DefaultBinDir + "/qdel", array}, nil) })
	if q, _ := cr.counts(); q != 1 {
		t.Fatalf("%d qsub invocations, want 1", q)
	}
	fresh := nativeGE(s, c, stage)
	for _, i := range []int{0, n - 1} {
		found, err := fresh.FindByGridID(ctx, specs[i].GridID)
		if err != nil || len(found) != 1 || found[0].ID != ids[i] || found[0].State.Final() {
			t.Fatalf("find live element %s: %+v %v, want %s pending or running", specs[i].GridID, found, err, ids[i])
		}
	}
	// One element.
	if err := b.Cancel(ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		sts, err := b.Status(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		others := true
		for i, st := range sts {
			if i != 2 && st.State.Final() {
				others = false
			}
		}
		if !others {
			t.Fatalf("deleting element 2 ended another: %+v", sts)
		}
		if sts[2].State == backends.StateCancelled {
			break
		}
		if sts[2].State.Final() || time.Now().After(deadline) {
			t.Fatalf("element 2 after qdel -t 3: %+v", sts[2])
		}
		time.Sleep(time.Second)
	}
	// The whole array: every element left.
	for i, id := range ids {
		if i != 2 {
			if err := b.Cancel(ctx, id); err != nil {
				t.Fatalf("cancel %s: %v", id, err)
			}
		}
	}
	if err := b.Cancel(ctx, ids[2]); err != nil {
		t.Fatalf("a second delete of an ended task: %v", err)
	}
	sts := waitAll(t, ctx, b, cr, ids)
	for i, st := range sts {
		if st.State != backends.StateCancelled || st.GridID != specs[i].GridID {
			t.Fatalf("element %d after the array's delete: %+v", i, st)
		}
	}
	r, err := c.Run(ctx, []string{gridengine.DefaultBinDir + "/qstat", "-j", array}, nil)
	if err != nil || r.ExitCode == 0 {
		t.Fatalf("array %s still at the site after every task was deleted: %v %s", array, err, r.Stdout)
	}
}

// TestCaptureArrayFixtures writes the real outputs the array parsers'
// fixtures come from into $GRIDSUB_GE_CAPTURE (skipped without it): the
// status command over the 14 elements of one array job (two ended, one
// exit 0 and one exit 3; one running task deleted; eight running; one
// pending task deleted; the others pending) and an unknown task, and the
// tag listing (qstat -j) showing the array job.
func TestCaptureArrayFixtures(t *testing.T) {
	dir := os.Getenv("GRIDSUB_GE_CAPTURE")
	if dir == "" {
		t.Skip("GRIDSUB_GE_CAPTURE names no directory to write captures into")
	}
	s := testSite(t)
	c := dial(t, s)
	b := nativeGE(s, c, c.Stager(s.home+"/gridsub-test"))
	ctx := context.Background()
	parent := "gcap" + strings.ReplaceAll(gridID("x"), "-", "")
	specs := geArraySpecs(parent, 14, []string{"sh", "-c", `case $GRIDSUB_ARRAY_INDEX in 0) exit 0;; 1) exit 3;; esac; sleep 60`})
	res := b.SubmitArrays(ctx, specs)
	ids := make([]backends.JobID, len(res))
	for i, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		ids[i] = r.ID
	}
	array, _, _ := strings.Cut(string(ids[0]), ".")
	t.Cleanup(func() { _, _ = c.Run(context.Background(), []string{gridengine.DefaultBinDir + "/qdel", array}, nil) })
	time.Sleep(8 * time.Second)
	for _, i := range []int{2, 13} {
		if err := b.Cancel(ctx, ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(4 * time.Second)
	cmds := gridengine.Cmds{Bin: gridengine.DefaultBinDir}
	root := s.home + "/gridsub-test"
	write := func(name string, argv []string) {
		r, err := c.Run(ctx, argv, nil)
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("%s: %v %d %s", name, err, r.ExitCode, r.Stderr)
		}
		if err := os.WriteFile(dir+"/"+name, r.Stdout, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("status-array.txt", cmds.StatusArgv(s.ssh.User, root+"/"+gridengine.CancelledDir, root+"/"+gridengine.IndexDir, append(ids, "999999999.1")))
	write("tags-array.txt", cmds.TagsArgv(s.ssh.User))
	st, err := b.Status(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("array %s statuses: %+v", array, st)
}
