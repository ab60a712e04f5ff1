package gridengine_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch/sshbatchtest"
	"github.com/gridsub/gridsub/examples/plugins/gridengine"
)

// BenchmarkSubmitArray submits the elements of a grid array to the Grid
// Engine testbed over one SSH connection three ways, side by side in one
// run: one Submit (one remote command, one qsub) per element, one
// SubmitBatch of them all (sshbatch batches, one qsub per element), and
// one SubmitArrays (native: one qsub -t for all), and reports the three
// throughputs. The elements wait in a reservation that starts in an hour;
// qdel and qrdel remove them at the end.
//
//	go test -run '^$' -bench SubmitArray -benchtime 1x ./examples/plugins/gridengine/
//
// GRIDSUB_BENCH_JOBS overrides 200.
func BenchmarkSubmitArray(b *testing.B) {
	s := testSite(b)
	jobs := 200
	if v, err := strconv.Atoi(os.Getenv("GRIDSUB_BENCH_JOBS")); err == nil && v > 0 {
		jobs = v
	}
	c := dial(b, s)
	stage := c.Stager(s.home + "/gridsub-test")
	cnt := &sshbatchtest.Counter{Runner: c, Name: newBackend(s, c, c).Exec().Command}
	be := nativeGE(s, cnt, stage)
	ctx := context.Background()
	resv, err := be.CreateReservation(ctx, &backends.ReservationSpec{Name: "bench-" + gridID("r"),
		Start: time.Now().Add(time.Hour), Duration: 10 * time.Minute, Nodes: 1})
	if err != nil {
		b.Fatalf("CreateReservation: %v", err)
	}
	var arrays []string
	b.Cleanup(func() {
		for _, a := range arrays {
			_, _ = c.Run(context.Background(), []string{gridengine.DefaultBinDir + "/qdel", a}, nil)
		}
		_ = be.DeleteReservation(context.Background(), resv)
	})
	specs := func() []*backends.JobSpec {
		parent := "bench" + strings.ReplaceAll(gridID("a"), "-", "")
		sp := geArraySpecs(parent, jobs, []string{"true"})
		for _, x := range sp {
			x.Walltime, x.Reservation = time.Minute, string(resv)
		}
		return sp
	}
	if _, err := be.Info(ctx); err != nil {
		b.Fatal(err)
	}
	track := func(res []backends.SubmitResult) {
		for _, r := range res {
			if r.Err != nil {
				b.Fatalf("submit: %v", r.Err)
			}
			a, _, _ := strings.Cut(string(r.ID), ".")
			if len(arrays) == 0 || arrays[len(arrays)-1] != a {
				arrays = append(arrays, a)
			}
		}
	}
	track(be.SubmitArrays(ctx, specs()[:2])) // the site's array limit (qconf -sconf) is read once, before timing
	b.ResetTimer()
	for range b.N {
		cnt.Reset()
		t0 := time.Now()
		var one []backends.SubmitResult
		for _, sp := range specs() {
			id, err := be.Submit(ctx, sp)
			one = append(one, backends.SubmitResult{ID: id, Err: err})
		}
		ts := time.Since(t0)
		track(one)
		single := cnt.Reset()
		t0 = time.Now()
		res := be.SubmitBatch(ctx, specs())
		tb := time.Since(t0)
		track(res)
		batched := cnt.Reset()
		t0 = time.Now()
		res = be.SubmitArrays(ctx, specs())
		tn := time.Since(t0)
		track(res)
		native := cnt.Reset()
		rs, rb, rn := float64(jobs)/ts.Seconds(), float64(jobs)/tb.Seconds(), float64(jobs)/tn.Seconds()
		b.ReportMetric(rs, "jobs/s-single")
		b.ReportMetric(rb, "jobs/s-batched")
		b.ReportMetric(rn, "jobs/s-native")
		b.Logf("%d elements to Grid Engine over one SSH connection: one qsub per element %s (%.1f/s, %d remote commands), batched %s (%.1f/s, %d remote commands, %d qsub), native array %s (%.1f/s, %d qsub -t, %v in all)",
			jobs, ts.Round(time.Millisecond), rs, single["qsub"], tb.Round(time.Millisecond), rb, batched["qsub (batch)"], jobs,
			tn.Round(time.Millisecond), rn, native["qsub -t"], native)
	}
}

