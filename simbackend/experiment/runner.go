package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/registry"
	"github.com/gridsub/gridsub/policy/trust"
	"github.com/gridsub/gridsub/simbackend"
	"github.com/gridsub/gridsub/simbackend/replay"
	"github.com/gridsub/gridsub/simbackend/swf"
)

// Result is one finished run.
type Result struct {
	Run
	Metrics     map[string]float64 `json:"metrics"`
	WallSeconds float64            `json:"wall_seconds"`
}

// Summary is a finished experiment: what summary.json holds.
type Summary struct {
	Experiment  *Experiment `json:"experiment"`
	File        string      `json:"file"`
	Params      []string    `json:"params"`  // column order of the parameters
	Metrics     []string    `json:"metrics"` // column order of the metrics
	Workers     int         `json:"workers"`
	WallSeconds float64     `json:"wall_seconds"`
	Runs        []Result    `json:"runs"`
}

// Progress is told how far an experiment has come: runs finished, runs in
// all, and the share of the total work done (0..1, counting jobs already
// submitted inside unfinished runs). Calls come from several goroutines
// but never concurrently.
type Progress func(done, total int, fraction float64)

// Options tune Execute.
type Options struct {
	// Workers is the number of runs in flight (default GOMAXPROCS).
	Workers int
	// Progress, when set, is called as runs advance.
	Progress Progress
	// ViaBroker replays every run through bridge.Broker (replay.Setup.Broker):
	// the same results as the default direct driver, slower.
	ViaBroker bool
}

// Execute performs every run of e on a pool of workers and returns them in
// run order. A cancelled ctx stops the workers and returns ctx's error.
// The results do not depend on the number of workers.
func Execute(ctx context.Context, e *Experiment, o Options) (*Summary, error) {
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	runs := e.Expand()
	workers = max(1, min(workers, len(runs)))
	start := time.Now()
	exec, err := prepare(e, o.ViaBroker)
	if err != nil {
		return nil, err
	}
	if err := checkPlugins(ctx, e); err != nil {
		return nil, err
	}
	parent := ctx
	ctx, cancel := context.WithCancel(parent)
	defer cancel()

	results := make([]Result, len(runs))
	shares := make([]atomic.Int64, len(runs)) // per-mille of each run done
	var (
		mu       sync.Mutex
		done     int
		firstErr error
	)
	report := func() {
		if o.Progress == nil {
			return
		}
		var sum int64
		for i := range shares {
			sum += shares[i].Load()
		}
		o.Progress(done, len(runs), float64(sum)/float64(1000*len(runs)))
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t0 := time.Now()
				prog := func(submitted, total int) {
					if total > 0 {
						shares[i].Store(int64(900 * submitted / total))
						mu.Lock()
						report()
						mu.Unlock()
					}
				}
				m, err := exec(ctx, runs[i].Params, prog)
				shares[i].Store(1000)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("run %d (%s): %w", i, describeParams(e.Kind, runs[i].Params), err)
					}
					cancel()
				} else {
					results[i] = Result{Run: runs[i], Metrics: m, WallSeconds: time.Since(t0).Seconds()}
					done++
					report()
				}
				mu.Unlock()
			}
		}()
	}
	for i := range runs {
		select {
		case next <- i:
			continue
		case <-ctx.Done():
		}
		break
	}
	close(next)
	wg.Wait()
	if err := parent.Err(); err != nil {
		return nil, err
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return &Summary{
		Experiment: e, File: e.file, Params: ParamNames(e.Kind), Metrics: e.MetricNames(),
		Workers: workers, WallSeconds: time.Since(start).Seconds(), Runs: results,
	}, nil
}

func describeParams(kind string, p Params) string {
	s := ""
	for _, n := range ParamNames(kind) {
		if s != "" {
			s += " "
		}
		s += n + "=" + p.Value(n)
	}
	return s
}

// execFunc performs one run.
type execFunc func(ctx context.Context, p Params, progress func(submitted, total int)) (map[string]float64, error)

