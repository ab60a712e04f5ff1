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
	s := Summary{Jobs: len(recs), SiteUtil: make([]float64, len(sites))}
	var first, last time.Time
	var sumCost, sumCostResp, sumCostWait float64
	var sumWait, sumResp, sumBSLD float64
	area := make([]float64, len(sites)) // node-seconds per site
	for _, r := range recs {
		if r.Rejected {
			s.Rejected++
			continue
		}
		s.Ran++
		if first.IsZero() || r.Submit.Before(first) {
			first = r.Submit
		}
		if last.IsZero() || r.End.After(last) {
			last = r.End
		}
		run := r.End.Sub(r.Start).Seconds()
		wait := r.Start.Sub(r.Submit).Seconds()
		resp := r.End.Sub(r.Submit).Seconds()
		cost := float64(r.Width) * run
		sumCost += cost
		sumCostResp += cost * resp
		sumCostWait += cost * wait
		sumWait += wait
		sumResp += resp
		b := math.Max(1, resp/math.Max(run, BSLDBound.Seconds()))
		sumBSLD += b
		s.MaxBSLD = math.Max(s.MaxBSLD, b)
		if r.Parts == nil {
			if len(area) > 0 {
				area[0] += float64(r.Width) * run
			}
		} else {
			for _, p := range r.Parts {
				if p.Site >= 0 && p.Site < len(area) {
					area[p.Site] += float64(p.Nodes) * run
				}
			}
		}
	}
	if s.Ran == 0 {
		return s
	}
	n := float64(s.Ran)
	s.MeanWait, s.MeanResponse, s.MeanBSLD = sumWait/n, sumResp/n, sumBSLD/n
	if sumCost > 0 {
		s.AWRT, s.AWWT = sumCostResp/sumCost, sumCostWait/sumCost
	}
	s.Makespan = last.Sub(first).Seconds()
	if s.Makespan > 0 {
		total, used := 0, 0.0
		for i, c := range sites {
			total += c.Nodes
			used += area[i]
			if c.Nodes > 0 {
				s.SiteUtil[i] = area[i] / (float64(c.Nodes) * s.Makespan)
			}
		}
		if total > 0 {
			s.AU = used / (float64(total) * s.Makespan)
		}
	}
	return s
}
