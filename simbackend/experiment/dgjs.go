package experiment

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/simbackend/dgjs"
	"github.com/gridsub/gridsub/simbackend/faults"
)

// KindDGJS runs paper 004's experiment (SPEC §5): meta-tasks on resources
// that fail and are repaired, scheduled by DGJS, Min-min or Refine
// (simbackend/dgjs). A run is one point (failure level, resources, arrival
// rate, policy, number of jobs) over Seeds seeds; its metrics are the means
// over the seeds, their standard deviations and every seed's value.
const KindDGJS = "dgjs"

// DGJSSpec configures the kind dgjs (the `dgjs:` section). Every list is a
// sweep axis; the runs are failure × resources × arrival × policy × jobs.
type DGJSSpec struct {
	// Jobs: numbers of jobs (the figures' x axis).
	Jobs []int `yaml:"jobs" json:"jobs,omitempty"`
	// Failure: failure levels, "low" and "high" (faults.Paper004) or a key
	// of Failures.
	Failure  []string               `yaml:"failure" json:"failure,omitempty"`
	Failures map[string]FailureSpec `yaml:"failures" json:"failures,omitempty"`
	// Resources: numbers of resources (default [20]); resource i of n runs
	// a job in base·h with h evenly spread over HRange.
	Resources []int     `yaml:"resources" json:"resources,omitempty"`
	HRange    []float64 `yaml:"h_range" json:"h_range,omitempty"`
	// ArrivalPerMin: Poisson arrival rates per minute (default [0.4]).
	ArrivalPerMin []float64 `yaml:"arrival_per_min" json:"arrival_per_min,omitempty"`
	// Run: [min, max] of the uniform base run time (default [5m, 20m]).
	Run []string `yaml:"run" json:"run,omitempty"`
	// Tight and Loose: deadline slack ranges in multiples of CT_min
	// (defaults [1.5, 2.5] and [2.5, 6]).
	Tight []float64 `yaml:"tight" json:"tight,omitempty"`
	Loose []float64 `yaml:"loose" json:"loose,omitempty"`
	// Lambda is the tiers' λ (default 1.5).
	Lambda float64 `yaml:"lambda" json:"lambda,omitempty"`
	// MaxAttempts bounds a job's placement rounds (default 5).
	MaxAttempts int `yaml:"max_attempts" json:"max_attempts,omitempty"`
	// Tiering is the tier rule DGJS's jobs get at arrival: "" (the
	// built-in dgjs), a built-in tiering policy's name, or a plugin
	// reference (plugin:/path/to/exe ARGS, plugin:builtin:NAME), started
	// for each point and stopped at its end: how a centre replays its own
	// tier rule. The other policies do not tier.
	Tiering string `yaml:"tiering" json:"tiering,omitempty"`
	// History is the failure log the predictor learns first (default 48h);
	// Threshold its merge distance (default 5m).
	History   string `yaml:"history" json:"history,omitempty"`
	Threshold string `yaml:"threshold" json:"threshold,omitempty"`
	// Seeds per point (default 10): seeds Seed, Seed+1, ... .
	Seeds int    `yaml:"seeds" json:"seeds,omitempty"`
	Seed  uint64 `yaml:"seed" json:"seed,omitempty"`
}

// FailureSpec is a custom failure level: faults.Model's fields, with the
// Weibull scale given directly (scale) or by the grid-wide failure rate
// (rate_per_min).
type FailureSpec struct {
	Shape      float64 `yaml:"shape" json:"shape"`
	Scale      string  `yaml:"scale" json:"scale,omitempty"`
	RatePerMin float64 `yaml:"rate_per_min" json:"rate_per_min,omitempty"`
	Beta       float64 `yaml:"beta" json:"beta"`
	Theta      string  `yaml:"theta" json:"theta"`
	Omega      float64 `yaml:"omega" json:"omega"`
	MaxRepair  string  `yaml:"max_repair" json:"max_repair,omitempty"`
}

func init() {
	numericAxes["jobs"] = true
	paramLabels["jobs"] = "number of jobs"
	paramLabels["failure"] = "failure rate"
	paramLabels["resources"] = "resources"
	paramLabels["arrival"] = "arrivals per minute"
	metricLabels["success_ratio"] = "success ratio"
	metricLabels["mean_completion"] = "mean completion time (min)"
	metricLabels["wasted_share"] = "share of busy time wasted"
}

