package experiment

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	"github.com/gridsub/gridsub/simbackend/drrmsim"
	"github.com/gridsub/gridsub/simbackend/swf"
)

// KindDRRM runs paper 001's experiments (SPEC §2): advance reservations
// admitted and bound by DRRM or SRRM_r / SRRM_m (simbackend/drrmsim) on the
// synthetic set or the OSC trace, optionally with one resource failing at
// time ratio σ. A run is one point (resources, gap, flexibility, σ,
// mechanism) over Seeds seeds; its metrics are the means over the seeds,
// their standard deviations and every seed's value.
const KindDRRM = "drrm"

// Sets of paper 001.
const (
	SetSynthetic = "synthetic"
	SetOSC       = "osc"
)

// DRRMSpec configures the kind drrm (the `drrm:` section). Every list is a
// sweep axis; the runs are resources × gap × flexibility × σ × policy.
type DRRMSpec struct {
	// Set is "synthetic" (§3.1–3.2, 3.4) or "osc" (§3.3).
	Set string `yaml:"set" json:"set"`
	// Resources: resNumber (synthetic only; default [25]).
	Resources []int `yaml:"resources" json:"resources,omitempty"`
	// Requests: reqNumber, the first requests kept (synthetic default 200;
	// osc 0 = every reservation drawn from the trace).
	Requests int `yaml:"requests" json:"requests"`
	// Gap: λ, the mean gap between requests in seconds (default [2]; osc [240]).
	Gap []float64 `yaml:"gap" json:"gap,omitempty"`
	// Flexibility: (lt − et − dur)/(lt − et), each in [0, 1) (default [0.1]; osc [0]).
	Flexibility []float64 `yaml:"flexibility" json:"flexibility,omitempty"`
	// Sigma: failure time ratios σ in (0, 1]; one resource, drawn per seed,
	// fails at σ times the latest window end. Empty: no failure.
	Sigma []float64 `yaml:"sigma" json:"sigma,omitempty"`
	// Common keeps only the requests every policy of the file admits at
	// SelectFlexibility (the paper's figures 7–8 and 11–12).
	Common            bool     `yaml:"common" json:"common,omitempty"`
	SelectFlexibility *float64 `yaml:"select_flexibility" json:"select_flexibility,omitempty"`
	// Synthetic set: [min, max] seconds of book-ahead (1–20), window (5–50)
	// and non-reserved jobs (5–50); capability and demand levels (5).
	BookAhead  []int `yaml:"book_ahead" json:"book_ahead,omitempty"`
	Window     []int `yaml:"window" json:"window,omitempty"`
	Background []int `yaml:"background" json:"background,omitempty"`
	Levels     int   `yaml:"levels" json:"levels,omitempty"`
	// OSC set: the trace (default OSC-Clust-2000-3.1-cln.swf.gz), its quad
	// and dual nodes (32 and 25, the trace's header) and the share of jobs
	// that become reservations (0.1).
	Trace string  `yaml:"trace" json:"trace,omitempty"`
	Quad  *int    `yaml:"quad" json:"quad,omitempty"`
	Dual  *int    `yaml:"dual" json:"dual,omitempty"`
	Share float64 `yaml:"share" json:"share,omitempty"`
	// Seeds per point (default 10): Seed, Seed+1, ...
	Seeds int    `yaml:"seeds" json:"seeds"`
	Seed  uint64 `yaml:"seed" json:"seed"`
}

func init() {
	for _, a := range []string{"res_number", "gap", "flexibility", "sigma"} {
		numericAxes[a] = true
	}
	paramLabels["res_number"] = "number of resources (resNumber)"
	paramLabels["gap"] = "mean request interval λ (s)"
	paramLabels["flexibility"] = "reservation flexibility"
	paramLabels["sigma"] = "failure time ratio σ"
	metricLabels["ap"] = "admission percentage AP"
	metricLabels["pp"] = "preemption percentage PP"
	metricLabels["tpc"] = "total preemption cost TPC (s)"
	metricLabels["eta"] = "reservation failure rate η"
}

