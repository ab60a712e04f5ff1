package simbackend

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestComputeHandWorked(t *testing.T) {
	sites := []SiteCapacity{{"A", 4}, {"B", 2}}
	recs := []Record{
		{ID: "1", Submit: at(0), Start: at(0), End: at(10), Width: 2},
		{ID: "2", Submit: at(0), Start: at(10), End: at(30), Width: 4, Parts: []Part{{0, 2}, {1, 2}}},
		{ID: "3", Submit: at(5), Start: at(5), End: at(7), Width: 1, Parts: []Part{{1, 1}}},
		{ID: "4", Submit: at(1), Width: 64, Rejected: true},
	}
	s := Compute(recs, sites)
	// Costs 20, 80, 2 (Σ 102).
	want := map[string][2]float64{
		"AWRT":         {s.AWRT, 2604.0 / 102},
		"AWWT":         {s.AWWT, 800.0 / 102},
		"AU":           {s.AU, 102.0 / 180},
		"MeanWait":     {s.MeanWait, 10.0 / 3},
		"MeanResponse": {s.MeanResponse, 14},
		"MeanBSLD":     {s.MeanBSLD, 3.5 / 3},
		"MaxBSLD":      {s.MaxBSLD, 1.5},
		"Makespan":     {s.Makespan, 30},
		"UtilA":        {s.SiteUtil[0], 0.5},
		"UtilB":        {s.SiteUtil[1], 0.7},
	}
	for k, v := range want {
		if !near(v[0], v[1]) {
			t.Errorf("%s = %v, want %v", k, v[0], v[1])
		}
	}
	if s.Jobs != 4 || s.Ran != 3 || s.Rejected != 1 {
		t.Errorf("counts %d/%d/%d", s.Jobs, s.Ran, s.Rejected)
	}
}

func TestComputeEmptyAndAllRejected(t *testing.T) {
	s := Compute(nil, []SiteCapacity{{"A", 1}})
	if s.Ran != 0 || s.AWRT != 0 || s.AU != 0 {
		t.Fatalf("empty: %+v", s)
	}
	s = Compute([]Record{{Rejected: true}, {Rejected: true}}, nil)
	if s.Rejected != 2 || s.Ran != 0 || s.MeanBSLD != 0 {
		t.Fatalf("all rejected: %+v", s)
	}
}

// TestComputeAUEqualsSampling checks the interval formula against the
// definition: the mean of 1-second samples of used/total nodes.
func TestComputeAUEqualsSampling(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 50; trial++ {
		const total = 16
		var recs []Record
		for i := 0; i < 1+r.IntN(30); i++ {
			sub := r.IntN(100)
			st := sub + r.IntN(50)
			recs = append(recs, Record{Submit: at(sub), Start: at(st), End: at(st + 1 + r.IntN(60)), Width: 1 + r.IntN(4)})
		}
		s := Compute(recs, []SiteCapacity{{"A", total}})
		first, last := math.MaxInt, 0
		for _, rc := range recs {
			first = min(first, int(rc.Submit.Sub(epoch0)/time.Second))
			last = max(last, int(rc.End.Sub(epoch0)/time.Second))
		}
		sum := 0.0
		for sec := first; sec < last; sec++ {
			used := 0
			for _, rc := range recs {
				if !at(sec).Before(rc.Start) && at(sec).Before(rc.End) {
					used += rc.Width
				}
			}
			sum += float64(used) / total
		}
		if au := sum / float64(last-first); !near(s.AU, au) {
			t.Fatalf("trial %d: AU %v, sampled %v", trial, s.AU, au)
		}
	}
}

func TestBoundedSlowdownBound(t *testing.T) {
	// A 2 s job that waited 18 s: (18+2)/max(2,10) = 2, not 10.
	s := Compute([]Record{{Submit: at(0), Start: at(18), End: at(20), Width: 1}}, []SiteCapacity{{"A", 1}})
	if !near(s.MeanBSLD, 2) {
		t.Fatalf("bsld %v, want 2", s.MeanBSLD)
	}
}
