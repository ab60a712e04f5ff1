package experiment

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gridsub/gridsub/simbackend/trustsim"
)

// KindTrustMinMin runs paper 002's experiment (SPEC §3): Trust-Min-min
// against Min-min on clusters in local areas, some failing in every run,
// over a sequence of runs in which trust is learned (simbackend/trustsim). A
// run of the file is one point (tasks, migration, policy, run number r) over
// Seeds seeds: the metrics of the r-th run of each seed's sequence, and the
// running means over runs 1..r. The sequences are computed once per seed and
// shared by the points of their run numbers.
const KindTrustMinMin = "trust-minmin"

// TrustSpec configures the kind trust-minmin (the `trust:` section).
type TrustSpec struct {
	// Clusters (20) in Areas local areas (4); cluster c is in area
	// c·areas/clusters.
	Clusters int `yaml:"clusters" json:"clusters"`
	Areas    int `yaml:"areas" json:"areas"`
	// PowerMHz: [min, max] CPU speed, uniform (500–800).
	PowerMHz []float64 `yaml:"power_mhz" json:"power_mhz"`
	// IntraMbps inside an area (100) and InterMbps between areas (1).
	IntraMbps float64 `yaml:"intra_mbps" json:"intra_mbps"`
	InterMbps float64 `yaml:"inter_mbps" json:"inter_mbps"`
	// Tasks: tasks per run, an axis ([100, 150, 200]).
	Tasks []int `yaml:"tasks" json:"tasks"`
	// WorkSeconds: [min, max] run time on the slowest CPU (10–100 s);
	// DataMB: [min, max] input size (0.1–2.1 MB). A task needs high compute
	// when its work is above the middle of the range, high bandwidth when
	// its data is: the four QoS classes.
	WorkSeconds []float64 `yaml:"work_seconds" json:"work_seconds"`
	DataMB      []float64 `yaml:"data_mb" json:"data_mb"`
	// FailShare of the clusters fail in every run (0.2).
	FailShare float64 `yaml:"fail_share" json:"fail_share"`
	// Runs in sequence (100).
	Runs int `yaml:"runs" json:"runs"`
	// Flaky clusters (5) are FlakyWeight times (30) likelier to be among a
	// run's failures; flaky_weight 1 makes failures uniform.
	Flaky       *int    `yaml:"flaky" json:"flaky"`
	FlakyWeight float64 `yaml:"flaky_weight" json:"flaky_weight"`
	// Migration: an axis of "one-by-one" (the paper's experiment) and "bundle".
	Migration []string `yaml:"migration" json:"migration"`
	// Seeds per point (10): Seed, Seed+1, ...
	Seeds int    `yaml:"seeds" json:"seeds"`
	Seed  uint64 `yaml:"seed" json:"seed"`
}

func init() {
	numericAxes["tasks"] = true
	numericAxes["run"] = true
	paramLabels["tasks"] = "number of tasks"
	paramLabels["run"] = "simulation run"
	paramLabels["migration"] = "migration"
	metricLabels["makespan"] = "makespan (s)"
	metricLabels["makespan_mean"] = "mean makespan over runs 1..r (s)"
	metricLabels["migration_rate"] = "task migration rate"
	metricLabels["migration_rate_mean"] = "mean migration rate over runs 1..r"
	metricLabels["makespan_growth"] = "makespan growth over the plan"
	metricLabels["migration_rate_last10"] = "mean migration rate over runs r-9..r"
}

func (e *Experiment) trustDefaults() {
	t := &e.Trust
	if t.Clusters == 0 {
		t.Clusters = 20
	}
	if t.Areas == 0 {
		t.Areas = 4
	}
	if t.PowerMHz == nil {
		t.PowerMHz = []float64{500, 800}
	}
	if t.IntraMbps == 0 {
		t.IntraMbps = 100
	}
	if t.InterMbps == 0 {
		t.InterMbps = 1
	}
	if t.Tasks == nil {
		t.Tasks = []int{100, 150, 200}
	}
	if t.WorkSeconds == nil {
		t.WorkSeconds = []float64{10, 100}
	}
	if t.DataMB == nil {
		t.DataMB = []float64{0.1, 2.1}
	}
	if t.FailShare == 0 {
		t.FailShare = 0.2
	}
	if t.Runs == 0 {
		t.Runs = 100
	}
	if t.Flaky == nil {
		f := 5
		t.Flaky = &f
	}
	if t.FlakyWeight == 0 {
		t.FlakyWeight = 30
	}
	if t.Migration == nil {
		t.Migration = []string{trustsim.OneByOne}
	}
	if t.Seeds == 0 {
		t.Seeds = 10
	}
	if t.Seed == 0 {
		t.Seed = 1
	}
	if e.Kind == KindTrustMinMin && e.Policies == nil {
		e.Policies = trustsim.Policies()
	}
}

