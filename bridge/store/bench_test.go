package store_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

// submit is what the broker does for a submission: a number, then a fresh
// queued job with its "submitted" event, committed before it returns.
func submit(ctx context.Context, s bridge.Store) error {
	n, err := s.NextID(ctx)
	if err != nil {
		return err
	}
	j := &bridge.Job{ID: fmt.Sprintf("g%06d", n), State: bridge.Queued, Submit: t0, ExitCode: -1,
		Req: bridge.Request{Name: "bench", Command: []string{"./a.out", "-n", "100"}, Nodes: 4, CoresPerNode: 8,
			Estimate: time.Hour, Outputs: []string{"out.txt"}},
		Events: []bridge.Event{{Time: t0, Kind: "submitted", Msg: "4 node(s), walltime 1h0m0s"}}}
	return s.Put(ctx, j)
}

// BenchmarkSubmit: durable submissions per second, by one writer and by
// many concurrent ones (API requests), which share commits.
func BenchmarkSubmit(b *testing.B) {
	for _, writers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s := openTemp(b)
			ctx := context.Background()
			b.ResetTimer()
			var next atomic.Int64
			var wg sync.WaitGroup
			errc := make(chan error, writers)
			for range writers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if err := submit(ctx, s); err != nil {
							errc <- err
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
			close(errc)
			for err := range errc {
				b.Fatal(err)
			}
		})
	}
}

// scaleDB is a database of 100,000 jobs shaped like a busy broker's: 1,000
// running, 2,000 queued, 1,000 dispatched, the rest ended, with 3 to 8
// events each. Built once per test binary.
var scaleDir string

var scaleDB = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "gridsub-store-scale-")
	if err != nil {
		return "", err
	}
	scaleDir = dir // removed by TestMain
	path := filepath.Join(dir, "scale.db")
	s, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		return "", err
	}
	defer s.Close()
	const n, workers = 100_000, 64
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	sites := []string{"Beijing", "Shanghai", "Guangzhou", "Wuhan"}
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				st := bridge.Completed
				switch {
				case i%100 == 7:
					st = bridge.Running
				case i%50 == 3:
					st = bridge.Queued
				case i%100 == 11:
					st = bridge.Dispatched
				case i%20 == 5:
					st = bridge.Failed
				}
				j := job(fmt.Sprintf("g%06d", i), fmt.Sprintf("job-%d", i%500), st)
				if st != bridge.Queued {
					j.Comps = []bridge.Component{{Site: sites[i%4], Nodes: 1 + i%64, RemoteID: backends.JobID("1" + strconv.Itoa(i)), Start: t0}}
					if i%7 == 0 {
						j.Comps = append(j.Comps, bridge.Component{Site: sites[(i+1)%4], Nodes: 8, RemoteID: backends.JobID("2" + strconv.Itoa(i))})
					}
				}
				for k := range 2 + i%6 {
					j.Events = append(j.Events, bridge.Event{Time: t0.Add(time.Duration(k) * time.Minute), Kind: "state", Site: sites[i%4], Msg: "component changed state"})
				}
				if err := s.Put(context.Background(), j); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return "", err
	}
	return path, s.Close()
})

func scalePath(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("builds a 100,000-job database")
	}
	if raceOn {
		tb.Skip("the race detector makes a 100,000-job build slow and its timings meaningless")
	}
	start := time.Now()
	p, err := scaleDB()
	if err != nil {
		tb.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		tb.Logf("built the 100,000-job database in %s", d.Round(time.Millisecond))
	}
	return p
}

func BenchmarkListRunning100k(b *testing.B) {
	s, err := store.Open(context.Background(), scalePath(b), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		name string
		f    bridge.Filter
	}{
		{"running", bridge.Filter{States: []bridge.JobState{bridge.Running}}},
		{"running+events", bridge.Filter{States: []bridge.JobState{bridge.Running}, Events: true}},
		{"site+queued,running", bridge.Filter{Site: "Wuhan", States: []bridge.JobState{bridge.Dispatched, bridge.Running}}},
		{"page of 100 after 50000", bridge.Filter{After: "g050000", Limit: 100}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				js, err := s.List(context.Background(), c.f)
				if err != nil || len(js) == 0 {
					b.Fatal(len(js), err)
				}
			}
		})
	}
}

