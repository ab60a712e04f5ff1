package slurm_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/transport"
)

// BenchmarkSubmit500 submits 500 jobs to siteB through the one reused SSH
// connection (Backend.Submit) and 500 identical submissions through a fresh
// /usr/bin/ssh process per job, side by side in one run, at the same
// concurrency, and reports both throughputs and their ratio. The jobs go
// into a reservation that starts in an hour, so they stay pending and cost
// the cluster nothing; they are cancelled at the end.
//
//	go test -run '^$' -bench Submit500 -benchtime 1x ./backends/slurm/
//
// GRIDSUB_BENCH_JOBS and GRIDSUB_BENCH_CONCURRENCY override 500 and 1.
func BenchmarkSubmit500(b *testing.B) {
	s := testSite(b, "siteB")
	cfgFile := os.Getenv("GRIDSUB_SSH_CONFIG")
	if cfgFile == "" {
		b.Skip("GRIDSUB_SSH_CONFIG unset: source testbed.env")
	}
	jobs := envInt("GRIDSUB_BENCH_JOBS", 500)
	conc := envInt("GRIDSUB_BENCH_CONCURRENCY", 1)
	c := dial(b, s)
	be := newBackend(b, s, c, c)
	ctx := context.Background()
	resv, err := be.CreateReservation(ctx, &backends.ReservationSpec{Name: "r-" + gridID("bench"),
		Start: time.Now().Add(time.Hour), Duration: 10 * time.Minute, Nodes: 1})
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var submitted []backends.JobID
	keep := func(id backends.JobID) {
		mu.Lock()
		submitted = append(submitted, id)
		mu.Unlock()
	}
	b.Cleanup(func() {
		// Only the benchmark's jobs, in chunks: other tests may share the site.
		for lo := 0; lo < len(submitted); lo += 1000 {
			_, _ = c.Run(context.Background(), slurm.ScancelArgv(submitted[lo:min(lo+1000, len(submitted))]...), nil)
		}
		time.Sleep(time.Second)
		_ = be.DeleteReservation(context.Background(), resv)
	})
	spec := func() *backends.JobSpec {
		return &backends.JobSpec{GridID: gridID("bench"), Nodes: 1, CoresPerNode: 1, Walltime: time.Minute,
			Command: []string{"true"}, Reservation: string(resv)}
	}
	run := func(n int, one func() error) (time.Duration, error) {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		sem := make(chan struct{}, conc)
		t0 := time.Now()
		for range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if err := one(); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		return time.Since(t0), <-errs
	}
	reused := func() error {
		id, err := be.Submit(ctx, spec())
		keep(id)
		return err
	}
	fresh := func() error {
		sp := spec()
		argv := slurm.SubmitArgv(s.scratch+"/"+slurm.JobDir(sp), slurm.SbatchArgs(sp, ""))
		cmd := exec.Command("/usr/bin/ssh", "-F", cfgFile, "siteB", transport.Quote(argv))
		cmd.Stdin = bytes.NewReader([]byte(slurm.Wrapper(sp)))
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("ssh sbatch: %w (%s)", err, out)
		}
		id, _, err := slurm.ParseSbatch(out)
		keep(id)
		return err
	}
	b.ResetTimer()
	for range b.N {
		tr, err := run(jobs, reused)
		if err != nil {
			b.Fatalf("reused connection: %v", err)
		}
		tf, err := run(jobs, fresh)
		if err != nil {
			b.Fatalf("fresh ssh: %v", err)
		}
		rr := float64(jobs) / tr.Seconds()
		rf := float64(jobs) / tf.Seconds()
		b.ReportMetric(rr, "jobs/s-reused")
		b.ReportMetric(rf, "jobs/s-fresh-ssh")
		b.ReportMetric(rr/rf, "ratio")
		b.Logf("%d submissions at concurrency %d: reused connection %s (%.1f jobs/s), fresh ssh per job %s (%.1f jobs/s), ratio %.1fx",
			jobs, conc, tr.Round(time.Millisecond), rr, tf.Round(time.Millisecond), rf, rr/rf)
	}
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}
