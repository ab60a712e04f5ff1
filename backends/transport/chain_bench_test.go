package transport_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/sshbatch/sshbatchtest"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/backends/transport/sshdtest"
)

// BenchmarkChainVsDirect measures, side by side in one run, the SLURM
// testbed's siteA reached directly and through two jump hosts (two bastion
// sshds on loopback, from an ssh config alias):
//
//   - connection set-up: GRIDSUB_BENCH_DIALS (20) full dials of each
//     (TCP, handshake, host key, authentication at every hop), alternated;
//   - batched submission: GRIDSUB_BENCH_ROUNDS (10) rounds, each submitting
//     GRIDSUB_BENCH_JOBS (100) pending jobs with one SubmitBatch over the
//     direct connection and then over the chain (the order alternates by
//     round), into a reservation an hour ahead, cancelled after each round.
//
// It logs every round's ratio (chain / direct seconds) and reports the
// median set-up times and the median, worst and total submission ratios,
// with how many rounds the chain was slower and within 20 % of direct.
//
//	go test -run '^$' -bench ChainVsDirect -benchtime 1x ./backends/transport/
func BenchmarkChainVsDirect(b *testing.B) {
	ch := sshdtest.NewChain(b)
	port, user, key, kh := sshdtest.SlurmLogin(b)
	p, _ := strconv.Atoi(port)
	direct := transport.Config{Host: "127.0.0.1", Port: p, User: user, KeyFiles: []string{key}, KnownHosts: []string{kh}}
	chain := transport.Config{Host: "cluster", SSHConfig: ch.SSHConfig}
	ctx := context.Background()
	dials, rounds, jobs := envInt("GRIDSUB_BENCH_DIALS", 20), envInt("GRIDSUB_BENCH_ROUNDS", 10), envInt("GRIDSUB_BENCH_JOBS", 100)
	for range b.N {
		var td, tc []time.Duration
		for i := range 2 * dials {
			cfg := direct
			if i%2 == 1 {
				cfg = chain
			}
			t0 := time.Now()
			c, err := transport.Dial(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			el := time.Since(t0)
			c.Close()
			if i%2 == 0 {
				td = append(td, el)
			} else {
				tc = append(tc, el)
			}
		}
		md, mc := median(td), median(tc)
		b.ReportMetric(float64(md.Microseconds())/1000, "ms-dial-direct")
		b.ReportMetric(float64(mc.Microseconds())/1000, "ms-dial-2hops")
		b.Logf("connection set-up, median of %d: direct %s, through two jump hosts %s (%.2fx)", dials, md.Round(100*time.Microsecond), mc.Round(100*time.Microsecond), float64(mc)/float64(md))

		cd, err := transport.Dial(ctx, direct)
		if err != nil {
			b.Fatal(err)
		}
		defer cd.Close()
		cc, err := transport.Dial(ctx, chain)
		if err != nil {
			b.Fatal(err)
		}
		defer cc.Close()
		scratch := os.Getenv("GRIDSUB_SITEA_SCRATCH")
		mk := func(c *transport.Client) *slurm.Backend {
			return slurm.New(slurm.Config{Name: "siteA", RemoteDir: scratch, User: user}, c, nil)
		}
		bd, bc := mk(cd), mk(cc)
		resv, err := bd.CreateReservation(ctx, &backends.ReservationSpec{Name: fmt.Sprintf("r-chain-%d", time.Now().UnixNano()%1e9),
			Start: time.Now().Add(time.Hour), Duration: 10 * time.Minute, Nodes: 1})
		if err != nil {
			b.Fatal(err)
		}
		defer bd.DeleteReservation(context.Background(), resv)
		n := 0
		gid := func(p string) string { n++; return fmt.Sprintf("%s-%d-%d", p, time.Now().UnixNano()%1e9, n) }
		worst := 0.0
		var sumD, sumC time.Duration
		var ratios []float64
		for r := range rounds {
			order := []*slurm.Backend{bd, bc}
			if r%2 == 1 {
				order = []*slurm.Backend{bc, bd}
			}
			var el [2]time.Duration
			for k, be := range order {
				specs := sshbatchtest.PendingSpecs(gid, "chain", jobs, resv)
				t0 := time.Now()
				res := be.SubmitBatch(ctx, specs)
				el[k] = time.Since(t0)
				var ids []backends.JobID
				for _, x := range res {
					if x.Err != nil {
						b.Fatalf("SubmitBatch: %v", x.Err)
					}
					ids = append(ids, x.ID)
				}
				if _, err := cd.Run(ctx, slurm.ScancelArgv(ids...), nil); err != nil {
					b.Fatal(err)
				}
				time.Sleep(2 * time.Second) // let slurmctld settle before the other side
			}
			d, c := el[0], el[1]
			if r%2 == 1 {
				d, c = el[1], el[0]
			}
			sumD, sumC = sumD+d, sumC+c
			ratio := c.Seconds() / d.Seconds()
			worst = max(worst, ratio)
			ratios = append(ratios, ratio)
			b.Logf("round %d: %d jobs batched: direct %s (%.0f jobs/s), two jump hosts %s (%.0f jobs/s), chain/direct %.3f",
				r+1, jobs, d.Round(time.Millisecond), float64(jobs)/d.Seconds(), c.Round(time.Millisecond), float64(jobs)/c.Seconds(), ratio)
		}
		slices.Sort(ratios)
		within, slower := 0, 0
		for _, r := range ratios {
			if r <= 1.2 {
				within++
			}
			if r > 1 {
				slower++
			}
		}
		med := ratios[len(ratios)/2]
		b.ReportMetric(worst, "worst-ratio")
		b.ReportMetric(med, "median-ratio")
		b.ReportMetric(sumC.Seconds()/sumD.Seconds(), "total-ratio")
		b.Logf("batched submission, %d rounds of %d jobs: total chain/direct %.3f, median round %.3f, worst %.3f; chain slower in %d of %d rounds, within 20%% of direct in %d of %d",
			rounds, jobs, sumC.Seconds()/sumD.Seconds(), med, worst, slower, rounds, within, rounds)
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}