func (e *Experiment) dgjsDefaults() {
	if e.Kind != KindDGJS {
		return
	}
	d := &e.DGJS
	if d.Resources == nil {
		d.Resources = []int{20}
	}
	if d.HRange == nil {
		d.HRange = []float64{0.5, 1.5}
	}
	if d.ArrivalPerMin == nil {
		d.ArrivalPerMin = []float64{0.4}
	}
	if d.Run == nil {
		d.Run = []string{"5m", "20m"}
	}
	if d.Tight == nil {
		d.Tight = []float64{1.5, 2.5}
	}
	if d.Loose == nil {
		d.Loose = []float64{2.5, 6}
	}
	if d.Lambda == 0 {
		d.Lambda = 1.5
	}
	if d.MaxAttempts == 0 {
		d.MaxAttempts = 5
	}
	if d.History == "" {
		d.History = "48h"
	}
	if d.Threshold == "" {
		d.Threshold = "5m"
	}
	if d.Seeds == 0 {
		d.Seeds = 10
	}
	if d.Seed == 0 {
		d.Seed = 1
	}
	if e.Policies == nil {
		e.Policies = dgjs.Policies()
	}
	// (policies may also name the conditional variants, dgjs.PolicyNames)
}

// failureModel resolves a failure level name.
func (e *Experiment) failureModel(name string) (faults.Model, error) {
	f, ok := e.DGJS.Failures[name]
	if !ok {
		return faults.Paper004(name)
	}
	m := faults.Model{Shape: f.Shape, Beta: f.Beta, Omega: f.Omega}
	var err error
	if f.Scale != "" {
		if m.Scale, err = time.ParseDuration(f.Scale); err != nil {
			return m, fmt.Errorf("failures.%s.scale: %w", name, err)
		}
	} else if f.RatePerMin > 0 && f.Shape > 0 {
		m.Scale = faults.RateScale(f.Shape, f.RatePerMin)
	}
	if m.Theta, err = time.ParseDuration(f.Theta); err != nil {
		return m, fmt.Errorf("failures.%s.theta: %w", name, err)
	}
	if f.MaxRepair != "" {
		if m.MaxRepair, err = time.ParseDuration(f.MaxRepair); err != nil {
			return m, fmt.Errorf("failures.%s.max_repair: %w", name, err)
		}
	}
	return m, m.Validate()
}