func (e *Experiment) drrmDefaults() {
	d := &e.DRRM
	osc := d.Set == SetOSC
	if d.Resources == nil && !osc {
		d.Resources = []int{25}
	}
	if d.Requests == 0 && !osc {
		d.Requests = 200
	}
	if d.Gap == nil {
		d.Gap = []float64{2}
		if osc {
			d.Gap = []float64{240}
		}
	}
	if d.Flexibility == nil {
		d.Flexibility = []float64{0.1}
		if osc {
			d.Flexibility = []float64{0}
		}
	}
	if d.SelectFlexibility == nil && len(d.Flexibility) > 0 {
		f := slices.Min(d.Flexibility)
		d.SelectFlexibility = &f
	}
	if !osc {
		if d.BookAhead == nil {
			d.BookAhead = []int{1, 20}
		}
		if d.Window == nil {
			d.Window = []int{5, 50}
		}
		if d.Background == nil {
			d.Background = []int{5, 50}
		}
		if d.Levels == 0 {
			d.Levels = 5
		}
	} else {
		if d.Trace == "" {
			d.Trace = "OSC-Clust-2000-3.1-cln.swf.gz"
		}
		if d.Quad == nil {
			q := 32
			d.Quad = &q
		}
		if d.Dual == nil {
			q := 25
			d.Dual = &q
		}
		if d.Share == 0 {
			d.Share = 0.1
		}
	}
	if d.Seeds == 0 {
		d.Seeds = 10
	}
	if d.Seed == 0 {
		d.Seed = 1
	}
	if e.Kind == KindDRRM && e.Policies == nil {
		e.Policies = drrmsim.Mechanisms()
	}
}

func pair(v []int) [2]int { return [2]int{v[0], v[1]} }

func (p *parser) validateDRRM(e *Experiment) {
	for _, k := range []string{"workload", "testbed", "sweep", "reference"} {
		if _, ok := p.lines[k]; ok {
			p.at(k, ErrValue, "not used by kind %q (configure it under drrm)", e.Kind)
		}
	}
	d := e.DRRM
	switch d.Set {
	case SetSynthetic:
		if len(d.Resources) == 0 {
			p.at("drrm.resources", ErrValue, "empty: list the numbers of resources (resNumber)")
		}
		for i, n := range d.Resources {
			if n < 1 || n > 10000 {
				p.at(fmt.Sprintf("drrm.resources[%d]", i), ErrValue, "%d: want from 1 to 10000 resources", n)
			} else if slices.Index(d.Resources, n) != i {
				p.at(fmt.Sprintf("drrm.resources[%d]", i), ErrValue, "%d listed twice", n)
			}
		}
		if d.Requests < 1 || d.Requests > 1_000_000 {
			p.at("drrm.requests", ErrValue, "%d: want from 1 to 1000000 requests", d.Requests)
		}
		for name, r := range map[string][]int{"drrm.book_ahead": d.BookAhead, "drrm.window": d.Window, "drrm.background": d.Background} {
			if len(r) != 2 || r[0] < 0 || r[1] < r[0] || r[1] > 1e7 || (name != "drrm.book_ahead" && r[0] < 1) {
				p.at(name, ErrValue, "%v: want [min, max] whole seconds, 0 <= min <= max <= 1e7 (at least 1 for windows and jobs)", r)
			}
		}
		if d.Levels < 1 || d.Levels > 1000 {
			p.at("drrm.levels", ErrValue, "%d: want from 1 to 1000 levels", d.Levels)
		}
		for k, set := range map[string]bool{"drrm.trace": d.Trace != "", "drrm.quad": d.Quad != nil, "drrm.dual": d.Dual != nil, "drrm.share": d.Share != 0} {
			if set {
				p.at(k, ErrValue, "only for set %q", SetOSC)
			}
		}
	case SetOSC:
		if len(d.Resources) > 0 {
			p.at("drrm.resources", ErrValue, "the OSC set has the trace's nodes: set quad and dual instead")
		}
		if d.Requests < 0 || d.Requests > 1_000_000 {
			p.at("drrm.requests", ErrValue, "%d: want from 0 (= every reservation drawn from the trace) to 1000000", d.Requests)
		}
		if *d.Quad < 0 || *d.Dual < 0 || *d.Quad+*d.Dual < 1 || *d.Quad+*d.Dual > 10000 {
			p.at("drrm.quad", ErrValue, "%d quad and %d dual nodes: want 1 to 10000 in all", *d.Quad, *d.Dual)
		}
		if !(d.Share > 0 && d.Share <= 1) {
			p.at("drrm.share", ErrValue, "%v: want the share of jobs that become reservations in (0, 1]", d.Share)
		}
	default:
		p.at("drrm.set", ErrValue, "%q: valid are %s and %s", d.Set, SetSynthetic, SetOSC)
	}
	floats := func(field string, vs []float64, ok func(float64) bool, want string) {
		if len(vs) > maxList {
			p.at(field, ErrValue, "%d values: at most %d", len(vs), maxList)
		}
		for i, v := range vs {
			if !ok(v) {
				p.at(fmt.Sprintf("%s[%d]", field, i), ErrValue, "%v: want %s", v, want)
			} else if slices.Index(vs, v) != i {
				p.at(fmt.Sprintf("%s[%d]", field, i), ErrValue, "%v listed twice", v)
			}
		}
	}
	if len(d.Gap) == 0 {
		p.at("drrm.gap", ErrValue, "empty: list mean request intervals λ in seconds")
	}
	if len(d.Flexibility) == 0 {
		p.at("drrm.flexibility", ErrValue, "empty: list flexibilities in [0, 1)")
	}
	floats("drrm.gap", d.Gap, func(v float64) bool { return v > 0 && v <= 1e7 }, "a mean interval in (0, 1e7] seconds")
	flex := func(v float64) bool { return v >= 0 && v < 1 }
	floats("drrm.flexibility", d.Flexibility, flex, "a flexibility in [0, 1)")
	floats("drrm.sigma", d.Sigma, func(v float64) bool { return v > 0 && v <= 1 }, "a failure time ratio in (0, 1]")
	if d.SelectFlexibility != nil && !flex(*d.SelectFlexibility) {
		p.at("drrm.select_flexibility", ErrValue, "%v: want a flexibility in [0, 1)", *d.SelectFlexibility)
	}
	if d.Seeds < 1 || d.Seeds > 1000 {
		p.at("drrm.seeds", ErrValue, "%d: want from 1 to 1000 seeds per point", d.Seeds)
	}
	if len(e.Policies) == 0 {
		p.at("policies", ErrValue, "empty: list mechanisms: %s", strings.Join(drrmsim.Mechanisms(), ", "))
	}
	for i, pol := range e.Policies {
		_, isRef, _ := plannerrpc.ParseRef(pol)
		if isRef {
			if err := checkPolicyRef(plugins.KindAdmission, pol); err != nil {
				p.at(fmt.Sprintf("policies[%d]", i), ErrValue, "%v", err)
			}
		}
		if !isRef && !slices.Contains(drrmsim.Mechanisms(), pol) {
			p.at(fmt.Sprintf("policies[%d]", i), ErrValue, "%q: kind drrm runs %s, or an admission plugin (%sbuiltin:NAME, %s/path/to/exe)", pol, strings.Join(drrmsim.Mechanisms(), ", "), PluginPrefix, PluginPrefix)
		} else if slices.Index(e.Policies, pol) != i {
			p.at(fmt.Sprintf("policies[%d]", i), ErrValue, "%q listed twice", pol)
		}
	}
	if len(p.errs) == 0 {
		if n := len(e.drrmResources()) * len(d.Gap) * len(d.Flexibility) * len(e.drrmSigma()) * len(e.Policies); n > MaxRuns {
			p.at("drrm", ErrValue, "%d runs: at most %d in one experiment; split it", n, MaxRuns)
		}
	}
}

