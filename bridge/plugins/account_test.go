package plugins_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge/plugins"
)

// TestSLURMSiteAccountInEveryMode: a SLURM site's account reaches sbatch
// whether its built-in runs in process or isolated (an isolated site once
// lost it: the JSON a plugin is configured with had no account). Against
// the real SLURM testbed, whose squeue reports the job's account: at siteB,
// which keeps no accounting and so takes any account (the suite's siteA
// enforces associations).
func TestSLURMSiteAccountInEveryMode(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: submits to the real SLURM testbed")
	}
	for _, isolate := range []bool{false, true} {
		t.Run(fmt.Sprintf("isolate=%v", isolate), func(t *testing.T) {
			spec, tc := slurmSpec(t, "siteB")
			spec.Isolate = isolate
			acct := fmt.Sprintf("acct%d", time.Now().UnixNano()%1_000_000)
			spec.Config.Account = acct
			inst, err := plugins.LoadBackend(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			defer inst.Kill()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			id, err := inst.Backend.Submit(ctx, &backends.JobSpec{GridID: "acct-" + acct, Name: "account", Components: 1, Nodes: 1,
				Command: []string{"sleep", "30"}, Walltime: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer inst.Backend.Cancel(context.Background(), id)
			c, err := transport.Dial(ctx, tc)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r, err := c.Run(ctx, []string{"squeue", "-h", "-t", "all", "-j", string(id), "-o", "%a"}, nil)
			if err != nil || r.ExitCode != 0 {
				t.Fatalf("squeue: %v %s", err, r.Stderr)
			}
			if got := strings.TrimSpace(string(r.Stdout)); got != acct {
				t.Errorf("the site runs job %s under account %q; the site configuration says %q", id, got, acct)
			}
		})
	}
}
