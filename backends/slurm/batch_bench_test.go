package slurm_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/sshbatch/sshbatchtest"
)

// BenchmarkSubmitBatch submits the same number of jobs to siteB over one
// SSH connection twice, side by side in one run: one Submit (one remote
// command) per job, then one SubmitBatch for all of them (one remote
// command per sshbatch batch: jobs/batch ≈ 120 KiB / size of one job's
// script), and reports both throughputs and their ratio. The jobs go into
// a reservation that starts in an hour, so they stay pending and cost the
// cluster nothing; they are cancelled at the end.
//
//	go test -run '^$' -bench SubmitBatch -benchtime 1x ./backends/slurm/
//
// GRIDSUB_BENCH_JOBS overrides 500, GRIDSUB_BENCH_SESSIONS the batches
// run at once (sshbatch.DefaultBatchSessions).
func BenchmarkSubmitBatch(b *testing.B) {
	s := testSite(b, "siteB")
	if os.Getenv("GRIDSUB_SSH_KEY") == "" {
		b.Skip("no testbed")
	}
	jobs := envInt("GRIDSUB_BENCH_JOBS", 500)
	c := dial(b, s)
	cnt := &sshbatchtest.Counter{Runner: c, Name: slurm.New(slurm.Config{}, nil, nil).Exec().Command}
	be := slurm.New(slurm.Config{Name: s.name, RemoteDir: s.scratch, User: s.ssh.User,
		BatchSessions: envInt("GRIDSUB_BENCH_SESSIONS", sshbatch.DefaultBatchSessions)}, cnt, nil)
	ctx := context.Background()
	resv, err := be.CreateReservation(ctx, &backends.ReservationSpec{Name: "r-" + gridID("bbench"),
		Start: time.Now().Add(time.Hour), Duration: 10 * time.Minute, Nodes: 1})
	if err != nil {
		b.Fatal(err)
	}
	var submitted []backends.JobID
	cancelAll := func() {
		for lo := 0; lo < len(submitted); lo += 1000 {
			_, _ = c.Run(context.Background(), slurm.ScancelArgv(submitted[lo:min(lo+1000, len(submitted))]...), nil)
		}
		submitted = nil
		time.Sleep(2 * time.Second)
	}
	b.Cleanup(func() {
		cancelAll()
		_ = be.DeleteReservation(context.Background(), resv)
	})
	specs := func() []*backends.JobSpec { return sshbatchtest.PendingSpecs(gridID, "bench", jobs, resv) }
	b.ResetTimer()
	for range b.N {
		waitRoom(b, c, 2*jobs)
		one := specs()
		cnt.Reset()
		t0 := time.Now()
		for _, sp := range one {
			id, err := be.Submit(ctx, sp)
			if err != nil {
				b.Fatalf("Submit: %v", err)
			}
			submitted = append(submitted, id)
		}
		ts := time.Since(t0)
		single := cnt.Reset()
		// The batched side starts from the same (empty) queue: slurmctld
		// works harder per submission with more jobs pending.
		cancelAll()
		cnt.Reset()
		many := specs()
		t0 = time.Now()
		res := be.SubmitBatch(ctx, many)
		tb := time.Since(t0)
		batched := cnt.Reset()
		for _, r := range res {
			if r.Err != nil {
				b.Fatalf("SubmitBatch: %v", r.Err)
			}
			submitted = append(submitted, r.ID)
		}
		rs, rb := float64(jobs)/ts.Seconds(), float64(jobs)/tb.Seconds()
		b.ReportMetric(rs, "jobs/s-single")
		b.ReportMetric(rb, "jobs/s-batched")
		b.ReportMetric(rb/rs, "ratio")
		b.Logf("%d submissions to siteB over one SSH connection: one command per job %s (%.1f jobs/s, %d remote commands), batched %s (%.1f jobs/s, %d remote commands, %d sessions at once), ratio %.2fx",
			jobs, ts.Round(time.Millisecond), rs, single["sbatch"], tb.Round(time.Millisecond), rb, batched["sbatch (batch)"]+batched["mkdir"],
			envInt("GRIDSUB_BENCH_SESSIONS", sshbatch.DefaultBatchSessions), rb/rs)
	}
}

var maxJobCountRe = regexp.MustCompile(`(?m)^MaxJobCount\s*=\s*(\d+)`)

// waitRoom waits (at most 6 minutes) until slurmctld holds few enough
// jobs to take need more. Cancelled and finished jobs stay in its memory
// for MinJobAge (300 s on the testbed) and count towards MaxJobCount
// (10,000): ten runs of a 500-job bench in a row (1,000 jobs each) filled
// it, and sbatch then answered "Slurm temporarily unable to accept job".
// The jobs of every user count (the testbed is shared).
func waitRoom(b *testing.B, r backends.Runner, need int) {
	b.Helper()
	ctx := context.Background()
	res, err := r.Run(ctx, slurm.ConfigArgv(), nil)
	if err != nil {
		b.Fatal(err)
	}
	m := maxJobCountRe.FindSubmatch(res.Stdout)
	if m == nil {
		b.Fatalf("no MaxJobCount in scontrol show config:\n%s", res.Stdout)
	}
	max, _ := strconv.Atoi(string(m[1]))
	t0 := time.Now()
	for {
		res, err := r.Run(ctx, []string{"squeue", "-h", "-t", "all", "-o", "%i"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		held := strings.Count(string(res.Stdout), "\n")
		if held+need+200 <= max {
			if w := time.Since(t0); w > time.Second {
				b.Logf("waited %s for slurmctld to forget old jobs (%d held, MaxJobCount %d)", w.Round(time.Second), held, max)
			}
			return
		}
		if time.Since(t0) > 6*time.Minute {
			b.Fatalf("slurmctld still holds %d jobs after 6 min (MaxJobCount %d, %d more needed)", held, max, need)
		}
		time.Sleep(5 * time.Second)
	}
}
