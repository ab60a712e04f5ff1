package plannerrpc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/simbackend/replay"
)

// The planner boundary's costs, side by side with the same work in
// process (numbers in docs/plugins.md):
//
//	go test -run '^$' -bench . -benchtime 2000x ./bridge/plugins/plannerrpc
//
// "plugin" is a real subprocess (internal/testplanner, AutoMTLS, gRPC over
// a Unix socket); the overhead is plugin minus inprocess. "grpc" is the
// shims over go-plugin's in-process test connection (no process boundary,
// no TLS): the cost of the shims and protobuf alone.

// The machine the numbers come from may be shared: wall time per op then
// includes waiting for a CPU. Each benchmark also reports cpu-µs/op, the
// CPU time (user + system) of this process and of the plugin process per
// op: what one op costs, whoever waits.

// cpuNow is the CPU time this process and process pid (0: none) used so
// far.
func cpuNow(b *testing.B, pid int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	d := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if pid > 0 {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Fatal(err)
		}
		// Fields after the command (in parentheses): state is field 3,
		// utime 14 and stime 15, in clock ticks (100 a second on Linux).
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
		ut, _ := strconv.ParseInt(f[14-3], 10, 64)
		st, _ := strconv.ParseInt(f[15-3], 10, 64)
		d += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return d
}

// timed runs the benchmark loop and reports cpu-µs/op.
func timed(b *testing.B, pid int, loop func()) {
	b.ReportAllocs()
	c0 := cpuNow(b, pid)
	b.ResetTimer()
	loop()
	b.StopTimer()
	b.ReportMetric(float64((cpuNow(b, pid)-c0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// fullGrid is 10 sites, every node held far ahead, and q jobs queued: a
// pass plans the whole queue and starts nothing, so every iteration does
// the same work.
func fullGrid(q int) *policy.Snapshot {
	r := rand.New(rand.NewPCG(1, 1))
	s := randSnapshot(r, 10, q)
	for i := range s.Sites {
		st := &s.Sites[i]
		st.Busy = append(st.Busy, policy.Hold{Nodes: st.Free, Until: t0.Add(1000 * time.Hour)})
		st.Free = 0
	}
	return s
}

// BenchmarkPlanSnapshot: one cycle on the snapshot path with 1,000 queued
// jobs and 10 sites; quiet (a replay) and explained (the broker: a
// Pending reason for every waiting job).
func BenchmarkPlanSnapshot(b *testing.B) {
	for _, quiet := range []bool{true, false} {
		s := fullGrid(1000)
		s.Quiet = quiet
		for _, where := range []string{"inprocess", "grpc", "plugin"} {
			b.Run(fmt.Sprintf("quiet=%v/%s", quiet, where), func(b *testing.B) {
				pl, pid := builtin(b, "greedy-easy"), 0
				switch where {
				case "grpc":
					pl, _ = dial(b, pl)
				case "plugin":
					p := load(b, "greedy-easy")
					pl, pid = plain{p.Planner()}, p.Pid()
				}
				ctx := context.Background()
				timed(b, pid, func() {
					for range b.N {
						if _, err := pl.Plan(ctx, s); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		}
	}
}

// BenchmarkSessionPass: one pass of a session on that grid after a
// handful of changes (a job submitted, a hold released and another made).
func BenchmarkSessionPass(b *testing.B) {
	for _, where := range []string{"inprocess", "grpc", "plugin"} {
		b.Run(where, func(b *testing.B) {
			pl, pid := builtin(b, "greedy-easy"), 0
			switch where {
			case "grpc":
				pl, _ = dial(b, pl)
			case "plugin":
				p := load(b, "greedy-easy")
				pl, pid = p.Planner(), p.Pid()
			}
			s := fullGrid(1000)
			s.Quiet = true
			ss, err := pl.(policy.Incremental).NewSession(s)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			now := t0
			until := t0.Add(999 * time.Hour)
			if err := ss.Hold(0, 1, until); err != nil {
				b.Fatal(err)
			}
			timed(b, pid, func() {
				for i := range b.N {
					now = now.Add(time.Second)
					ss.Submit(policy.Job{ID: fmt.Sprint("b", i), Width: 8, Estimate: time.Hour, Submit: now, Origin: -1})
					if err := ss.Release(0, 1, until); err != nil {
						b.Fatal(err)
					}
					until = until.Add(time.Second)
					if err := ss.Hold(0, 1, until); err != nil {
						b.Fatal(err)
					}
					plan, err := ss.Plan(ctx, now)
					if err != nil {
						b.Fatal(err)
					}
					if len(plan.Decisions) != 0 {
						b.Fatalf("pass %d decided %d jobs on a full grid", i, len(plan.Decisions))
					}
				}
			})
		})
	}
}

// BenchmarkReplayCTC: the whole CTC trace (Workload 1) replayed with
// greedy-easy on the Session path, in process and through the plugin.
// Minutes through the plugin: run it alone, with -benchtime 1x.
func BenchmarkReplayCTC(b *testing.B) {
	jobs := ctcJobs(b, 0)
	for _, where := range []string{"inprocess", "plugin"} {
		b.Run(where, func(b *testing.B) {
			pl, pid := builtin(b, "greedy-easy"), 0
			if where == "plugin" {
				p := load(b, "greedy-easy")
				pl, pid = p.Planner(), p.Pid()
			}
			cycles := 0
			timed(b, pid, func() {
				for range b.N {
					res, err := replay.Run(context.Background(), paperSetup(pl), jobs, nil)
					if err != nil {
						b.Fatal(err)
					}
					cycles = res.Cycles
				}
			})
			b.ReportMetric(float64(cycles), "cycles")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(cycles)/float64(b.N), "µs/cycle")
		})
	}
}

// BenchmarkRoundTrip: the floor, an empty RPC (Info) to the plugin process.
func BenchmarkRoundTrip(b *testing.B) {
	p := load(b, "greedy-easy")
	c, _ := p.conn()
	ctx := context.Background()
	timed(b, p.Pid(), func() {
		for range b.N {
			if _, err := c.rpc.Info(ctx, &pb.PlannerInfoRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