func (p *parser) validateDGJS(e *Experiment) {
	for _, k := range []string{"workload", "testbed", "sweep", "reference"} {
		if _, ok := p.lines[k]; ok {
			p.at(k, ErrValue, "not used by kind %q (configure it under dgjs)", e.Kind)
		}
	}
	d := e.DGJS
	if len(d.Jobs) == 0 {
		p.at("dgjs.jobs", ErrValue, "missing: list the numbers of jobs to run (the x axis), e.g. [100, 200, 500]")
	}
	if len(d.Failure) == 0 {
		p.at("dgjs.failure", ErrValue, "missing: list failure levels: low, high or a key of dgjs.failures")
	}
	for name, list := range map[string]int{"dgjs.jobs": len(d.Jobs), "dgjs.failure": len(d.Failure), "dgjs.resources": len(d.Resources), "dgjs.arrival_per_min": len(d.ArrivalPerMin), "policies": len(e.Policies)} {
		if list > maxList {
			p.at(name, ErrValue, "%d values: at most %d", list, maxList)
		}
	}
	for i, n := range d.Jobs {
		if n < 1 || n > 100_000 {
			p.at(fmt.Sprintf("dgjs.jobs[%d]", i), ErrValue, "%d: want from 1 to 100000 jobs", n)
		} else if slices.Index(d.Jobs, n) != i {
			p.at(fmt.Sprintf("dgjs.jobs[%d]", i), ErrValue, "%d listed twice", n)
		}
	}
	for i, f := range d.Failure {
		if _, err := e.failureModel(f); err != nil {
			p.at(fmt.Sprintf("dgjs.failure[%d]", i), ErrValue, "%q: %v (low and high are paper 004's; others go under dgjs.failures)", f, err)
		} else if slices.Index(d.Failure, f) != i {
			p.at(fmt.Sprintf("dgjs.failure[%d]", i), ErrValue, "%q listed twice", f)
		}
	}
	for i, n := range d.Resources {
		if n < 2 || n > 10_000 {
			p.at(fmt.Sprintf("dgjs.resources[%d]", i), ErrValue, "%d: want from 2 to 10000 resources", n)
		}
	}
	if len(d.HRange) != 2 || !(d.HRange[0] >= minH && d.HRange[1] >= d.HRange[0] && d.HRange[1] <= maxH) {
		p.at("dgjs.h_range", ErrValue, "%v: want [min, max] with %v <= min <= max <= %v", d.HRange, minH, maxH)
	}
	for i, a := range d.ArrivalPerMin {
		if !(a > 0 && a <= 1e4) {
			p.at(fmt.Sprintf("dgjs.arrival_per_min[%d]", i), ErrValue, "%v: want a rate in (0, 10000] per minute", a)
		}
	}
	if _, _, err := d.runRange(); err != nil {
		p.at("dgjs.run", ErrValue, "%v", err)
	}
	for name, r := range map[string][]float64{"dgjs.tight": d.Tight, "dgjs.loose": d.Loose} {
		if len(r) != 2 || !(r[0] > 0 && r[1] >= r[0] && r[1] <= 1e6) {
			p.at(name, ErrValue, "%v: want [min, max] multiples of CT_min with 0 < min <= max", r)
		}
	}
	if !(d.Lambda > 0 && d.Lambda <= 1e3) {
		p.at("dgjs.lambda", ErrValue, "%v: want λ in (0, 1000]", d.Lambda)
	}
	if d.MaxAttempts < 1 || d.MaxAttempts > 1000 {
		p.at("dgjs.max_attempts", ErrValue, "%d: want from 1 to 1000", d.MaxAttempts)
	}
	for name, v := range map[string]string{"dgjs.history": d.History, "dgjs.threshold": d.Threshold} {
		if t, err := time.ParseDuration(v); err != nil || t < 0 || t > 365*24*time.Hour {
			p.at(name, ErrValue, "%q: want a duration such as 48h or 5m, at most a year", v)
		}
	}
	if d.Seeds < 1 || d.Seeds > 1000 {
		p.at("dgjs.seeds", ErrValue, "%d: want from 1 to 1000 seeds per point", d.Seeds)
	}
	if err := checkPolicyRef(plugins.KindTiering, d.Tiering); err != nil {
		p.at("dgjs.tiering", ErrValue, "%v", err)
	}
	for i, pol := range e.Policies {
		if !slices.Contains(dgjs.PolicyNames(), pol) {
			p.at(fmt.Sprintf("policies[%d]", i), ErrValue, "%q: kind dgjs runs %s", pol, strings.Join(dgjs.PolicyNames(), ", "))
		} else if slices.Index(e.Policies, pol) != i {
			p.at(fmt.Sprintf("policies[%d]", i), ErrValue, "%q listed twice", pol)
		}
	}
	if len(p.errs) == 0 {
		if n := len(d.Jobs) * len(d.Failure) * len(d.Resources) * len(d.ArrivalPerMin) * len(e.Policies); n > MaxRuns {
			p.at("dgjs", ErrValue, "%d runs: at most %d in one experiment; split it", n, MaxRuns)
		}
	}
}

func (d DGJSSpec) runRange() (lo, hi time.Duration, err error) {
	if len(d.Run) != 2 {
		return 0, 0, fmt.Errorf("%v: want [min, max] durations such as [5m, 20m]", d.Run)
	}
	if lo, err = time.ParseDuration(d.Run[0]); err == nil {
		hi, err = time.ParseDuration(d.Run[1])
	}
	if err != nil || lo <= 0 || hi < lo || hi > 365*24*time.Hour {
		return 0, 0, fmt.Errorf("%v: want [min, max] durations with 0 < min <= max <= a year", d.Run)
	}
	return lo, hi, nil
}

var dgjsParams = []string{"failure", "resources", "arrival", "policy", "jobs"}

func (e *Experiment) expandDGJS() []Run {
	var runs []Run
	d := e.DGJS
	for _, f := range d.Failure {
		for _, r := range d.Resources {
			for _, a := range d.ArrivalPerMin {
				for _, pol := range e.Policies {
					for _, n := range d.Jobs {
						runs = append(runs, Run{Index: len(runs), Params: Params{Failure: f, Resources: r, Arrival: a, Policy: pol, Jobs: n}})
					}
				}
			}
		}
	}
	return runs
}

