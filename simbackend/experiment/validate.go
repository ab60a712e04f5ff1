package experiment

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/registry"
	"github.com/gridsub/gridsub/policy/trust"
)

// Bounds of the numeric fields: beyond them a value is a typo, and the
// simulated time built on it (int64 nanoseconds) would overflow or the
// replay would never end.
const (
	maxNodes     = 1 << 20 // testbed.sites[].nodes, reference.procs, workload.wide, width_cap
	maxProcs     = 1 << 24 // workload.max_procs
	maxJobs      = 1 << 24 // workload.jobs
	minH, maxH   = 0.01, 100
	minBandwidth = 1e3 // bytes per second: 1 TB at 1 KB/s still fits a duration
	maxBSLD      = 1e9 // reference.mean_bsld
	// maxList bounds each list of the file (policies, every sweep axis,
	// reference.modes): the duplicate checks are quadratic, and a 1 MiB file
	// could otherwise list 100,000 values.
	maxList = 256
	// MaxRuns bounds the runs of one experiment (the product of the sweep's
	// axes and the policies): validation expands them, and so does the run.
	MaxRuns = 10000
)

func (p *parser) validate(e *Experiment) {
	if e.Name == "" {
		p.at("name", ErrValue, "missing: every experiment needs a name (letters, digits, . _ -)")
	} else if !nameRE.MatchString(e.Name) {
		p.at("name", ErrValue, "%q: use letters, digits, '.', '_' and '-' (at most 64)", e.Name)
	}
	for _, l := range []struct {
		field string
		n     int
	}{{"policies", len(e.Policies)}, {"sweep.p", len(e.Sweep.P)}, {"sweep.h_set", len(e.Sweep.HSet)},
		{"sweep.bandwidth", len(e.Sweep.Bandwidth)}, {"sweep.workload", len(e.Sweep.Workload)}, {"sweep.seed", len(e.Sweep.Seed)}, {"reference.modes", len(e.Reference.Modes)}} {
		if l.n > maxList {
			p.at(l.field, ErrValue, "%d values: at most %d (split the experiment into several files)", l.n, maxList)
		}
	}
	if len(p.errs) > 0 {
		return
	}
	if _, ok := p.lines["dgjs"]; ok && e.Kind != KindDGJS {
		p.at("dgjs", ErrValue, "only for kind %q (this experiment is %q)", KindDGJS, e.Kind)
	}
	for sec, kind := range map[string]string{"drrm": KindDRRM, "trust": KindTrustMinMin} {
		if _, ok := p.lines[sec]; ok && e.Kind != kind {
			p.at(sec, ErrValue, "only for kind %q (this experiment is %q)", kind, e.Kind)
		}
	}
	switch e.Kind {
	case KindDGJS:
		p.validateDGJS(e)
	case KindCoalloc:
		if _, ok := p.lines["reference"]; ok {
			p.at("reference", ErrValue, "only for kind %q (this experiment is %q)", KindCTCReference, e.Kind)
		}
		p.validateWorkload(e)
		p.validateTestbed(e)
		p.validatePolicies(e)
		p.validateSweep(e)
	case KindCTCReference:
		for _, k := range []string{"workload", "testbed", "policies", "sweep"} {
			if _, ok := p.lines[k]; ok {
				p.at(k, ErrValue, "not used by kind %q (it replays CTC-SP2 on one site; configure it under reference)", e.Kind)
			}
		}
		r := e.Reference
		if r.Procs < 1 || r.Procs > maxNodes {
			p.at("reference.procs", ErrValue, "%d: want from 1 to %d processors", r.Procs, maxNodes)
		}
		if len(r.Modes) == 0 {
			p.at("reference.modes", ErrValue, "empty: list %q and/or %q", ModeReference, ModeDefault)
		}
		for i, m := range r.Modes {
			if m != ModeReference && m != ModeDefault {
				p.at(fmt.Sprintf("reference.modes[%d]", i), ErrValue, "%q: valid are %s, %s", m, ModeReference, ModeDefault)
			} else if slices.Index(r.Modes, m) != i {
				p.at(fmt.Sprintf("reference.modes[%d]", i), ErrValue, "%q listed twice", m)
			}
		}
		if !(r.MeanBSLD > 0 && r.MeanBSLD <= maxBSLD) {
			p.at("reference.mean_bsld", ErrValue, "%v: want a positive number of at most %g", r.MeanBSLD, maxBSLD)
		}
	case KindDRRM:
		p.validateDRRM(e)
	case KindTrustMinMin:
		p.validateTrust(e)
	default:
		p.at("kind", ErrValue, "%q: valid are %s (default), %s, %s, %s and %s", e.Kind, KindCoalloc, KindCTCReference, KindDGJS, KindDRRM, KindTrustMinMin)
	}
	if len(p.errs) == 0 && e.Kind == KindCoalloc {
		if n := len(e.axisSeed()) * len(e.axisWorkload()) * len(e.axisHSet()) * len(e.axisBandwidth()) * len(e.Policies) * len(e.axisP()); n > MaxRuns {
			p.at("sweep", ErrValue, "%d runs (seeds × workloads × h sets × bandwidths × policies × p): at most %d in one experiment; split it", n, MaxRuns)
		}
	}
	if len(p.errs) == 0 {
		p.validatePlots(e)
		p.validateCompare(e)
	}
}