// prepare reads what every run shares (the workloads, the reference
// schedule) once and returns the function that performs one run.
func prepare(e *Experiment, viaBroker bool) (execFunc, error) {
	switch e.Kind {
	case KindCTCReference:
		return prepareReference(e)
	case KindDRRM:
		return prepareDRRM(e)
	case KindTrustMinMin:
		return prepareTrust(e)
	}
	if e.Kind == KindDGJS {
		return prepareDGJS(e)
	}
	trace, err := loadTrace(e.Workload)
	if err != nil {
		return nil, err
	}
	type shaped struct {
		workload int
		seed     uint64
	}
	workloads := map[shaped][]replay.Job{}
	for _, seed := range e.axisSeed() {
		wl := e.Workload
		wl.Seed = seed
		for _, w := range e.axisWorkload() {
			if workloads[shaped{w, seed}], err = shapeJobs(trace, wl, w, len(e.Testbed.Sites)); err != nil {
				return nil, err
			}
		}
	}
	latency, err := ParseLatency(e.Testbed.Latency)
	if err != nil {
		return nil, err
	}
	var learn policy.Trust
	if e.Testbed.LearnTrust != "" {
		if learn, err = registry.Trust(e.Testbed.LearnTrust); err != nil {
			return nil, err
		}
	}
	halfLife, err := trustHalfLife(&e.Testbed)
	if err != nil {
		return nil, err
	}
	caps := make([]string, len(e.Testbed.Sites))
	areas := map[string]string{}
	for i, s := range e.Testbed.Sites {
		caps[i] = s.Name
		if s.Area != "" {
			areas[s.Name] = s.Area
		}
	}
	return func(ctx context.Context, p Params, progress func(int, int)) (map[string]float64, error) {
		jobs := workloads[shaped{p.Workload, p.Seed}]
		hs, err := e.siteH(p.HSet)
		if err != nil {
			return nil, err
		}
		sites := make([]replay.Site, len(e.Testbed.Sites))
		for i, s := range e.Testbed.Sites {
			sites[i] = replay.Site{Name: s.Name, Nodes: s.Nodes, H: hs[i]}
		}
		bw, err := ParseBandwidth(p.Bandwidth)
		if err != nil {
			return nil, err
		}
		var pl policy.Planner = &trust.Planner{Areas: areas} // paper 002's Trust-Min-min, with the testbed's local areas
		closePlanner := func() {}
		if p.Policy != trust.PlannerName {
			if pl, closePlanner, err = openPlanner(ctx, p.Policy); err != nil {
				return nil, err
			}
		}
		defer closePlanner()
		res, err := replay.Run(ctx, replay.Setup{Broker: viaBroker,
			Sites: sites, Links: links(len(sites), bw, latency), MultiSite: p.P, Planner: pl, Seed: p.Seed,
			Trust: learn, TrustHalfLife: halfLife,
		}, jobs, progress)
		if err != nil {
			return nil, err
		}
		return coallocMetricsOf(res, len(jobs), caps), nil
	}, nil
}

// links is a full mesh with one bandwidth (bytes/s) and latency.
func links(n int, bw float64, lat time.Duration) [][]policy.Link {
	l := make([][]policy.Link, n)
	for i := range l {
		l[i] = make([]policy.Link, n)
		for k := range l[i] {
			if i != k {
				l[i][k] = policy.Link{SecPerByte: 1 / bw, Latency: lat}
			}
		}
	}
	return l
}

func coallocMetricsOf(res *replay.Result, jobs int, sites []string) map[string]float64 {
	s := res.Summary
	multi := 0
	for _, r := range res.Records {
		if len(r.Parts) > 1 {
			multi++
		}
	}
	m := map[string]float64{
		"awrt": s.AWRT, "awwt": s.AWWT, "au": s.AU, "mean_wait": s.MeanWait, "mean_response": s.MeanResponse,
		"mean_bsld": s.MeanBSLD, "max_bsld": s.MaxBSLD, "makespan": s.Makespan,
		"jobs": float64(jobs), "ran": float64(s.Ran), "rejected": float64(s.Rejected), "failed": float64(res.Failed),
		"unfinished": float64(res.Unfinished), "cycles": float64(res.Cycles),
	}
	if s.Ran > 0 {
		m["multisite"] = float64(multi) / float64(s.Ran)
	} else {
		m["multisite"] = 0
	}
	for i, name := range sites {
		if i < len(s.SiteUtil) {
			m["util_"+name] = s.SiteUtil[i]
		}
	}
	return m
}

// prepareReference reads the pyss reference schedule once; each run
// replays CTC-SP2 under one EASY mode and compares start times.
func prepareReference(e *Experiment) (execFunc, error) {
	r := e.Reference
	tracePath, err := TracePath(r.Trace)
	if err != nil {
		return nil, err
	}
	schedPath, err := TracePath(r.Schedule)
	if err != nil {
		return nil, err
	}
	ref, err := readStarts(schedPath)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, p Params, progress func(int, int)) (map[string]float64, error) {
		f, err := openFile(tracePath)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		res, err := simbackend.ReplayEASY(ctx, f, r.Procs, simbackend.ReplayOptions{
			EASY:   simbackend.EASYOptions{ReferenceCompatible: p.Mode == ModeReference},
			Filter: swf.StrongFilter{MaxProcs: int64(r.Procs)}.Apply,
		})
		if err != nil {
			return nil, err
		}
		match := 0
		for _, j := range res.Jobs {
			if s, ok := ref[j.ID]; ok && s == j.Start {
				match++
			}
		}
		s := res.Summary
		n := float64(len(res.Jobs))
		return map[string]float64{
			"jobs": n, "start_match": float64(match) / n, "start_match_count": float64(match),
			"mean_bsld": s.MeanBSLD, "ref_mean_bsld": r.MeanBSLD, "bsld_dev_pct": 100 * (s.MeanBSLD - r.MeanBSLD) / r.MeanBSLD,
			"mean_wait": s.MeanWait, "mean_response": s.MeanResponse, "awrt": s.AWRT, "awwt": s.AWWT, "au": s.AU, "makespan": s.Makespan,
		}, nil
	}, nil
}

// readStarts reads a schedule in SWF: job id -> start (submit + wait).
func readStarts(path string) (map[int64]int64, error) {
	rd, err := swf.Open(path)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	m := map[int64]int64{}
	for {
		j, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		m[j.ID] = j.Submit + j.Wait
	}
}
