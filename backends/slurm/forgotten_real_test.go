package slurm_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/slurm"
)

// minJobAge reads the site's MinJobAge (seconds) from `scontrol show config`.
func minJobAge(t *testing.T, c backends.Runner) int {
	t.Helper()
	r, err := c.Run(context.Background(), []string{"scontrol", "show", "config"}, nil)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("scontrol show config: %v %s", err, r.Stderr)
	}
	for _, l := range strings.Split(string(r.Stdout), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && strings.TrimSpace(k) == "MinJobAge" {
			n, err := strconv.Atoi(strings.Fields(v)[0])
			if err == nil {
				return n
			}
		}
	}
	t.Fatal("scontrol show config names no MinJobAge")
	return 0
}

// TestForgottenElementFoundReal: the elements of a native array that ended
// and that SLURM then forgot (MinJobAge passed: squeue and scontrol have
// no record) are found by their own tags by a fresh backend — a daemon
// restarted after its crash between the array's sbatch and its record —
// with their real exit codes: through sacct (the array's tag is the
// comment accounting keeps) at a site with accounting, through the id and
// exit-code files in each element's directory at a site without. Nothing
// is submitted again. It needs a testbed with a short MinJobAge and
// accounting on siteA: GRIDSUB_MIN_JOB_AGE=20 GRIDSUB_SLURMDBD=1 (docs/citizen.md).
func TestForgottenElementFoundReal(t *testing.T) {
	if os.Getenv("GRIDSUB_SITEA_SSH_PORT") == "" || os.Getenv("GRIDSUB_SSH_KEY") == "" {
		t.Skip("no SLURM testbed: run `bash scripts/slurm-testbed.sh start && source ${GRIDSUB_TESTBED_DIR:-/var/tmp/gridsub-local-testbed}/testbed.env` (as root); this test then starts a private one with a short MinJobAge when that one keeps jobs longer")
	}
	if os.Getenv("GRIDSUB_SITEA_ACCOUNTING") != "1" || envMinJobAge(t) > 60 {
		shortMemoryTestbed(t)
	}
	for _, name := range []string{"siteA", "siteB"} {
		t.Run(name, func(t *testing.T) {
			s := testSite(t, name)
			c := dial(t, s)
			age := minJobAge(t, c)
			if age > 60 {
				t.Skipf("%s forgets finished jobs after MinJobAge=%d s; this test waits for that and needs a testbed started with GRIDSUB_MIN_JOB_AGE=20 (docs/citizen.md)", name, age)
			}
			accounting := os.Getenv("GRIDSUB_"+strings.ToUpper(name)+"_ACCOUNTING") == "1"
			if name == "siteA" && !accounting {
				t.Skip("siteA has no accounting: start the testbed with GRIDSUB_SLURMDBD=1")
			}
			const n = 6
			parent := "fgt" + strings.ReplaceAll(gridID("x"), "-", "")
			specs := arraySpecs(parent, n)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cr := &counting{run: c}
			b := nativeBackend(t, s, cr)
			res := b.SubmitArrays(ctx, specs)
			ids := make([]backends.JobID, n)
			for i, r := range res {
				if r.Err != nil {
					t.Fatalf("element %d: %v", i, r.Err)
				}
				ids[i] = r.ID
			}
			array, _, _ := strings.Cut(string(ids[0]), "_")
			t.Cleanup(func() { _, _ = c.Run(context.Background(), []string{"scancel", array}, nil) })
			if sb, _ := cr.counts(); sb != 1 {
				t.Fatalf("%d sbatch for %d elements, want 1", sb, n)
			}
			// Wait until the controller has forgotten every element.
			deadline := time.Now().Add(time.Duration(age)*time.Second + 3*time.Minute)
			for {
				r, err := c.Run(ctx, []string{"squeue", "-h", "-r", "-t", "all", "-j", array, "-o", "%i"}, nil)
				if err != nil {
					t.Fatal(err)
				}
				r2, err := c.Run(ctx, []string{"scontrol", "show", "job", string(ids[0])}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if strings.TrimSpace(string(r.Stdout)) == "" && r2.ExitCode != 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("SLURM still knows array %s after %s: %q", array, time.Duration(age)*time.Second+3*time.Minute, r.Stdout)
				}
				time.Sleep(3 * time.Second)
			}
			// A fresh backend finds each element by its own tag.
			fresh := &counting{run: c}
			fb := nativeBackend(t, s, fresh)
			t0 := time.Now()
			for i, spec := range specs {
				fs, err := fb.FindByGridID(ctx, spec.GridID)
				if err != nil {
					t.Fatalf("element %d: %v", i, err)
				}
				if len(fs) != 1 {
					t.Fatalf("element %d (%s): found %d jobs, want its one native element: %+v", i, spec.GridID, len(fs), fs)
				}
				st := fs[0]
				wantCode, wantState := 0, backends.StateCompleted
				if i%5 == 4 {
					wantCode, wantState = 7, backends.StateFailed
				}
				if st.ID != ids[i] || st.State != wantState || st.ExitCode != wantCode || st.GridID != spec.GridID {
					t.Fatalf("element %d: found %+v, want %s %s exit %d", i, st, ids[i], wantState, wantCode)
				}
				from := "exit-code file"
				if accounting {
					from = "sacct"
				}
				if !strings.Contains(st.Reason, from) {
					t.Errorf("element %d at %s: found %q, want it read from the %s", i, name, st.Reason, from)
				}
			}
			took := time.Since(t0)
			if sb, _ := fresh.counts(); sb != 0 {
				t.Fatalf("the lookups submitted %d jobs", sb)
			}
			cmds := fb.CommandStats().Total
			// Its outputs are the element's own.
			dir := t.TempDir()
			if _, err := fb.FetchOutputs(ctx, ids[3], specs[3], dir); err != nil {
				t.Fatalf("outputs of element 3: %v", err)
			}
			got, err := os.ReadFile(filepath.Join(dir, slurm.StdoutFile))
			if err != nil || !strings.Contains(string(got), "element 3 in ") || !strings.Contains(string(got), specs[3].GridID) {
				t.Fatalf("element 3's stdout: %q %v", got, err)
			}
			t.Logf("%s: %d forgotten elements of array %s found by tag (accounting %v) in %s with %d scheduler commands",
				name, n, array, accounting, took.Round(time.Millisecond), cmds)
		})
	}
}

