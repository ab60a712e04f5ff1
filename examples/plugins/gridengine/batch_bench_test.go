package gridengine_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch/sshbatchtest"
)

// BenchmarkSubmitBatch submits the same number of jobs to the Grid Engine
// testbed over one SSH connection twice, side by side in one run: one
// Submit (one remote command) per job, then one SubmitBatch for all of them
// (one remote command per sshbatch batch), and reports both throughputs
// and their ratio. The jobs wait in the queue of a reservation that starts
// in an hour; qrdel removes them with it at the end.
//
//	go test -run '^$' -bench SubmitBatch -benchtime 1x ./examples/plugins/gridengine/
//
// GRIDSUB_BENCH_JOBS overrides 200.
func BenchmarkSubmitBatch(b *testing.B) {
	s := testSite(b)
	jobs := 200
	if v, err := strconv.Atoi(os.Getenv("GRIDSUB_BENCH_JOBS")); err == nil && v > 0 {
		jobs = v
	}
	c := dial(b, s)
	cnt := &sshbatchtest.Counter{Runner: c, Name: newBackend(s, c, c).Exec().Command}
	be := newBackend(s, c, cnt)
	ctx := context.Background()
	resv, err := be.CreateReservation(ctx, &backends.ReservationSpec{Name: "bench-" + gridID("r"),
		Start: time.Now().Add(time.Hour), Duration: 10 * time.Minute, Nodes: 1})
	if err != nil {
		b.Fatalf("CreateReservation: %v", err)
	}
	b.Cleanup(func() { _ = be.DeleteReservation(context.Background(), resv) })
	specs := func() []*backends.JobSpec { return sshbatchtest.PendingSpecs(gridID, "bench", jobs, resv) }
	// The site's shape is asked once (the info command) before timing.
	if _, err := be.Info(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		one := specs()
		cnt.Reset()
		t0 := time.Now()
		for _, sp := range one {
			if _, err := be.Submit(ctx, sp); err != nil {
				b.Fatalf("Submit: %v", err)
			}
		}
		ts := time.Since(t0)
		single := cnt.Reset()
		t0 = time.Now()
		for _, r := range be.SubmitBatch(ctx, specs()) {
			if r.Err != nil {
				b.Fatalf("SubmitBatch: %v", r.Err)
			}
		}
		tb := time.Since(t0)
		batched := cnt.Reset()
		rs, rb := float64(jobs)/ts.Seconds(), float64(jobs)/tb.Seconds()
		b.ReportMetric(rs, "jobs/s-single")
		b.ReportMetric(rb, "jobs/s-batched")
		b.ReportMetric(rb/rs, "ratio")
		b.Logf("%d submissions to Grid Engine over one SSH connection: one command per job %s (%.1f jobs/s, %d remote commands), batched %s (%.1f jobs/s, %d remote commands), ratio %.2fx",
			jobs, ts.Round(time.Millisecond), rs, single["qsub"], tb.Round(time.Millisecond), rb, batched["qsub (batch)"], rb/rs)
	}
}