func (e *Experiment) drrmResources() []int {
	if e.DRRM.Set == SetOSC {
		return []int{*e.DRRM.Quad + *e.DRRM.Dual}
	}
	return e.DRRM.Resources
}

func (e *Experiment) drrmSigma() []float64 {
	if len(e.DRRM.Sigma) == 0 {
		return []float64{0}
	}
	return e.DRRM.Sigma
}

var drrmParams = []string{"res_number", "gap", "flexibility", "sigma", "policy"}

func (e *Experiment) expandDRRM() []Run {
	var runs []Run
	d := e.DRRM
	for _, r := range e.drrmResources() {
		for _, g := range d.Gap {
			for _, f := range d.Flexibility {
				for _, s := range e.drrmSigma() {
					for _, pol := range e.Policies {
						runs = append(runs, Run{Index: len(runs), Params: Params{ResNumber: r, Gap: g, Flexibility: f, Sigma: s, Policy: pol}})
					}
				}
			}
		}
	}
	return runs
}

var drrmMetrics = []string{"ap", "pp", "tpc", "eta", "ap_sd", "pp_sd", "tpc_sd", "eta_sd",
	"requests", "admitted", "preempting", "failed", "bind_failed", "seeds"}

func (e *Experiment) drrmMetricNames() []string {
	out := slices.Clone(drrmMetrics)
	for _, m := range []string{"ap", "pp", "tpc", "eta"} {
		for k := range e.DRRM.Seeds {
			out = append(out, m+"_s"+strconv.Itoa(k))
		}
	}
	return out
}

