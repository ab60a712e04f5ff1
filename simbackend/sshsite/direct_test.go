package sshsite

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/transport"
)

var volatile = regexp.MustCompile(`(?m)^.*("timestamp"|Configuration data as of).*$`)

// TestDirectMatchesShell: a batch command line answered in process (the
// fast path) prints exactly what the same line prints through /bin/sh and
// the bin/ stub ("exec " in front keeps the fast path off), errors and
// exit codes included.
func TestDirectMatchesShell(t *testing.T) {
	for _, d := range []string{SLURM, PBS} {
		s := startSite(t, d, 4, 2, 1)
		b, closeB, err := s.Backend(context.Background(), s.key, s.known, "g")
		if err != nil {
			t.Fatal(err)
		}
		var ids []backends.JobID
		for _, cmd := range [][]string{{"/bin/true"}, {"/bin/sleep", "30"}} {
			id, err := b.Submit(context.Background(), &backends.JobSpec{GridID: gridID("d"), Components: 1, Nodes: 1,
				Walltime: time.Hour, Command: cmd})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		closeB()
		time.Sleep(300 * time.Millisecond)
		var lines [][]string
		if d == SLURM {
			lines = [][]string{slurm.SqueueArgv(ids), slurm.SqueueArgv([]backends.JobID{"4242"}), slurm.SinfoArgv(),
				slurm.ConfigArgv(), slurm.ScontrolJobArgv(ids[0]), {"squeue", "-j", "abc"}, {"scancel", "x'y"},
				{"sacct", "-j", "1"}, slurm.ShowReservationArgv("nope"), {"sbatch", "--bogus"}}
		} else {
			c := pbs.Cmds{Bin: s.Bin()}
			lines = [][]string{c.StatusArgv(ids), c.ActiveJSONArgv(), c.NodesArgv(), c.ServerArgv(), c.QueuesArgv(),
				c.QdelArgv(backends.JobID("99." + s.cfg.Name)), c.RstatArgv("R9"), {"qstat", "--x"}, c.RdelArgv("R1")}
		}
		for _, argv := range lines {
			line := transport.Quote(argv)
			if _, ok := s.direct(line); !ok {
				t.Errorf("%s: %q does not take the fast path", d, line)
				continue
			}
			o1, e1, c1 := run(t, s, line)
			o2, e2, c2 := run(t, s, "exec "+line)
			o1, o2 = volatile.ReplaceAllString(o1, ""), volatile.ReplaceAllString(o2, "")
			if o1 != o2 || e1 != e2 || c1 != c2 {
				t.Errorf("%s: %q\nfast:  %d %q %q\nshell: %d %q %q", d, line, c1, o1, e1, c2, o2, e2)
			}
		}
		for _, line := range []string{"squeue; rm -rf x", "squeue $(id)", "bash -c 'squeue'", "squeue | cat", "srun x", "/opt/pbs/bin/qstat", "nosuch"} {
			if _, ok := s.direct(line); ok {
				t.Errorf("%s: %q took the fast path", d, line)
			}
		}
	}
}
