package experiment

import (
	"fmt"
	"slices"
	"strconv"
)

// Params are one run's coordinates in the sweep. Fields that do not apply
// to the experiment's kind stay empty.
type Params struct {
	Workload  int     `json:"workload,omitempty"`
	HSet      string  `json:"h_set,omitempty"`
	Bandwidth string  `json:"bandwidth,omitempty"`
	Policy    string  `json:"policy,omitempty"`
	P         float64 `json:"p,omitempty"`
	Mode      string  `json:"mode,omitempty"`
	Seed      uint64  `json:"seed,omitempty"` // kind coalloc: the workload's seed
	// kind dgjs (dgjs.go)
	Failure   string  `json:"failure,omitempty"`
	Resources int     `json:"resources,omitempty"`
	Arrival   float64 `json:"arrival,omitempty"`
	Jobs      int     `json:"jobs,omitempty"`
	// kind drrm (paper001.go)
	ResNumber   int     `json:"res_number,omitempty"`
	Gap         float64 `json:"gap,omitempty"`
	Flexibility float64 `json:"flexibility,omitempty"`
	Sigma       float64 `json:"sigma,omitempty"`
	// kind trust-minmin (paper002.go)
	Tasks     int    `json:"tasks,omitempty"`
	Migration string `json:"migration,omitempty"`
	Round     int    `json:"run,omitempty"`
}

// Run is one simulation to perform.
type Run struct {
	Index  int    `json:"index"`
	Params Params `json:"params"`
}

// ParamNames lists the parameters of a kind in the order of results.csv.
func ParamNames(kind string) []string {
	switch kind {
	case KindCTCReference:
		return []string{"mode"}
	case KindDRRM:
		return slices.Clone(drrmParams)
	case KindTrustMinMin:
		return slices.Clone(trustParams)
	}
	if kind == KindDGJS {
		return slices.Clone(dgjsParams)
	}
	return []string{"workload", "h_set", "bandwidth", "policy", "p", "seed"}
}

// Value returns a parameter as text (the form Plot.Where compares with).
func (p Params) Value(name string) string {
	switch name {
	case "workload":
		return strconv.Itoa(p.Workload)
	case "h_set":
		return p.HSet
	case "bandwidth":
		return p.Bandwidth
	case "policy":
		return p.Policy
	case "p":
		return strconv.FormatFloat(p.P, 'f', -1, 64)
	case "mode":
		return p.Mode
	case "seed":
		return strconv.FormatUint(p.Seed, 10)
	case "failure":
		return p.Failure
	case "resources":
		return strconv.Itoa(p.Resources)
	case "arrival":
		return strconv.FormatFloat(p.Arrival, 'f', -1, 64)
	case "jobs":
		return strconv.Itoa(p.Jobs)
	case "res_number":
		return strconv.Itoa(p.ResNumber)
	case "gap", "flexibility", "sigma":
		return strconv.FormatFloat(map[string]float64{"gap": p.Gap, "flexibility": p.Flexibility, "sigma": p.Sigma}[name], 'f', -1, 64)
	case "tasks":
		return strconv.Itoa(p.Tasks)
	case "migration":
		return p.Migration
	case "run":
		return strconv.Itoa(p.Round)
	}
	return ""
}

// coallocMetrics are the metrics of a co-allocation run, before the
// per-site utilisations util_<site>.
var coallocMetrics = []string{
	"awrt", "awwt", "au", "mean_wait", "mean_response", "mean_bsld", "max_bsld", "makespan",
	"jobs", "ran", "rejected", "failed", "unfinished", "multisite", "cycles",
}

// referenceMetrics are the metrics of a ctc-easy-reference run.
var referenceMetrics = []string{
	"jobs", "start_match", "start_match_count", "mean_bsld", "ref_mean_bsld", "bsld_dev_pct",
	"mean_wait", "mean_response", "awrt", "awwt", "au", "makespan",
}

// MetricNames lists the metrics of e's runs in the order of results.csv.
func (e *Experiment) MetricNames() []string {
	switch e.Kind {
	case KindCTCReference:
		return slices.Clone(referenceMetrics)
	case KindDRRM:
		return e.drrmMetricNames()
	case KindTrustMinMin:
		return e.trustMetricNames()
	}
	if e.Kind == KindDGJS {
		return e.dgjsMetricNames()
	}
	out := slices.Clone(coallocMetrics)
	for _, s := range e.Testbed.Sites {
		out = append(out, "util_"+s.Name)
	}
	return out
}