func (t TrustSpec) config(tasks int, migration, policy string, seed uint64) trustsim.Config {
	c := trustsim.Default()
	c.Clusters, c.Areas = t.Clusters, t.Areas
	if len(t.PowerMHz) == 2 {
		c.Power = [2]float64{t.PowerMHz[0], t.PowerMHz[1]}
	}
	c.IntraBps, c.InterBps = t.IntraMbps*1e6/8, t.InterMbps*1e6/8
	c.Tasks = tasks
	if len(t.WorkSeconds) == 2 {
		c.Work = [2]float64{t.WorkSeconds[0], t.WorkSeconds[1]}
	}
	if len(t.DataMB) == 2 {
		c.Data = [2]float64{t.DataMB[0] * 1e6, t.DataMB[1] * 1e6}
	}
	c.FailShare, c.Runs, c.Flaky, c.FlakyWeight = t.FailShare, t.Runs, *t.Flaky, t.FlakyWeight
	c.Migration, c.Policy, c.Seed = migration, policy, seed
	return c
}

func (p *parser) validateTrust(e *Experiment) {
	for _, k := range []string{"workload", "testbed", "sweep", "reference"} {
		if _, ok := p.lines[k]; ok {
			p.at(k, ErrValue, "not used by kind %q (configure it under trust)", e.Kind)
		}
	}
	t := e.Trust
	if len(t.Tasks) == 0 {
		p.at("trust.tasks", ErrValue, "empty: list the numbers of tasks per run, e.g. [100, 150, 200]")
	}
	for i, n := range t.Tasks {
		if slices.Index(t.Tasks, n) != i {
			p.at(fmt.Sprintf("trust.tasks[%d]", i), ErrValue, "%d listed twice", n)
		}
	}
	if len(t.Migration) == 0 {
		p.at("trust.migration", ErrValue, "empty: list %s", strings.Join(trustsim.Migrations(), " and/or "))
	}
	for i, m := range t.Migration {
		if !slices.Contains(trustsim.Migrations(), m) {
			p.at(fmt.Sprintf("trust.migration[%d]", i), ErrValue, "%q: valid are %s", m, strings.Join(trustsim.Migrations(), ", "))
		} else if slices.Index(t.Migration, m) != i {
			p.at(fmt.Sprintf("trust.migration[%d]", i), ErrValue, "%q listed twice", m)
		}
	}
	for name, r := range map[string][]float64{"trust.power_mhz": t.PowerMHz, "trust.work_seconds": t.WorkSeconds, "trust.data_mb": t.DataMB} {
		if len(r) != 2 {
			p.at(name, ErrValue, "%v: want [min, max]", r)
		}
	}
	if t.Seeds < 1 || t.Seeds > 1000 {
		p.at("trust.seeds", ErrValue, "%d: want from 1 to 1000 seeds per point", t.Seeds)
	}
	if len(e.Policies) == 0 {
		p.at("policies", ErrValue, "empty: list %s", strings.Join(trustsim.Policies(), ", "))
	}
	for i, pol := range e.Policies {
		if !slices.Contains(trustsim.Policies(), pol) {
			p.at(fmt.Sprintf("policies[%d]", i), ErrValue, "%q: kind trust-minmin runs %s", pol, strings.Join(trustsim.Policies(), ", "))
		} else if slices.Index(e.Policies, pol) != i {
			p.at(fmt.Sprintf("policies[%d]", i), ErrValue, "%q listed twice", pol)
		}
	}
	if len(p.errs) > 0 {
		return
	}
	// The rest of the ranges are trustsim's: ask it, with the field named.
	for _, n := range t.Tasks {
		if err := t.config(n, t.Migration[0], e.Policies[0], t.Seed).Validate(); err != nil {
			// trustsim names the field; point at the key that set it.
			msg := strings.TrimPrefix(err.Error(), trustsim.ErrConfig.Error()+": ")
			field, _, _ := strings.Cut(msg, " ")
			key := map[string]string{"power": "power_mhz", "work": "work_seconds", "data": "data_mb", "bandwidth": "intra_mbps"}[field]
			if key == "" {
				key = field
			}
			p.at("trust."+key, ErrValue, "%s", msg)
			return
		}
	}
	if n := len(t.Tasks) * len(t.Migration) * len(e.Policies) * t.Runs; n > MaxRuns {
		p.at("trust", ErrValue, "%d runs (tasks × migrations × policies × runs): at most %d in one experiment; split it", n, MaxRuns)
	}
}

