package main

import (
	"cmp"
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
// testbed: with 9,000 jobs queued, 1,000 `sbatch` processes one at a time
// (the link `gridsub shims install` makes: to gridsub-fe where it lies
// beside gridsub); then, with those 10,000 unfinished, `gridsub status
// --snakemake ID`, `gridsub-fe status --snakemake ID` and `squeue` through
// the link (median and p99, process start included). Beside them,
// the machine's floor: a Go program that does nothing, started the same
// way, and the load average.
//
// With GRIDSUB_SPEED_BEFORE=/path/to/an/older/gridsub it measures that
// binary too, side by side: each binary has its own daemon with the same
// jobs, and the calls alternate between the two in blocks, so both see the
// same load. The numbers go to docs/frontends.md.
func TestFrontEndSpeed(t *testing.T) {
	if os.Getenv("GRIDSUB_LONG") == "" {
		t.Skip("GRIDSUB_LONG=1: submits 10,000 jobs and times 1,500 processes per binary (a few minutes)")
	}
	// Each side: gridsub, its front-end binary (gridsub-fe beside it, or
	// gridsub itself for a gridsub without one) and the links `gridsub
	// shims install` makes, which workflow engines call.
	type side struct {
		name, bin, fe, shims, sock string
		env                        []string
		c                          *api.Client
	}
	var sides []*side
	// The daemons' --time-scale: at 600 the simulated sites' clock, and so
	// the daemon's cycles, run 600 times faster than a real daemon's;
	// GRIDSUB_SPEED_TIME_SCALE=1 measures at a real daemon's pace.
	scale := cmp.Or(os.Getenv("GRIDSUB_SPEED_TIME_SCALE"), "600")
	add := func(name, bin, fe string) {
		d := t.TempDir()
		state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
		startServe(t, bin, state, sock, "--config", "testbed", "--time-scale", scale)
		env := append(slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "GRIDSUB_") }), envSocket+"="+sock)
		shims := filepath.Join(d, "shims")
		if out, err := exec.Command(bin, "shims", "install", shims).CombinedOutput(); err != nil {
			t.Fatalf("%s shims install: %v\n%s", name, err, out)
		}
		if target, _ := os.Readlink(filepath.Join(shims, "squeue")); target != fe {
			t.Fatalf("%s: the shims link to %s, want %s", name, target, fe)
		}
		sides = append(sides, &side{name: name, bin: bin, fe: fe, shims: shims, sock: sock, env: env, c: api.NewUnixClient(sock)})
	}
	if before := os.Getenv("GRIDSUB_SPEED_BEFORE"); before != "" {
		fe := filepath.Join(filepath.Dir(before), "gridsub-fe")
		if !isExecutable(fe) {
			fe = before
		}
		add("before", before, fe)
	}
	gridsub, fe := feBinaries(t)
	add("after", gridsub, fe)

	// cpu is each side's CPU time (user and system) per process: on a
	// loaded machine the wall time is mostly waiting for a core, and the
	// CPU a call needs is what it makes every other process wait.
	cpu := map[string][]time.Duration{}
	run := func(s *side, name string, args ...string) (time.Duration, string) {
		cmd := exec.Command(name, args...)
		cmd.Env = s.env
		start := time.Now()
		out, err := cmd.Output()
		el := time.Since(start)
		if err != nil {
			t.Fatalf("%s: %s %v: %v", s.name, name, args, err)
		}
		cpu[s.name] = append(cpu[s.name], cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
		return el, string(out)
	}
	stats := func(ds []time.Duration) string {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		r := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
		return "median " + r(ds[len(ds)/2]) + " ms, p99 " + r(ds[(len(ds)*99)/100]) + " ms"
	}
	load := func() string {
		b, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(b))[:3], " ")
	}
	// The floor: a Go program that does nothing.
	d := t.TempDir()
	hello := filepath.Join(d, "hello")
	os.WriteFile(filepath.Join(d, "hello.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	if out, err := exec.Command("go", "build", "-o", hello, filepath.Join(d, "hello.go")).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var floor []time.Duration
	for range 200 {
		el, _ := run(sides[0], hello)
		floor = append(floor, el)
	}
	t.Logf("daemons at --time-scale %s; load average %s; floor (an empty Go program): %s; CPU %s", scale, load(), stats(floor), stats(cpu[sides[0].name]))

	bulk := func(c *api.Client, n int) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < n; i += 8 {
					_, err := c.Submit(context.Background(), bridge.Request{Name: "bulk", Script: "sleep 60", Nodes: 1, CoresPerNode: 1, Estimate: 30 * 24 * time.Hour, NoRetry: true})
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
	for _, s := range sides {
		bulk(s.c, 9000)
	}
	t.Logf("9,000 jobs queued in each daemon; load average %s", load())

	// 1,000 sbatch processes one at a time per binary, in alternating
	// blocks of 50.
	const block = 50
	sb := map[string][]time.Duration{}
	clear(cpu)
	took := map[string]time.Duration{}
	for range 1000 / block {
		for _, s := range sides {
			start := time.Now()
			for range block {
				el, out := run(s, filepath.Join(s.shims, "sbatch"), "--parsable", "-t", "30-00:00:00", "-J", "speed", "--wrap", "sleep 30d")
				if strings.TrimSpace(out) == "" {
					t.Fatalf("%s: sbatch printed no id", s.name)
				}
				sb[s.name] = append(sb[s.name], el)
			}
			took[s.name] += time.Since(start)
		}
	}
	for _, s := range sides {
		t.Logf("%s: 1,000 sbatch processes in %s: %.1f calls/s; per call %s; CPU per call %s", s.name, took[s.name].Round(time.Millisecond),
			1000/took[s.name].Seconds(), stats(sb[s.name]), stats(cpu[s.name]))
	}
	t.Logf("load average %s", load())

	for _, s := range sides {
		rows, err := s.c.Queue(context.Background())
		if err != nil || len(rows) != 10000 {
			t.Fatalf("%s: %d unfinished jobs, want 10,000 (%v)", s.name, len(rows), err)
		}
	}
	// prog is what a call runs: gridsub, the front-end binary, or a link.
	prog := func(s *side, p string) string {
		switch p {
		case "gridsub":
			return s.bin
		case "gridsub-fe":
			return s.fe
		}
		return filepath.Join(s.shims, p)
	}
	for _, c := range []struct {
		n    int
		args []string
	}{
		{200, []string{"gridsub", "status", "--snakemake", "{n}"}},
		{200, []string{"gridsub-fe", "status", "--snakemake", "{n}"}},
		{100, []string{"squeue", "-h", "-j", "{n}"}},
		{30, []string{"squeue"}},
		{30, []string{"squeue", "-h", "-o", "%i %t %M"}},
	} {
		ds := map[string][]time.Duration{}
		outs := map[string]string{}
		clear(cpu)
		for i := range c.n {
			a := slices.Clone(c.args[1:])
			for k := range a {
				a[k] = strings.ReplaceAll(a[k], "{n}", fmt.Sprint(1+(i*7919)%10000))
			}
			for _, s := range sides {
				el, o := run(s, prog(s, c.args[0]), a...)
				ds[s.name] = append(ds[s.name], el)
				outs[s.name] = o
			}
		}
		for _, s := range sides {
			t.Logf("%s: %s (%d calls, %d lines): %s; CPU %s; load average %s", s.name, strings.Join(c.args, " "), c.n,
				strings.Count(outs[s.name], "\n"), stats(ds[s.name]), stats(cpu[s.name]), load())
		}
	}
}
