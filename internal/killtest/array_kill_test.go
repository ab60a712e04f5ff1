package killtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// TestServeNativeArraySIGKILL: a real `gridsub serve` (native arrays are
// a slurm site's default) is SIGKILLed the moment it logs its native
// array's sbatch — before it has recorded the elements' ids — and
// restarted: the new daemon adopts every element by its tag (Recover's
// report counts them), submits none again (each element has exactly one
// record at SLURM and ran once), and the array completes.
func TestServeNativeArraySIGKILL(t *testing.T) {
	needTestbed(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "gridsub")
	build := exec.Command("go", "build", "-o", bin, "./cmd/gridsub")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gridsub: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(root, "configs", "local-slurm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	stamp := fmt.Sprintf("killarray-%s-%d", time.Now().UTC().Format("20060102T150405"), os.Getpid())
	remote := filepath.Join(os.Getenv("GRIDSUB_SITEA_SCRATCH"), stamp)
	cfgText := string(raw)
	old := "remote_dir: ${GRIDSUB_SITEA_SCRATCH}"
	if !strings.Contains(cfgText, old) || strings.Contains(cfgText, "native_arrays") {
		t.Fatalf("configs/local-slurm.yaml: want a line %q and no native_arrays (the default is what this test runs)", old)
	}
	cfgText = strings.Replace(cfgText, old, "remote_dir: "+remote, 1)
	cfgText = strings.ReplaceAll(cfgText, "      max_sessions: 8\n",
		"      max_sessions: 8\n    budget: {per_minute: 600, burst: 60, poll_fast: 2s, poll_slow: 2s, capacity_every: 2s, backoff_max: 4s}\n")
	cfg := filepath.Join(tmp, "killarray.yaml")
	if err := os.WriteFile(cfg, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	sockDir, err := os.MkdirTemp("", "gska")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	h := &harness{t: t, bin: bin, cfg: cfg, state: filepath.Join(work, "state"), sock: filepath.Join(sockDir, "gridsub.sock"), logDir: work}
	h.c = api.NewUnixClient(h.sock)
	t.Cleanup(func() {
		if len(h.runs) > 0 {
			if d := h.runs[len(h.runs)-1]; !d.exited.Load() {
				d.cmd.Process.Kill()
				<-d.done
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// Nothing of this test may stay queued at the site.
		if out, err := ssh(ctx, "SITEA", "squeue -h --me -o '%i %Z' | awk -v d="+remote+"/ 'index($2, d) == 1 {print $1}' | xargs -r scancel"); err != nil {
			t.Logf("cancelling leftovers: %v %s", err, out)
		}
		if !t.Failed() {
			os.RemoveAll(remote)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	first := h.start(ctx)

	// The killer: reads the first run's log as it grows and SIGKILLs the
	// daemon the moment the native array's sbatch has answered.
	killed := make(chan time.Duration, 1)
	go func() {
		t0 := time.Now()
		for ctx.Err() == nil && !first.exited.Load() {
			b, _ := os.ReadFile(first.logPath)
			if bytes.Contains(b, []byte(`"msg":"native array submitted"`)) {
				_ = first.cmd.Process.Signal(syscall.SIGKILL)
				killed <- time.Since(t0)
				return
			}
			time.Sleep(time.Millisecond)
		}
		close(killed)
	}()
	const n = 8
	// Each element records every run of its command in its own directory.
	req := bridge.Request{Name: "ka-" + stamp, Array: fmt.Sprintf("0-%d", n-1), Sites: []string{"siteA"},
		Nodes: 1, CoresPerNode: 1, Estimate: 2 * time.Minute,
		Command: []string{"sh", "-c", `: > "$GRIDSUB_JOB_DIR/ran.${SLURM_ARRAY_JOB_ID:-none}_${SLURM_ARRAY_TASK_ID:-$SLURM_JOB_ID}"; sleep 1`}}
	parent, err := h.c.Submit(ctx, req)
	if err != nil {
		t.Fatalf("submitting the array: %v", err)
	}
	after, ok := <-killed
	if !ok {
		t.Fatalf("the daemon never logged a native array submission:\n%s", tail(first.logPath, 30))
	}
	<-first.done
	first.done <- nil
	t.Logf("SIGKILLed the daemon %s after the submission, right after its native sbatch", after.Round(time.Millisecond))

	second := h.start(ctx)
	var rec recovered
	for wait := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		var seen bool
		if rec, seen, _ = readRecovered(second.logPath); seen {
			break
		}
		if time.Now().After(wait) {
			t.Fatalf("the restarted daemon logged no recovery report:\n%s", tail(second.logPath, 30))
		}
	}
	t.Logf("recovered: %+v", rec)
	if rec.Adopted == 0 {
		t.Fatalf("the restarted daemon adopted no element (%+v): the kill came after the ids were recorded, so this run did not test adoption", rec)
	}

	// The array completes.
	var p *bridge.Job
	for {
		if p, err = h.c.Job(ctx, parent.ID); err != nil {
			t.Fatal(err)
		}
		if p.State.Final() {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the array did not end: %s\n%s", p.State, tail(second.logPath, 30))
		}
		time.Sleep(time.Second)
	}
	if p.State != bridge.Completed {
		t.Fatalf("the array ended %s, want completed", p.State)
	}
	els, err := h.c.ListAll(ctx, bridge.Filter{Parent: parent.ID, Limit: api.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(els) != n {
		t.Fatalf("%d elements, want %d", len(els), n)
	}
	elemID := regexp.MustCompile(`^[0-9]+_([0-9]+)$`)
	for _, e := range els {
		if e.State != bridge.Completed || e.Attempts != 1 || len(e.Comps) != 1 {
			t.Errorf("element %s: %s after %d attempt(s), want completed after 1", e.ID, e.State, e.Attempts)
			continue
		}
		if m := elemID.FindStringSubmatch(string(e.Comps[0].RemoteID)); m == nil || m[1] != fmt.Sprint(e.Index) {
			t.Errorf("element %s (index %d) ran as %q, not as an element of a native array", e.ID, e.Index, e.Comps[0].RemoteID)
		}
	}
	// At the site: one record per element, each element's command ran once.
	out, err := ssh(ctx, "SITEA", "squeue -h --me -r -t all -o '%i|%k'")
	if err != nil {
		t.Fatalf("squeue at siteA: %v\n%s", err, out)
	}
	records := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		id, comment, ok := strings.Cut(strings.TrimSpace(l), "|")
		if !ok {
			continue
		}
		if strings.HasPrefix(comment, "gridsub-array:"+parent.ID+"-a") {
			_, ix, _ := strings.Cut(id, "_")
			records["element "+ix]++
		} else if strings.HasPrefix(comment, parent.ID+"_") {
			records[comment]++ // an element submitted alone
		}
	}
	for _, e := range els {
		runs, _ := filepath.Glob(filepath.Join(remote, "gridsub", fmt.Sprintf("%s_%d-a1", parent.ID, e.Index), "ran.*"))
		if len(runs) != 1 {
			t.Errorf("element %d ran %d times: %v", e.Index, len(runs), runs)
		}
	}
	total := 0
	for k, c := range records {
		total += c
		if c != 1 {
			t.Errorf("%s has %d records at SLURM, want 1", k, c)
		}
	}
	if total != n {
		t.Errorf("%d records of the array's elements at SLURM, want %d: %v", total, n, records)
	}
	t.Logf("%d elements: %d adopted after the SIGKILL, every one submitted and run once", n, rec.Adopted)
}
