package sshsite

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// BenchmarkSubmitOverSSH: one job submitted through the real backend over
// SSH per op (one session: bash -c, mkdir, cat, chmod, then the site's
// sbatch or qsub), the rate a broker gets submitting one job per command.
func BenchmarkSubmitOverSSH(b *testing.B) {
	for _, d := range []string{SLURM, PBS} {
		b.Run(d, func(b *testing.B) {
			s := startSite(b, d, 64, 1, 1)
			be, closeB, err := s.Backend(context.Background(), s.key, s.known, "bench")
			if err != nil {
				b.Fatal(err)
			}
			defer closeB()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				_, err := be.Submit(context.Background(), &backends.JobSpec{GridID: gridID("b"), Components: 1, Nodes: 1,
					Walltime: time.Hour, Command: []string{"/bin/sleep", "600"}})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBatchCommandLocal: one batch command run on the site's login
// node without SSH (the bin/ stub: /bin/sh, then the multi-call binary,
// then the unix socket): the floor under BenchmarkSubmitOverSSH.
func BenchmarkBatchCommandLocal(b *testing.B) {
	s := startSite(b, SLURM, 4, 1, 1)
	for b.Loop() {
		cmd := exec.Command(filepath.Join(s.Bin(), "sinfo"), "-h")
		cmd.Env = s.env()
		cmd.Stdout, cmd.Stderr = nil, os.Stderr
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}
