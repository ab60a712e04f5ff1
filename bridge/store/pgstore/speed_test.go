package pgstore_test

import (
	"context"
	"fmt"
	"os"
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
	"github.com/gridsub/gridsub/bridge/store/pgstore"
	"github.com/gridsub/gridsub/bridge/store/storetest"
)

// submitOne is what the broker does for a submission: a number, then a
// fresh queued job with its "submitted" event, durable before it returns.
func submitOne(ctx context.Context, s store.Store, prefix string) error {
	n, err := s.NextID(ctx)
	if err != nil {
		return err
	}
	j := &bridge.Job{ID: fmt.Sprintf("%s%07d", prefix, n), State: bridge.Queued, Submit: storetest.T0, ExitCode: -1,
		Req: bridge.Request{Name: "bench", Command: []string{"./a.out", "-n", "100"}, Nodes: 4, CoresPerNode: 8,
			Estimate: time.Hour, Outputs: []string{"out.txt"}},
		Events: []bridge.Event{{Time: storetest.T0, Kind: "submitted", Msg: "4 node(s), walltime 1h0m0s"}}}
	return s.Put(ctx, j)
}

// submitRate runs n submissions from clients goroutines and returns the
// rate per second.
func submitRate(tb testing.TB, s store.Store, clients, n int, prefix string) float64 {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := submitOne(ctx, s, prefix); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		tb.Fatal(err)
	}
	return float64(n) / time.Since(start).Seconds()
}

// fill100k stores 100,000 jobs shaped like a busy broker's (as
// bridge/store's scale database): 1,000 running, 2,000 queued, 1,000
// dispatched, the rest ended, 2 to 7 events each.
func fill100k(tb testing.TB, s store.Store) {
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
				j := storetest.Job(fmt.Sprintf("g%06d", i), fmt.Sprintf("job-%d", i%500), st)
				if st != bridge.Queued {
					j.Comps = []bridge.Component{{Site: sites[i%4], Nodes: 1 + i%64, RemoteID: backends.JobID("1" + strconv.Itoa(i)), Start: storetest.T0}}
				}
				for k := range 2 + i%6 {
					j.Events = append(j.Events, bridge.Event{Time: storetest.T0.Add(time.Duration(k) * time.Minute), Kind: "state", Site: sites[i%4], Msg: "component changed state"})
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
		tb.Fatal(err)
	}
}

// listTimes lists the 1,000 running jobs runs times and returns the
// median and the maximum.
func listTimes(tb testing.TB, s store.Store, f bridge.Filter, want, runs int) (med, max time.Duration) {
	var ds []time.Duration
	for range runs {
		start := time.Now()
		js, err := s.List(context.Background(), f)
		d := time.Since(start)
		if err != nil || len(js) != want {
			tb.Fatalf("List(%+v) = %d jobs, %v; want %d", f, len(js), err, want)
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)-1]
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// TestSpeedSideBySide measures both stores in one run (GRIDSUB_LONG=1):
// durable submissions per second with 50 clients, and listing the 1,000
// running jobs of 100,000 (median and max of 30 runs), with the machine's
// load average. The bars (docs/store.md): at least 2,000 submissions/s and
// a list under 25 ms on PostgreSQL.
func TestSpeedSideBySide(t *testing.T) {
	if os.Getenv("GRIDSUB_LONG") == "" {
		t.Skip("GRIDSUB_LONG=1: builds two 100,000-job stores and times them")
	}
	stores := []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"sqlite", func(t *testing.T) store.Store {
			s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "gridsub.db"), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
		{"postgres", func(t *testing.T) store.Store { return openPG(t) }},
	}
	running := bridge.Filter{States: []bridge.JobState{bridge.Running}}
	withEvents := bridge.Filter{States: []bridge.JobState{bridge.Running}, Events: true}
	page := bridge.Filter{After: "g050000", Limit: 1000}
	var rows []string
	for _, st := range stores {
		s := st.open(t)
		la0 := loadavg()
		rate := submitRate(t, s, 50, 20_000, "s")
		s2 := st.open(t)
		fill100k(t, s2)
		m1, x1 := listTimes(t, s2, running, 1000, 30)
		m2, x2 := listTimes(t, s2, withEvents, 1000, 30)
		m3, x3 := listTimes(t, s2, page, 1000, 30)
		server := "–"
		if pg, ok := s2.(*pgstore.Postgres); ok {
			server = serverTime(t, pg)
		}
		row := fmt.Sprintf("| %s | %.0f | %s / %s | %s / %s | %s / %s | %s | %s → %s |", st.name, rate,
			m1.Round(100*time.Microsecond), x1.Round(100*time.Microsecond), m2.Round(100*time.Microsecond), x2.Round(100*time.Microsecond),
			m3.Round(100*time.Microsecond), x3.Round(100*time.Microsecond), server, la0, loadavg())
		t.Log(row)
		rows = append(rows, row)
		if st.name == "postgres" {
			if rate < 2000 {
				t.Errorf("postgres: %.0f durable submissions/s with 50 clients, want >= 2,000", rate)
			}
			if m1 >= 25*time.Millisecond {
				t.Errorf("postgres: listing 1,000 of 100,000 jobs takes %s (median), want < 25 ms", m1)
			}
		}
	}
	fmt.Println("| store | submissions/s (50 clients, 20,000) | list 1,000 running of 100,000: median / max | … with events | page of 1,000 after 50,000 | the running list's query on the server (EXPLAIN ANALYZE, median of 10) | load average (1/5/15 min) before → after |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Println(r)
	}
}

// serverTime is the median execution time PostgreSQL reports for the
// running-jobs query (EXPLAIN ANALYZE): the server's share of a list,
// without the transfer and the decoding of the bodies.
func serverTime(t *testing.T, s *pgstore.Postgres) string {
	var ds []float64
	for range 10 {
		rows, err := s.Pool().Query(context.Background(), `EXPLAIN (ANALYZE, FORMAT JSON) SELECT j.seq, j.id, j.body FROM jobs AS j WHERE j.state IN ('running') ORDER BY j.seq`)
		if err != nil {
			t.Fatal(err)
		}
		var plans []map[string]any
		for rows.Next() {
			if err := rows.Scan(&plans); err != nil {
				t.Fatal(err)
			}
		}
		rows.Close()
		if len(plans) > 0 {
			if v, ok := plans[0]["Execution Time"].(float64); ok {
				ds = append(ds, v)
			}
		}
	}
	if len(ds) == 0 {
		return "?"
	}
	slices.Sort(ds)
	return fmt.Sprintf("%.1fms", ds[len(ds)/2])
}
