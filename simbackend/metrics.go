package simbackend

import (
	"math"
	"time"
)

// BSLDBound is the bound of the bounded slowdown: runs shorter than it count
// as this long.
const BSLDBound = 10 * time.Second

// Part is the share of a job's width on one site (an index into the sites
// passed to Compute).
type Part struct {
	Site  int
	Nodes int
}

// Record is one job's outcome, the input of Compute.
type Record struct {
	ID     string
	Submit time.Time
	Start  time.Time
	End    time.Time
	Width  int
	// Parts splits Width over sites; nil means all of it on site 0.
	Parts []Part
	// Rejected jobs never ran: they are counted and left out of every
	// time-based metric.
	Rejected bool
}

// SiteCapacity names a site and its node count, for utilisation.
type SiteCapacity struct {
	Name  string
	Nodes int
}

// Summary holds the metrics of a run (SPEC §1). Times are in seconds.
type Summary struct {
	Jobs     int // records given
	Ran      int // records not rejected
	Rejected int
	// AWRT = Σ Cost_j (end_j − submit_j) / Σ Cost_j and
	// AWWT = Σ Cost_j (start_j − submit_j) / Σ Cost_j,
	// with Cost_j = width_j (end_j − start_j).
	AWRT, AWWT float64
	// AU is the mean over the run (first submit to last end) of used nodes
	// over total nodes: exactly what 1-second samples give for integer
	// times, computed from the intervals.
	AU           float64
	MeanWait     float64
	MeanResponse float64
	MeanBSLD     float64 // max(1, (end−submit)/max(end−start, 10 s)), averaged
	MaxBSLD      float64
	Makespan     float64 // last end − first submit
	SiteUtil     []float64
}

// Compute derives the Summary from per-job records. It is pure: the same
// records always give the same numbers.
func Compute(recs []Record, sites []SiteCapacity) Summary {
	a := newAccum(len(sites))
	var origin time.Time
	rejected := 0
	for _, r := range recs {
		if r.Rejected {
			rejected++
			continue
		}
		if origin.IsZero() {
			origin = r.Submit
		}
		a.add(r.Submit.Sub(origin).Seconds(), r.Start.Sub(origin).Seconds(), r.End.Sub(origin).Seconds(), r.Width, r.Parts)
	}
	return a.summary(sites, len(recs), rejected)
}

// accum gathers the sums behind a Summary, job by job, times in seconds
// from any common origin.
type accum struct {
	n                                  int
	first, last                        float64
	sumCost, sumCostResp, sumCostWait  float64
	sumWait, sumResp, sumBSLD, maxBSLD float64
	area                               []float64 // node-seconds per site
}

func newAccum(sites int) *accum { return &accum{area: make([]float64, sites)} }

// add counts one job that ran; parts nil means all of width on site 0.
func (a *accum) add(submit, start, end float64, width int, parts []Part) {
	if a.n == 0 || submit < a.first {
		a.first = submit
	}
	if a.n == 0 || end > a.last {
		a.last = end
	}
	a.n++
	run, wait, resp := end-start, start-submit, end-submit
	cost := float64(width) * run
	a.sumCost += cost
	a.sumCostResp += cost * resp
	a.sumCostWait += cost * wait
	a.sumWait += wait
	a.sumResp += resp
	b := math.Max(1, resp/math.Max(run, BSLDBound.Seconds()))
	a.sumBSLD += b
	a.maxBSLD = math.Max(a.maxBSLD, b)
	if parts == nil {
		if len(a.area) > 0 {
			a.area[0] += cost
		}
		return
	}
	for _, p := range parts {
		if p.Site >= 0 && p.Site < len(a.area) {
			a.area[p.Site] += float64(p.Nodes) * run
		}
	}
}

func (a *accum) summary(sites []SiteCapacity, jobs, rejected int) Summary {
	s := Summary{Jobs: jobs, Ran: a.n, Rejected: rejected, SiteUtil: make([]float64, len(sites))}
	if a.n == 0 {
		return s
	}
	n := float64(a.n)
	s.MeanWait, s.MeanResponse, s.MeanBSLD, s.MaxBSLD = a.sumWait/n, a.sumResp/n, a.sumBSLD/n, a.maxBSLD
	if a.sumCost > 0 {
		s.AWRT, s.AWWT = a.sumCostResp/a.sumCost, a.sumCostWait/a.sumCost
	}
	s.Makespan = a.last - a.first
	if s.Makespan > 0 {
		total, used := 0, 0.0
		for i, c := range sites {
			total += c.Nodes
			used += a.area[i]
			if c.Nodes > 0 {
				s.SiteUtil[i] = a.area[i] / (float64(c.Nodes) * s.Makespan)
			}
		}
		if total > 0 {
			s.AU = used / (float64(total) * s.Makespan)
		}
	}
	return s
}