func (p *parser) validateWorkload(e *Experiment) {
	w := e.Workload
	if strings.TrimSpace(w.Trace) == "" {
		p.at("workload.trace", ErrValue, "missing: name a trace file such as CTC-SP2-1996-3.1-cln.swf.gz (looked up in $GRIDSUB_WORKLOADS or ../shared/workloads)")
	}
	if w.Filter != "strong" && w.Filter != "none" {
		p.at("workload.filter", ErrValue, "%q: valid are strong (predictsim's filter) and none", w.Filter)
	}
	if w.MaxProcs < 0 || w.MaxProcs > maxProcs {
		p.at("workload.max_procs", ErrValue, "%d: want from 0 (= the trace header's MaxProcs) to %d", w.MaxProcs, maxProcs)
	}
	if w.Jobs < 0 || w.Jobs > maxJobs {
		p.at("workload.jobs", ErrValue, "%d: want from 0 (= every job) to %d", w.Jobs, maxJobs)
	}
	if w.WidthCap < 0 || w.WidthCap > maxNodes {
		p.at("workload.width_cap", ErrValue, "%d: want from 0 (= no cap) to %d", w.WidthCap, maxNodes)
	}
	if w.Shape != 1 && w.Shape != 2 {
		p.at("workload.shape", ErrValue, "%d: valid are 1 (Workload 1, the trace) and 2 (90 %% of the jobs wide)", w.Shape)
	}
	if len(w.Wide) != 2 || w.Wide[0] < 1 || w.Wide[1] < w.Wide[0] || w.Wide[1] > maxNodes {
		p.at("workload.wide", ErrValue, "%v: want [min, max] with 1 <= min <= max <= %d", w.Wide, maxNodes)
	}
	if len(w.SizeMB) != 2 || !(w.SizeMB[0] >= 0 && w.SizeMB[1] >= w.SizeMB[0] && w.SizeMB[1] > 0 && w.SizeMB[1] <= 1e6) {
		p.at("workload.size_mb", ErrValue, "%v: want [min, max] in MB with 0 <= min <= max, 0 < max <= 1e6", w.SizeMB)
	}
	if !(w.ArrivalScale > 0) || w.ArrivalScale > 1000 {
		p.at("workload.arrival_scale", ErrValue, "%v: want a factor in (0, 1000]", w.ArrivalScale)
	}
}