// TestArrayPollsLong (GRIDSUB_LONG=1, on the testbed) measures one status
// command per poll over 500 array tasks: pending (in a reservation that
// starts in an hour), then ended (a 500-task array of `true`, every task
// read from the accounting file), three polls each, and logs each poll's
// time with the accounting file's size.
//
//	GRIDSUB_LONG=1 go test -count=1 -run TestArrayPollsLong -v ./examples/plugins/gridengine/
func TestArrayPollsLong(t *testing.T) {
	if os.Getenv("GRIDSUB_LONG") == "" {
		t.Skip("a measurement: GRIDSUB_LONG=1")
	}
	s := testSite(t)
	c := dial(t, s)
	cr := &qsubCounter{run: c}
	b := nativeGE(s, cr, c.Stager(s.home+"/gridsub-test"))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const n = 500
	resv, err := b.CreateReservation(ctx, &backends.ReservationSpec{Name: "polls-" + gridID("r"), Start: time.Now().Add(time.Hour), Duration: 10 * time.Minute, Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.DeleteReservation(context.Background(), resv) })
	submit := func(prefix string, cmd []string, resv backends.ResvID) []backends.JobID {
		specs := geArraySpecs(prefix+strings.ReplaceAll(gridID("x"), "-", ""), n, cmd)
		for _, sp := range specs {
			sp.Reservation, sp.Walltime = string(resv), time.Minute
		}
		var ids []backends.JobID
		for i, r := range b.SubmitArrays(ctx, specs) {
			if r.Err != nil {
				t.Fatalf("element %d: %v", i, r.Err)
			}
			ids = append(ids, r.ID)
		}
		a, _, _ := strings.Cut(string(ids[0]), ".")
		t.Cleanup(func() { _, _ = c.Run(context.Background(), []string{gridengine.DefaultBinDir + "/qdel", a}, nil) })
		return ids
	}
	polls := func(what string, ids []backends.JobID, want func(backends.State) bool) {
		for p := range 3 {
			_, q0 := cr.counts()
			t0 := time.Now()
			sts, err := b.Status(ctx, ids)
			took := time.Since(t0)
			if err != nil {
				t.Fatal(err)
			}
			if _, q1 := cr.counts(); q1-q0 != 1 {
				t.Fatalf("%s: a poll of %d tasks ran %d status commands", what, n, q1-q0)
			}
			for i, st := range sts {
				if !want(st.State) {
					t.Fatalf("%s: task %s %+v", what, ids[i], st)
				}
			}
			t.Logf("%s: poll %d of %d tasks, 1 command, %s", what, p+1, n, took.Round(time.Millisecond))
		}
	}
	pend := submit("ppend", []string{"true"}, resv)
	polls("pending", pend, func(s backends.State) bool { return s == backends.StatePending })
	done := submit("pdone", []string{"true"}, "")
	deadline := time.Now().Add(10 * time.Minute)
	for {
		sts, err := b.Status(ctx, done)
		if err != nil {
			t.Fatal(err)
		}
		left := 0
		for _, st := range sts {
			if !st.State.Final() {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tasks not ended", left, n)
		}
		time.Sleep(5 * time.Second)
	}
	r, _ := c.Run(ctx, []string{"sh", "-c", `grep -vc '^#' "${SGE_ROOT:-/var/lib/gridengine}/${SGE_CELL:-default}/common/accounting"`}, nil)
	polls(fmt.Sprintf("ended (accounting file of %s records)", strings.TrimSpace(string(r.Stdout))), done,
		func(s backends.State) bool { return s == backends.StateCompleted })
}