// dgjsMetrics are the metrics of a dgjs run before the per-seed values.
var dgjsMetrics = []string{
	"success_ratio", "mean_completion", "success_sd", "completion_sd",
	"success_tight", "success_loose", "success_none", "tier_high", "tier_low", "tier_none",
	"outages", "copies_started", "copies_lost", "copies_cancelled", "wasted_share", "seeds",
}

func (e *Experiment) dgjsMetricNames() []string {
	out := slices.Clone(dgjsMetrics)
	for k := range e.DGJS.Seeds {
		out = append(out, "success_ratio_s"+strconv.Itoa(k))
	}
	for k := range e.DGJS.Seeds {
		out = append(out, "mean_completion_s"+strconv.Itoa(k))
	}
	return out
}

// prepareDGJS returns the function that performs one dgjs run: Seeds
// simulations, one per seed, their metrics averaged.
func prepareDGJS(e *Experiment) (execFunc, error) {
	d := e.DGJS
	lo, hi, err := d.runRange()
	if err != nil {
		return nil, err
	}
	hist, _ := time.ParseDuration(d.History)
	thr, _ := time.ParseDuration(d.Threshold)
	return func(ctx context.Context, p Params, progress func(int, int)) (map[string]float64, error) {
		m, err := e.failureModel(p.Failure)
		if err != nil {
			return nil, err
		}
		speeds := make([]float64, p.Resources)
		for i := range speeds {
			speeds[i] = d.HRange[0] + (d.HRange[1]-d.HRange[0])*float64(i)/float64(p.Resources-1)
		}
		pol, cond, err := dgjs.ParsePolicy(p.Policy)
		if err != nil {
			return nil, err
		}
		var tiering policy.Tiering
		if d.Tiering != "" {
			impl, stop, err := openPolicy(ctx, plugins.KindTiering, d.Tiering)
			if err != nil {
				return nil, err
			}
			defer stop()
			tiering = impl.(policy.Tiering)
		}
		out := map[string]float64{"seeds": float64(d.Seeds)}
		var sr, mc []float64
		var sum [16]float64
		for k := range d.Seeds {
			res, err := dgjs.Run(ctx, dgjs.Config{
				Policy: pol, Conditional: cond, Failure: m, Jobs: p.Jobs, Seed: d.Seed + uint64(k), Speeds: speeds,
				ArrivalPerMin: p.Arrival, RunMin: lo, RunMax: hi, Lambda: d.Lambda,
				Tight: [2]float64{d.Tight[0], d.Tight[1]}, Loose: [2]float64{d.Loose[0], d.Loose[1]},
				MaxAttempts: d.MaxAttempts, History: hist, Threshold: thr, Tiering: tiering,
			})
			if err != nil {
				return nil, fmt.Errorf("seed %d: %w", d.Seed+uint64(k), err)
			}
			sr = append(sr, res.SuccessRatio)
			mc = append(mc, res.MeanCompletion.Minutes())
			out["success_ratio_s"+strconv.Itoa(k)] = res.SuccessRatio
			out["mean_completion_s"+strconv.Itoa(k)] = res.MeanCompletion.Minutes()
			vals := []float64{
				share(res.ClassSucceeded[0], res.ClassJobs[0]), share(res.ClassSucceeded[1], res.ClassJobs[1]), share(res.ClassSucceeded[2], res.ClassJobs[2]),
				float64(res.Tiers[0]), float64(res.Tiers[1]), float64(res.Tiers[2]),
				float64(res.Outages), float64(res.CopiesStarted), float64(res.CopiesLost), float64(res.CopiesCancelled),
				share64(res.Wasted.Seconds(), res.Wasted.Seconds()+res.Useful.Seconds()),
			}
			for i, v := range vals {
				sum[i] += v
			}
			progress(k+1, d.Seeds)
		}
		n := float64(d.Seeds)
		out["success_ratio"], out["success_sd"] = meanAndSD(sr)
		out["mean_completion"], out["completion_sd"] = meanAndSD(mc)
		for i, name := range []string{"success_tight", "success_loose", "success_none", "tier_high", "tier_low", "tier_none",
			"outages", "copies_started", "copies_lost", "copies_cancelled", "wasted_share"} {
			out[name] = sum[i] / n
		}
		return out, nil
	}, nil
}

func share(a, b int) float64 { return share64(float64(a), float64(b)) }

func share64(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