func (p *parser) validateTestbed(e *Experiment) {
	t := e.Testbed
	if len(t.Sites) == 0 {
		p.at("testbed.sites", ErrValue, "empty: list at least one site (name, nodes, h)")
	}
	seen := map[string]bool{}
	for i, s := range t.Sites {
		f := fmt.Sprintf("testbed.sites[%d]", i)
		switch {
		case !nameRE.MatchString(s.Name):
			p.at(f+".name", ErrValue, "%q: a site needs a name of letters, digits, '.', '_' and '-'", s.Name)
		case seen[s.Name]:
			p.at(f+".name", ErrValue, "%q: site names must be unique", s.Name)
		}
		seen[s.Name] = true
		if s.Nodes < 1 || s.Nodes > maxNodes {
			p.at(f+".nodes", ErrValue, "%d: want from 1 to %d nodes", s.Nodes, maxNodes)
		}
		if s.H != nil && !validH(*s.H) {
			p.at(f+".h", ErrValue, "%v: want a heterogeneity factor in [%v, %v] (1 = the reference machine)", *s.H, minH, maxH)
		}
	}
	for name, h := range t.HSets {
		f := "testbed.h_sets." + name
		if !nameRE.MatchString(name) || name == hSetSites {
			p.at(f, ErrValue, "%q: name h sets with letters, digits, '.', '_' and '-' (not %q)", name, hSetSites)
		}
		if len(h) != len(t.Sites) {
			p.at(f, ErrValue, "%d values for %d sites: give one h per site, in the order of testbed.sites", len(h), len(t.Sites))
		}
		for _, v := range h {
			if !validH(v) {
				p.at(f, ErrValue, "%v: every h must be in [%v, %v]", v, minH, maxH)
				break
			}
		}
	}
	if t.HSet != "" {
		p.checkHSet(e, "testbed.h_set", t.HSet)
	}
	if _, err := ParseBandwidth(t.Bandwidth); err != nil {
		p.at("testbed.bandwidth", ErrValue, "%v", err)
	}
	if _, err := ParseLatency(t.Latency); err != nil {
		p.at("testbed.latency", ErrValue, "%v", err)
	}
	if !validP(*t.P) {
		p.at("testbed.p", ErrValue, "%v: the multi-site factor must be in [1, 10] (1 = no penalty)", *t.P)
	}
	if t.LearnTrust != "" {
		if err := registry.Valid(policy.KindTrust, t.LearnTrust); err != nil {
			p.at("testbed.learn_trust", ErrValue, "%q: valid are %s", t.LearnTrust, strings.Join(registry.NamesOf(policy.KindTrust), ", "))
		}
	}
	if _, err := trustHalfLife(&t); err != nil {
		p.at("testbed.trust_half_life", ErrValue, "%v", err)
	} else if t.LearnTrust == "" && t.TrustHalfLife != "" {
		p.at("testbed.trust_half_life", ErrValue, "set without testbed.learn_trust: it would change nothing")
	}
}

// trustHalfLife is testbed.trust_half_life: a duration from 0 (never
// age) to a year.
func trustHalfLife(t *Testbed) (time.Duration, error) {
	if t.TrustHalfLife == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(t.TrustHalfLife)
	if err != nil || d < 0 || d > 365*24*time.Hour {
		return 0, fmt.Errorf("%q: want a duration from 0s to 8760h", t.TrustHalfLife)
	}
	return d, nil
}

func validP(v float64) bool { return v >= 1 && v <= 10 && !math.IsNaN(v) }

func validH(v float64) bool { return v >= minH && v <= maxH }

func (p *parser) checkHSet(e *Experiment, field, name string) {
	h, ok := e.hSet(name)
	if !ok {
		p.at(field, ErrValue, "unknown h set %q: valid are %s (define more under testbed.h_sets)", name, strings.Join(e.hSetNames(), ", "))
		return
	}
	if len(h) != len(e.Testbed.Sites) {
		p.at(field, ErrValue, "h set %q has %d values but the testbed has %d sites", name, len(h), len(e.Testbed.Sites))
	}
}

func (p *parser) validatePolicies(e *Experiment) {
	if len(e.Policies) == 0 {
		p.at("policies", ErrValue, "empty: list the policies to compare, e.g. [greedy-easy, single-site-easy]; valid are %s", strings.Join(registry.Names(), ", "))
	}
	for i, name := range e.Policies {
		f := fmt.Sprintf("policies[%d]", i)
		if _, isPlugin, err := parsePluginPolicy(name); isPlugin {
			if err != nil {
				p.at(f, ErrValue, "plugin policy %v", err)
			} else if slices.Index(e.Policies, name) != i {
				p.at(f, ErrValue, "%q listed twice", name)
			}
		} else if name == trust.PlannerName {
			if slices.Index(e.Policies, name) != i {
				p.at(f, ErrValue, "%q listed twice", name)
			}
		} else if _, err := registry.ByName(name); err != nil {
			p.at(f, ErrValue, "unknown policy %q: valid are %s, %s, or %s/path/to/planner", name, strings.Join(registry.Names(), ", "), trust.PlannerName, PluginPrefix)
		} else if slices.Index(e.Policies, name) != i {
			p.at(f, ErrValue, "%q listed twice", name)
		}
	}
}