// metricLabels are axis labels of the metrics plots commonly use.
var metricLabels = map[string]string{
	"awrt":          "AWRT (s)",
	"awwt":          "AWWT (s)",
	"au":            "AU (share of nodes in use)",
	"mean_wait":     "mean wait (s)",
	"mean_response": "mean response (s)",
	"mean_bsld":     "mean bounded slowdown",
	"makespan":      "makespan (s)",
	"multisite":     "share of jobs run on several sites",
	"start_match":   "share of start times as in the reference",
}

func metricLabel(m string) string {
	if l, ok := metricLabels[m]; ok {
		return l
	}
	return m
}

var paramLabels = map[string]string{
	"p":         "multi-site factor p",
	"bandwidth": "inter-site bandwidth",
	"h_set":     "heterogeneity (h set)",
	"policy":    "policy",
	"workload":  "workload",
	"mode":      "EASY mode",
}

// Expand returns the runs of the experiment: the cartesian product of
// seed × workload × h set × bandwidth × policy × p (p varies fastest), or one run
// per mode for the reference kind. The order is fixed by the file.
func (e *Experiment) Expand() []Run {
	var runs []Run
	switch e.Kind {
	case KindDRRM:
		return e.expandDRRM()
	case KindTrustMinMin:
		return e.expandTrust()
	}
	if e.Kind == KindCTCReference {
		for _, m := range e.Reference.Modes {
			runs = append(runs, Run{Index: len(runs), Params: Params{Mode: m}})
		}
		return runs
	}
	if e.Kind == KindDGJS {
		return e.expandDGJS()
	}
	for _, seed := range e.axisSeed() {
		for _, w := range e.axisWorkload() {
			for _, h := range e.axisHSet() {
				for _, bw := range e.axisBandwidth() {
					for _, pol := range e.Policies {
						for _, p := range e.axisP() {
							runs = append(runs, Run{Index: len(runs), Params: Params{Workload: w, HSet: h, Bandwidth: bw, Policy: pol, P: p, Seed: seed}})
						}
					}
				}
			}
		}
	}
	return runs
}

// axisSeed lists the seeds: sweep.seed, else workload.seed alone.
func (e *Experiment) axisSeed() []uint64 {
	if len(e.Sweep.Seed) > 0 {
		return e.Sweep.Seed
	}
	return []uint64{e.Workload.Seed}
}

// hSetSites is the label of "the sites' own h values".
const hSetSites = "sites"

func (e *Experiment) axisWorkload() []int {
	if len(e.Sweep.Workload) > 0 {
		return e.Sweep.Workload
	}
	return []int{e.Workload.Shape}
}

func (e *Experiment) axisHSet() []string {
	if len(e.Sweep.HSet) > 0 {
		return e.Sweep.HSet
	}
	if e.Testbed.HSet != "" {
		return []string{e.Testbed.HSet}
	}
	return []string{hSetSites}
}

func (e *Experiment) axisBandwidth() []string {
	if len(e.Sweep.Bandwidth) > 0 {
		return e.Sweep.Bandwidth
	}
	return []string{e.Testbed.Bandwidth}
}

func (e *Experiment) axisP() []float64 {
	if len(e.Sweep.P) > 0 {
		return e.Sweep.P
	}
	return []float64{*e.Testbed.P}
}

// axisValues lists the values a parameter takes over the runs, in order.
func (e *Experiment) axisValues(name string) []string {
	var out []string
	for _, r := range e.Expand() {
		if v := r.Params.Value(name); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// siteH returns the h of each site for an h set label.
func (e *Experiment) siteH(label string) ([]float64, error) {
	out := make([]float64, len(e.Testbed.Sites))
	if label == hSetSites {
		for i, s := range e.Testbed.Sites {
			out[i] = 1
			if s.H != nil {
				out[i] = *s.H
			}
		}
		return out, nil
	}
	h, ok := e.hSet(label)
	if !ok || len(h) != len(out) {
		return nil, fmt.Errorf("h set %q does not fit the %d sites", label, len(out))
	}
	copy(out, h)
	return out, nil
}