// TestNativeArrayThrottleReal: a native array sent with the broker's limit
// of its grid array (JobSpec.ArrayLimit = 2) never has more than 2
// elements running at the real SLURM site, though the site has room for
// more, and every element still runs to its end.
func TestNativeArrayThrottleReal(t *testing.T) {
	s := testSite(t, "siteA")
	c := dial(t, s)
	const n, k = 6, 2
	parent := "thr" + strings.ReplaceAll(gridID("x"), "-", "")
	specs := arraySpecs(parent, n)
	for _, sp := range specs {
		sp.ArrayLimit = k
		sp.Command = []string{"sh", "-c", "sleep 4"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b := nativeBackend(t, s, c)
	res := b.SubmitArrays(ctx, specs)
	ids := make([]backends.JobID, n)
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("element %d: %v", i, r.Err)
		}
		ids[i] = r.ID
	}
	array, _, _ := strings.Cut(string(ids[0]), "_")
	t.Cleanup(func() { _, _ = c.Run(context.Background(), []string{"scancel", array}, nil) })
	r, err := c.Run(ctx, []string{"scontrol", "show", "job", array}, nil)
	if err != nil || !strings.Contains(string(r.Stdout), "ArrayTaskThrottle=2") {
		t.Fatalf("the site does not hold the array to %d at once: %v %s", k, err, r.Stdout)
	}
	most, ended := 0, 0
	for ended < n {
		r, err := c.Run(ctx, []string{"squeue", "-h", "-r", "-t", "all", "-j", array, "-o", "%i %T"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		ended = 0
		for _, l := range strings.Split(strings.TrimSpace(string(r.Stdout)), "\n") {
			switch f := strings.Fields(l); {
			case len(f) == 2 && f[1] == "RUNNING":
				running++
			case len(f) == 2 && (f[1] == "COMPLETED" || f[1] == "COMPLETING"):
				ended++
			}
		}
		if running > k {
			t.Fatalf("%d elements of array %s run at once, want at most %d:\n%s", running, array, k, r.Stdout)
		}
		most = max(most, running)
		if ctx.Err() != nil {
			t.Fatalf("the array did not end: %s", r.Stdout)
		}
		time.Sleep(300 * time.Millisecond)
	}
	sts, err := b.Status(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range sts {
		if st.State != backends.StateCompleted {
			t.Errorf("element %d: %+v, want completed", i, st)
		}
	}
	t.Logf("array %s of %d elements, throttle %d: at most %d ran at once", array, n, k, most)
}

// envMinJobAge is the MinJobAge of siteA of the testbed in the
// environment.
func envMinJobAge(t *testing.T) int {
	return minJobAge(t, dial(t, testSite(t, "siteA")))
}

// shortMemoryTestbed starts, for this test only, a private SLURM testbed
// whose sites forget finished jobs after 20 s (two 2-node sites, real
// accounting on siteA only) and points the test's environment at it; it
// is cleaned up when the test ends. Without root or SLURM the test skips.
func shortMemoryTestbed(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a private SLURM testbed with a short MinJobAge needs root (scripts/slurm-testbed.sh)")
	}
	if _, err := os.Stat("/usr/sbin/slurmctld"); err != nil {
		t.Skip("no SLURM installed")
	}
	dir, err := os.MkdirTemp("", "gsfgt-tb")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // the login user reaches its scratch below it
		t.Fatal(err)
	}
	// The script's ports: slurmdbd base-2, MariaDB base-1, slurmctld
	// base+1 and base+101, slurmd base+11.. and base+111..; sshd base and base+1.
	slurmBase, sshBase := freePorts(t, 33000, -2, -1, 1, 11, 12, 101, 111, 112), freePorts(t, 43000, 0, 1)
	script, err := filepath.Abs("../../scripts/slurm-testbed.sh")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GRIDSUB_TESTBED_DIR="+dir, "GRIDSUB_SLURM_PORT_BASE="+strconv.Itoa(slurmBase),
		"GRIDSUB_SSH_PORT_BASE="+strconv.Itoa(sshBase), "GRIDSUB_SITES=siteA siteB", "GRIDSUB_SITEA_NODES=2", "GRIDSUB_SITEB_NODES=2",
		"GRIDSUB_MIN_JOB_AGE=20", "GRIDSUB_SLURMDBD=1", "GRIDSUB_ACCOUNTING_SITES=siteA", "GRIDSUB_ACCOUNTING_ENFORCE=")
	run := func(verb string) error {
		cmd := exec.Command("bash", script, verb)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("slurm-testbed.sh %s: %v\n%s", verb, err, out)
		}
		return nil
	}
	t.Cleanup(func() {
		if err := run("clean"); err != nil {
			t.Error(err)
		}
		os.RemoveAll(dir)
	})
	t0 := time.Now()
	if err := run("start"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "testbed.env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(l, "export "), "="); ok && strings.HasPrefix(k, "GRIDSUB_") {
			t.Setenv(k, strings.Trim(v, `"`))
		}
	}
	t.Logf("private testbed (MinJobAge 20 s, accounting on siteA) up in %s in %s", time.Since(t0).Round(100*time.Millisecond), dir)
}

// freePorts finds a base port in [lo, lo+10000) such that base+off is
// free now for every offset.
func freePorts(t *testing.T, lo int, offs ...int) int {
	t.Helper()
	for try := range 50 {
		base := lo + (os.Getpid()*7+try*977)%10000
		ok := true
		for _, off := range offs {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+off))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port block")
	return 0
}