func (p *parser) validateSweep(e *Experiment) {
	s := e.Sweep
	for i, v := range s.P {
		f := fmt.Sprintf("sweep.p[%d]", i)
		if !validP(v) {
			p.at(f, ErrValue, "%v: the multi-site factor must be in [1, 10]", v)
		} else if slices.Index(s.P, v) != i {
			p.at(f, ErrValue, "%v listed twice", v)
		}
	}
	for i, v := range s.HSet {
		f := fmt.Sprintf("sweep.h_set[%d]", i)
		p.checkHSet(e, f, v)
		if slices.Index(s.HSet, v) != i {
			p.at(f, ErrValue, "%q listed twice", v)
		}
	}
	for i, v := range s.Bandwidth {
		f := fmt.Sprintf("sweep.bandwidth[%d]", i)
		if _, err := ParseBandwidth(v); err != nil {
			p.at(f, ErrValue, "%v", err)
		} else if slices.Index(s.Bandwidth, v) != i {
			p.at(f, ErrValue, "%q listed twice", v)
		}
	}
	for i, v := range s.Seed {
		if slices.Index(s.Seed, v) != i {
			p.at(fmt.Sprintf("sweep.seed[%d]", i), ErrValue, "%d listed twice", v)
		}
	}
	for i, v := range s.Workload {
		f := fmt.Sprintf("sweep.workload[%d]", i)
		if v != 1 && v != 2 {
			p.at(f, ErrValue, "%d: valid are 1 and 2 (paper 000's Workload 1 and 2)", v)
		} else if slices.Index(s.Workload, v) != i {
			p.at(f, ErrValue, "%d listed twice", v)
		}
	}
}

func (p *parser) validatePlots(e *Experiment) {
	params := ParamNames(e.Kind)
	metrics := e.MetricNames()
	names := map[string]bool{}
	for i, pl := range e.Plots {
		f := fmt.Sprintf("plots[%d]", i)
		switch {
		case !nameRE.MatchString(pl.Name):
			p.at(f+".name", ErrValue, "%q: a plot needs a file name of letters, digits, '.', '_' and '-'", pl.Name)
		case names[pl.Name]:
			p.at(f+".name", ErrValue, "%q: plot names must be unique", pl.Name)
		}
		names[pl.Name] = true
		if !slices.Contains(params, pl.X) {
			p.at(f+".x", ErrValue, "%q: the x axis is a parameter: %s", pl.X, strings.Join(params, ", "))
		}
		if !slices.Contains(metrics, pl.Y) {
			p.at(f+".y", ErrValue, "%q: the y axis is a metric: %s", pl.Y, strings.Join(metrics, ", "))
		}
		for j, s := range pl.Series {
			if !slices.Contains(params, s) || s == pl.X {
				p.at(fmt.Sprintf("%s.series[%d]", f, j), ErrValue, "%q: series are parameters other than x (%s)", s, strings.Join(params, ", "))
			}
		}
		for _, k := range params {
			if k == pl.X || slices.Contains(pl.Series, k) || k == "seed" {
				continue // a plot averages over the seeds
			}
			if _, ok := pl.Where[k]; ok {
				continue
			}
			if vals := e.axisValues(k); len(vals) > 1 {
				p.at(f, ErrValue, "the runs differ in %s (%s): add it to series or fix it under where, or the plot would mix them", k, strings.Join(vals, ", "))
			}
		}
		for k, v := range pl.Where {
			if !slices.Contains(params, k) {
				p.at(f+".where."+k, ErrValue, "%q: filter on a parameter: %s", k, strings.Join(params, ", "))
				continue
			}
			if vals := e.axisValues(k); !slices.ContainsFunc(vals, func(have string) bool { return paramEqual(k, have, v) }) {
				p.at(f+".where."+k, ErrValue, "%s = %q matches no run; the runs have %s", k, v, strings.Join(vals, ", "))
			}
		}
	}
}
