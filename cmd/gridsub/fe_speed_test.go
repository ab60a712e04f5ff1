package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// TestFrontEndSpeed (GRIDSUB_LONG=1) measures the front-ends as workflow
// engines call them, one process per call, on a daemon of the simulated
// testbed: 1,000 `gridsub sbatch` processes one at a time, then, with
// 10,000 jobs in the daemon, `gridsub status --snakemake ID` and `squeue`
// (median and p99, process start included). Beside them, the machine's
// floor: a Go program that does nothing, started the same way. The
// numbers go to docs/frontends.md.
func TestFrontEndSpeed(t *testing.T) {
	if os.Getenv("GRIDSUB_LONG") == "" {
		t.Skip("GRIDSUB_LONG=1: submits 10,000 jobs and times 1,500 processes (a few minutes)")
	}
	bin := buildBinary(t)
	d := t.TempDir()
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	startServe(t, bin, state, sock, "--time-scale", "600")
	env := append(slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "GRIDSUB_") }), envSocket+"="+sock)
	run := func(name string, args ...string) (time.Duration, string) {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		start := time.Now()
		out, err := cmd.Output()
		el := time.Since(start)
		if err != nil {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		return el, string(out)
	}
	stats := func(ds []time.Duration) (med, p99 time.Duration) {
		slices.Sort(ds)
		return ds[len(ds)/2], ds[(len(ds)*99)/100]
	}
	load := func() string {
		b, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(b))[:3], " ")
	}
	// The floor: a Go program that does nothing.
	hello := filepath.Join(d, "hello")
	os.WriteFile(filepath.Join(d, "hello.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	if out, err := exec.Command("go", "build", "-o", hello, filepath.Join(d, "hello.go")).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var floor []time.Duration
	for range 200 {
		el, _ := run(hello)
		floor = append(floor, el)
	}
	fm, fp := stats(floor)
	t.Logf("load average %s", load())
	t.Logf("floor (an empty Go program): median %s p99 %s", fm.Round(10*time.Microsecond), fp.Round(10*time.Microsecond))

	c := api.NewUnixClient(sock)
	bulk := func(n int, est time.Duration) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < n; i += 8 {
					_, err := c.Submit(context.Background(), bridge.Request{Name: "bulk", Script: "sleep 60", Nodes: 1, CoresPerNode: 1, Estimate: est, NoRetry: true})
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	// 9,000 short jobs through the API, run to their end (the simulated
	// sites at 600 virtual seconds a second).
	bulk(9000, time.Minute)
	waitFor(t, 10*time.Minute, "the 9,000 short jobs ended", func() bool {
		rows, err := c.Queue(context.Background())
		return err == nil && len(rows) == 0
	})
	t.Logf("9,000 jobs ended; load average %s", load())

	// 1,000 sbatch processes one at a time.
	var sb []time.Duration
	start := time.Now()
	for range 1000 {
		el, out := run(bin, "sbatch", "--parsable", "-t", "30-00:00:00", "-J", "speed", "--wrap", "sleep 30d")
		if strings.TrimSpace(out) == "" {
			t.Fatal("sbatch printed no id")
		}
		sb = append(sb, el)
	}
	total := time.Since(start)
	sm, sp := stats(sb)
	t.Logf("1,000 sbatch processes in %s: %.1f calls/s; per call median %s p99 %s", total.Round(time.Millisecond),
		1000/total.Seconds(), sm.Round(10*time.Microsecond), sp.Round(10*time.Microsecond))
	t.Logf("load average %s", load())

	unfinished := func() int {
		rows, err := c.Queue(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return len(rows)
	}
	for round := range 2 {
		if round == 1 {
			// The worst case: 9,000 more, long, so 10,000 are unfinished.
			bulk(9000, 30*24*time.Hour)
		}
		t.Logf("%d jobs in the daemon, %d unfinished; load average %s", 1000+9000*(round+1), unfinished(), load())
		// The daemon's side of squeue alone: GET /v1/queue in this process.
		var qs []time.Duration
		for range 30 {
			start := time.Now()
			rows, err := c.Queue(context.Background())
			if err != nil || len(rows) == 0 {
				t.Fatalf("GET /v1/queue: %d rows, %v", len(rows), err)
			}
			qs = append(qs, time.Since(start))
		}
		qm, qp := stats(qs)
		t.Logf("GET /v1/queue (%d rows) in this process: median %s p99 %s", unfinished(), qm.Round(10*time.Microsecond), qp.Round(10*time.Microsecond))
		measure := func(n int, args ...string) (time.Duration, time.Duration, string) {
			var ds []time.Duration
			var out string
			for i := range n {
				a := slices.Clone(args)
				for k := range a {
					a[k] = strings.ReplaceAll(a[k], "{n}", fmt.Sprint(1+(i*7919)%10000))
				}
				el, o := run(bin, a...)
				ds = append(ds, el)
				out = o
			}
			m, p := stats(ds)
			return m, p, out
		}
		for _, c := range []struct {
			n    int
			args []string
		}{
			{200, []string{"status", "--snakemake", "{n}"}},
			{100, []string{"squeue", "-h", "-j", "{n}"}},
			{30, []string{"squeue"}},
			{30, []string{"squeue", "-h", "-o", "%i %t %M"}},
		} {
			m, p, out := measure(c.n, c.args...)
			t.Logf("gridsub %s (%d calls, %d lines): median %s p99 %s", strings.Join(c.args, " "), c.n, strings.Count(out, "\n"),
				m.Round(10*time.Microsecond), p.Round(10*time.Microsecond))
		}
	}
	t.Logf("load average %s", load())
}