type drrmKey struct {
	seed uint64
	res  int
	gap  float64
	flex float64
}

// prepareDRRM reads the OSC trace once (for that set) and returns the
// function that performs one run: Seeds simulations, one per seed, on worlds
// shared by the runs of the same point (a memo), their metrics averaged.
func prepareDRRM(e *Experiment) (execFunc, error) {
	d := e.DRRM
	var jobs []swf.Job
	if d.Set == SetOSC {
		path, err := TracePath(d.Trace)
		if err != nil {
			return nil, err
		}
		r, err := swf.Open(path)
		if err != nil {
			return nil, err
		}
		jobs, err = swf.ReadJobs(r, nil, 0)
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	var worlds memo[drrmKey, *drrmsim.World]
	world := func(k drrmKey) (*drrmsim.World, error) {
		if d.Set == SetOSC {
			return worlds.get(k, func() (*drrmsim.World, error) {
				return drrmsim.NewOSC(drrmsim.OSC{Jobs: jobs, Quad: *d.Quad, Dual: *d.Dual, Share: d.Share,
					Requests: d.Requests, Gap: k.gap, Flexibility: k.flex, Seed: k.seed})
			})
		}
		base, err := worlds.get(drrmKey{seed: k.seed, res: k.res, gap: k.gap, flex: -1}, func() (*drrmsim.World, error) {
			return drrmsim.NewSynthetic(drrmsim.Synthetic{Resources: k.res, Requests: d.Requests, Gap: k.gap,
				Flexibility: 0, BookAhead: pair(d.BookAhead), Window: pair(d.Window), Background: pair(d.Background),
				Levels: d.Levels, Seed: k.seed})
		})
		if err != nil {
			return nil, err
		}
		return base.WithFlexibility(k.flex), nil
	}
	var commons memo[drrmKey, map[string]bool]
	common := func(ctx context.Context, k drrmKey) (map[string]bool, error) {
		k.flex = *d.SelectFlexibility
		return commons.get(k, func() (map[string]bool, error) {
			w, err := world(k)
			if err != nil {
				return nil, err
			}
			var rs []drrmsim.Result
			for _, pol := range e.Policies {
				run, stop, err := openMechanism(ctx, pol)
				if err != nil {
					return nil, err
				}
				r, err := run(w, k.seed, nil)
				stop()
				if err != nil {
					return nil, err
				}
				rs = append(rs, r)
			}
			return drrmsim.Common(rs...), nil
		})
	}
	return func(ctx context.Context, p Params, progress func(int, int)) (map[string]float64, error) {
		out := map[string]float64{"seeds": float64(d.Seeds)}
		var vals [4][]float64
		var sums [5]float64
		run, stop, err := openMechanism(ctx, p.Policy)
		if err != nil {
			return nil, err
		}
		defer stop()
		for k := range d.Seeds {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			seed := d.Seed + uint64(k)
			key := drrmKey{seed: seed, res: p.ResNumber, gap: p.Gap, flex: p.Flexibility}
			w, err := world(key)
			if err != nil {
				return nil, err
			}
			if d.Common {
				keep, err := common(ctx, key)
				if err != nil {
					return nil, err
				}
				w = w.Subset(keep)
			}
			var fail *drrmsim.Failure
			if p.Sigma > 0 && len(w.Reqs) > 0 {
				f := drrmsim.DrawFailure(w, p.Sigma, seed)
				fail = &f
			}
			r, err := run(w, seed, fail)
			if err != nil {
				return nil, fmt.Errorf("seed %d: %w", seed, err)
			}
			for i, v := range []float64{r.AP(), r.PP(), r.TPC, r.Eta()} {
				vals[i] = append(vals[i], v)
				out[[]string{"ap", "pp", "tpc", "eta"}[i]+"_s"+strconv.Itoa(k)] = v
			}
			for i, v := range []int{r.Requests, r.Admitted, r.Preempting, r.Failed, r.BindFailed} {
				sums[i] += float64(v)
			}
			progress(k+1, d.Seeds)
		}
		for i, m := range []string{"ap", "pp", "tpc", "eta"} {
			out[m], out[m+"_sd"] = meanAndSD(vals[i])
		}
		for i, m := range []string{"requests", "admitted", "preempting", "failed", "bind_failed"} {
			out[m] = sums[i] / float64(d.Seeds)
		}
		return out, nil
	}, nil
}

// meanAndSD is the mean and the sample standard deviation (0 for one value).
func meanAndSD(xs []float64) (mean, sd float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(xs)-1))
}