var trustParams = []string{"tasks", "migration", "policy", "run"}

func (e *Experiment) expandTrust() []Run {
	var runs []Run
	t := e.Trust
	for _, n := range t.Tasks {
		for _, m := range t.Migration {
			for _, pol := range e.Policies {
				for r := 1; r <= t.Runs; r++ {
					runs = append(runs, Run{Index: len(runs), Params: Params{Tasks: n, Migration: m, Policy: pol, Round: r}})
				}
			}
		}
	}
	return runs
}

var trustMetrics = []string{"makespan", "makespan_mean", "makespan_growth", "migration_rate", "migration_rate_mean",
	"migration_rate_last10", "makespan_sd", "migration_rate_sd", "seeds"}

func (e *Experiment) trustMetricNames() []string {
	out := slices.Clone(trustMetrics)
	for _, m := range []string{"makespan", "migration_rate", "migration_rate_mean", "makespan_mean", "migration_rate_last10"} {
		for k := range e.Trust.Seeds {
			out = append(out, m+"_s"+strconv.Itoa(k))
		}
	}
	return out
}

type trustKey struct {
	tasks             int
	migration, policy string
	seed              uint64
}

// prepareTrust returns the function that performs one point: it reads the
// r-th run of every seed's sequence (each sequence computed once, by the
// first run that needs it).
func prepareTrust(e *Experiment) (execFunc, error) {
	t := e.Trust
	var seqs memo[trustKey, []trustsim.RunResult]
	return func(ctx context.Context, p Params, progress func(int, int)) (map[string]float64, error) {
		out := map[string]float64{"seeds": float64(t.Seeds)}
		var span, rate, rateMean, spanMean, growth, last10 []float64
		seq := func(key trustKey) ([]trustsim.RunResult, error) {
			return trustsim.Sequence(ctx, t.config(key.tasks, key.migration, key.policy, key.seed))
		}
		keys := make([]trustKey, t.Seeds)
		for k := range keys {
			keys[k] = trustKey{p.Tasks, p.Migration, p.Policy, t.Seed + uint64(k)}
		}
		seqs.warm(keys, seq) // the points of one policy share its seeds' sequences: split them between the workers
		for k := range t.Seeds {
			key := keys[k]
			rs, err := seqs.get(key, func() ([]trustsim.RunResult, error) { return seq(key) })
			if err != nil {
				return nil, fmt.Errorf("seed %d: %w", key.seed, err)
			}
			r := rs[p.Round-1]
			mr := float64(r.Migrations) / float64(p.Tasks)
			sm, rm := 0.0, 0.0
			for _, x := range rs[:p.Round] {
				sm += x.Makespan
				rm += float64(x.Migrations) / float64(p.Tasks)
			}
			sm, rm = sm/float64(p.Round), rm/float64(p.Round)
			l10 := 0.0 // runs r-9..r: "runs 1-10" at r = 10, "runs 91-100" at r = 100
			for _, x := range rs[max(p.Round-10, 0):p.Round] {
				l10 += float64(x.Migrations) / float64(p.Tasks)
			}
			l10 /= float64(min(p.Round, 10))
			last10 = append(last10, l10)
			out["makespan_mean_s"+strconv.Itoa(k)] = sm
			out["migration_rate_last10_s"+strconv.Itoa(k)] = l10
			span, rate, spanMean, rateMean = append(span, r.Makespan), append(rate, mr), append(spanMean, sm), append(rateMean, rm)
			growth = append(growth, r.Makespan/r.Planned-1)
			out["makespan_s"+strconv.Itoa(k)] = r.Makespan
			out["migration_rate_s"+strconv.Itoa(k)] = mr
			out["migration_rate_mean_s"+strconv.Itoa(k)] = rm
			progress(k+1, t.Seeds)
		}
		out["makespan"], out["makespan_sd"] = meanAndSD(span)
		out["migration_rate"], out["migration_rate_sd"] = meanAndSD(rate)
		out["makespan_mean"], _ = meanAndSD(spanMean)
		out["migration_rate_mean"], _ = meanAndSD(rateMean)
		out["migration_rate_last10"], _ = meanAndSD(last10)
		out["makespan_growth"], _ = meanAndSD(growth)
		return out, nil
	}, nil
}
