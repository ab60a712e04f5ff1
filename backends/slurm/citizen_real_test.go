package slurm_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/transport"

	"github.com/gridsub/gridsub/backends/slurm/sitelock"
)

// long is GRIDSUB_LONG=1: the full-size runs of the acceptance tests.
func long() bool { return os.Getenv("GRIDSUB_LONG") == "1" }

// budgetSite is the testbed site the budget test may have to itself:
// siteC when the testbed runs one (scripts/test.sh starts it), so that
// slurmctld's own per-user RPC count (sdiag) sees only this test.
func budgetSite(t *testing.T) (site, bool) {
	if os.Getenv("GRIDSUB_SITEC_SSH_PORT") != "" {
		return testSite(t, "siteC"), true
	}
	return testSite(t, "siteB"), false
}

var sdiagUserRe = regexp.MustCompile(`(?m)^\s*(\S+)\s+\(\s*\d+\)\s+count:(\d+)`)

// userRPCs is slurmctld's count of the login user's RPCs (sdiag), asked
// outside the backend (its own RPC is subtracted by the caller).
func userRPCs(t *testing.T, c *transport.Client, user string) int {
	t.Helper()
	r, err := c.Run(context.Background(), []string{"sdiag"}, nil)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("sdiag: %v %s", err, r.Stderr)
	}
	out := string(r.Stdout)
	if i := strings.Index(out, "statistics by user"); i >= 0 {
		out = out[i:]
	}
	for _, m := range sdiagUserRe.FindAllStringSubmatch(out, -1) {
		if m[1] == user {
			n, _ := strconv.Atoi(m[2])
			return n
		}
	}
	return 0
}

// TestBudgetHeldAtSlurmctld: with many jobs in flight at one real SLURM
// site (200 by default, 1,000 with GRIDSUB_LONG=1), the broker's routine
// traffic — a status poll and a capacity report asked every second, as
// the cycle asks them — stays within the site's default budget at steady
// state, counted by gridsub and by slurmctld itself (sdiag's RPCs of the
// login user; a SLURM command is 1-3 RPCs). Short jobs ending during the
// window measure the time from a job's end to gridsub knowing it.
func TestBudgetHeldAtSlurmctld(t *testing.T) {
	s, dedicated := budgetSite(t)
	if dedicated {
		sitelock.Hold(t, s.name) // the outage test (bridge) stops this site's controller
	}
	c := dial(t, s)
	n, window := 200, 100*time.Second
	if long() {
		n, window = 1000, 5*time.Minute
	}
	b := slurm.New(slurm.Config{Name: s.name, RemoteDir: s.scratch, User: s.ssh.User, JobCompFile: "-"},
		c, func(root string) backends.Stager { return c.Stager(root) })
	ctx := context.Background()
	var specs []*backends.JobSpec
	// The short jobs (one per free core of siteC) end during the steady
	// state, 12 s apart.
	warm := sshbatch.DefaultSettle + 10*time.Second
	shorts := 4
	for i := range n {
		cmd := []string{"sleep", "7200"}
		if i < shorts {
			cmd = []string{"sleep", strconv.Itoa(int(warm/time.Second) + 15 + 12*i)}
		}
		specs = append(specs, &backends.JobSpec{GridID: gridID("bud"), Nodes: 1, CoresPerNode: 1, Walltime: 3 * time.Hour, Command: cmd})
	}
	var ids []backends.JobID
	t.Cleanup(func() {
		for lo := 0; lo < len(ids); lo += 500 {
			_, _ = c.Run(context.Background(), slurm.ScancelArgv(ids[lo:min(lo+500, len(ids))]...), nil)
		}
	})
	// The short jobs first, on their own: they take the free cores.
	for _, part := range [][]*backends.JobSpec{specs[:shorts], specs[shorts:]} {
		for _, r := range b.SubmitBatch(ctx, part) {
			if r.Err != nil {
				t.Fatalf("submitting %d jobs: %v", n, r.Err)
			}
			ids = append(ids, r.ID)
		}
	}
	rctx := backends.Routine(ctx)
	t0 := time.Now().Add(time.Hour) // the steady state's start, once warm
	known := map[backends.JobID]time.Time{}
	var lat []time.Duration
	cycle := func() {
		if _, err := b.Info(rctx); err != nil {
			t.Fatalf("Info: %v", err)
		}
		st, err := b.Status(rctx, ids)
		if err != nil {
			if errors.Is(err, backends.ErrDeferred) {
				return
			}
			t.Fatalf("Status: %v", err)
		}
		now := time.Now()
		for i, x := range st[:shorts] {
			if x.State.Final() && known[ids[i]].IsZero() && time.Since(t0) < window {
				known[ids[i]] = now
				if !x.End.IsZero() {
					lat = append(lat, now.Sub(x.End))
				}
			}
		}
	}
	// Warm-up: the submission's settle time, the first polls.
	for end := time.Now().Add(warm); time.Now().Before(end); time.Sleep(time.Second) {
		cycle()
	}
	st0 := b.CommandStats()
	rpc0 := userRPCs(t, c, s.ssh.User)
	t0 = time.Now()
	for time.Since(t0) < window {
		cycle()
		time.Sleep(time.Second)
	}
	took := time.Since(t0)
	rpc1 := userRPCs(t, c, s.ssh.User)
	st1 := b.CommandStats()
	cmds := float64(st1.Total-st0.Total) / took.Minutes()
	rpcs := float64(rpc1-rpc0-1) / took.Minutes()
	slices.Sort(lat)
	var med time.Duration
	if len(lat) > 0 {
		med = lat[len(lat)/2]
	}
	t.Logf("%d jobs in flight at %s, %s at steady state: gridsub %.1f scheduler commands/min (budget %g), slurmctld %.1f RPCs/min of %s (dedicated site: %v); routine calls deferred %d; end-to-known latency of %d short jobs: median %s, all %v",
		n, s.name, took.Round(time.Second), cmds, st1.Budget, rpcs, s.ssh.User, dedicated, st1.Deferred-st0.Deferred, len(lat), med, lat)
	// The bucket allows Burst beyond the rate in any window.
	limit := st1.Budget + float64(sshbatch.DefaultBurst)/took.Minutes()
	if cmds > limit {
		t.Errorf("gridsub sent %.1f commands/min at steady state; the budget allows %.1f", cmds, limit)
	}
	// Each SLURM command is at most 3 slurmctld RPCs (squeue: fed info,
	// partition info, job info); only a site this test has to itself
	// counts nobody else's.
	if dedicated && rpcs > 3*limit {
		t.Errorf("slurmctld counted %.1f RPCs/min of %s: more than 3 per budgeted command", rpcs, s.ssh.User)
	}
	if len(lat) == 0 {
		t.Errorf("none of the %d short jobs was seen to end within %s", shorts, warm+window)
	} else if med > 30*time.Second {
		t.Errorf("median time from a job's end to gridsub knowing it: %s, want under 30s", med)
	}
}