const rssEnv = "GRIDSUB_STORE_RSS_HELPER"

// rssHelper runs in a child process: open the 100k store, list the running
// jobs, get one, submit one, and report its resident memory.
func rssHelper(path string) {
	ctx := context.Background()
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(3)
	}
	start := time.Now()
	js, err := s.List(ctx, bridge.Filter{States: []bridge.JobState{bridge.Running}})
	took := time.Since(start)
	if err != nil {
		fmt.Println("list:", err)
		os.Exit(3)
	}
	if _, err := s.Get(ctx, "g012345"); err != nil {
		fmt.Println("get:", err)
		os.Exit(3)
	}
	if err := submit(ctx, s); err != nil {
		fmt.Println("submit:", err)
		os.Exit(3)
	}
	rss("after list running, get, submit:")
	all, err := s.List(ctx, bridge.Filter{}) // every job once: the worst a client can ask
	if err != nil {
		fmt.Println("list all:", err)
		os.Exit(3)
	}
	n := len(all)
	rss("after also listing all 100,000 jobs at once:")
	fmt.Printf("running %d first-list %s all %d\n", len(js), took.Round(time.Microsecond), n)
	s.Close()
}

func rss(what string) {
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "VmRSS:") || strings.HasPrefix(l, "VmHWM:") {
			fmt.Println(what, strings.Join(strings.Fields(l), " "))
		}
	}
}

// TestScale100k: with 100,000 jobs stored, the list of running jobs takes
// under 100 ms, and a process holding the store stays small.
func TestScale100k(t *testing.T) {
	path := scalePath(t)
	s, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var times []time.Duration
	var js []*bridge.Job
	for range 7 {
		start := time.Now()
		js, err = s.List(context.Background(), bridge.Filter{States: []bridge.JobState{bridge.Running}})
		times = append(times, time.Since(start))
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(times)
	if len(js) != 1000 {
		t.Fatalf("%d running jobs, want 1000", len(js))
	}
	for _, j := range js {
		if j.State != bridge.Running {
			t.Fatalf("listed %s in state %s", j.ID, j.State)
		}
	}
	t.Logf("List(running) of 1,000 among 100,000: median %s, max %s", times[3], times[6])
	if times[3] > 100*time.Millisecond {
		t.Errorf("List(running) median %s, want under 100ms", times[3])
	}
	fi, _ := os.Stat(path)
	t.Logf("database file: %.1f MB", float64(fi.Size())/1e6)

	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), rssEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	t.Logf("a fresh process holding the store:\n%s", out)
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[len(f)-3] == "VmHWM:" {
			kb, _ := strconv.Atoi(f[len(f)-2])
			if kb > 300*1024 {
				t.Errorf("peak resident memory %d kB, want under 300 MB", kb)
			}
		}
	}
}

// BenchmarkCheck100k: what integrity costs on the 100,000-job database —
// Open (quick_check included), Check with quick_check and integrity_check,
// and a Backup (VACUUM INTO, then integrity_check of the copy).
func BenchmarkCheck100k(b *testing.B) {
	path := scalePath(b)
	ctx := context.Background()
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			s, err := store.Open(ctx, path, store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
	})
	for _, full := range []bool{false, true} {
		b.Run(map[bool]string{false: "quick_check", true: "integrity_check"}[full], func(b *testing.B) {
			for b.Loop() {
				if _, err := store.Check(ctx, path, store.CheckOptions{Full: full}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("backup", func(b *testing.B) {
		dir := b.TempDir()
		n := 0
		for b.Loop() {
			n++
			if _, err := store.BackupFile(ctx, path, filepath.Join(dir, strconv.Itoa(n)+".db")); err != nil {
				b.Fatal(err)
			}
		}
	})
}
