package drrmsim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gridsub/gridsub/policy/reserve"
	"github.com/gridsub/gridsub/simbackend/swf"
)

// Sentinel errors.
var (
	// ErrConfig: a generator's configuration is out of range.
	ErrConfig = errors.New("drrmsim: bad configuration")
	// ErrMechanism: an unknown mechanism name.
	ErrMechanism = errors.New("drrmsim: unknown mechanism")
)

// T0 is the experiment's time 0.
var T0 = time.Date(2007, 1, 1, 0, 0, 0, 0, time.UTC)

// BGJob is one non-reserved job on a resource.
type BGJob struct {
	Start    time.Time
	Len      time.Duration // how long it runs if left alone
	Expected time.Duration // the run time the scheduler expects (et_kj)
}

// World is one experiment's input: the resources, the reservation requests
// in arrival order with their windows, and each resource's non-reserved jobs
// back to back.
type World struct {
	Res  []reserve.Resource
	Reqs []reserve.Request
	At   []time.Time     // arrival of Reqs[i]
	Win  []time.Duration // window LT-ET of Reqs[i] (kept when the flexibility changes)
	BG   [][]BGJob       // per resource, sorted by start, back to back
	// round is the duration quantum (a second in the synthetic set).
	round time.Duration
}

// Horizon is the time from T0 to the latest end of any request's window: no
// reservation completes later. A failure at time ratio σ happens at
// T0 + σ·Horizon.
func (w *World) Horizon() time.Duration {
	var h time.Duration
	for _, q := range w.Reqs {
		h = max(h, q.LT.Sub(T0))
	}
	return h
}

// WithFlexibility returns a copy whose requests keep their windows and hold
// Dur = window·(1 − f) (rounded to the world's quantum, at least one).
func (w *World) WithFlexibility(f float64) *World {
	c := *w
	c.Reqs = slices.Clone(w.Reqs)
	for i := range c.Reqs {
		c.Reqs[i].Dur = durFor(w.Win[i], f, w.round)
	}
	return &c
}

func durFor(win time.Duration, f float64, round time.Duration) time.Duration {
	d := time.Duration(float64(win) * (1 - f))
	if round > 0 {
		d = d.Round(round)
	}
	return min(max(d, max(round, 1)), win)
}

// Subset returns a copy holding only the requests whose ids are in keep, in
// their arrival order.
func (w *World) Subset(keep map[string]bool) *World {
	c := *w
	c.Reqs, c.At, c.Win = nil, nil, nil
	for i, q := range w.Reqs {
		if keep[q.ID] {
			c.Reqs = append(c.Reqs, q)
			c.At = append(c.At, w.At[i])
			c.Win = append(c.Win, w.Win[i])
		}
	}
	return &c
}

// Synthetic configures paper 001's synthetic set (§3.1). Times are seconds.
type Synthetic struct {
	Resources   int     // resNumber
	Requests    int     // reqNumber
	Gap         float64 // λ: mean gap between requests (exponential)
	Flexibility float64 // (lt − et − dur)/(lt − et), in [0, 1)
	BookAhead   [2]int  // request to et, uniform (paper: 1–20)
	Window      [2]int  // lt − et, uniform (paper: 5–50)
	Levels      int     // capability and demand levels 1..Levels (paper: 5)
	Background  [2]int  // non-reserved job lengths, uniform (paper: 5–50)
	Seed        uint64
}

// DefaultSynthetic is the paper's synthetic set with 25 resources, 200
// requests, λ = 2 and flexibility 0.1 (experiment 1 at the paper's headline
// point).
func DefaultSynthetic() Synthetic {
	return Synthetic{Resources: 25, Requests: 200, Gap: 2, Flexibility: 0.1,
		BookAhead: [2]int{1, 20}, Window: [2]int{5, 50}, Levels: 5, Background: [2]int{5, 50}, Seed: 1}
}

func span(r [2]int) bool { return r[0] >= 0 && r[1] >= r[0] && r[1] <= 1e7 }

// Validate reports the first field out of range, wrapping ErrConfig.
func (c Synthetic) Validate() error {
	switch {
	case c.Resources < 1 || c.Resources > 10000:
		return fmt.Errorf("%w: resources %d, want 1..10000", ErrConfig, c.Resources)
	case c.Requests < 1 || c.Requests > 1e6:
		return fmt.Errorf("%w: requests %d, want 1..1000000", ErrConfig, c.Requests)
	case !(c.Gap > 0 && c.Gap <= 1e6):
		return fmt.Errorf("%w: gap %v, want (0, 1e6] seconds", ErrConfig, c.Gap)
	case !(c.Flexibility >= 0 && c.Flexibility < 1):
		return fmt.Errorf("%w: flexibility %v, want [0, 1)", ErrConfig, c.Flexibility)
	case !span(c.BookAhead) || !span(c.Window) || c.Window[0] < 1 || !span(c.Background) || c.Background[0] < 1:
		return fmt.Errorf("%w: book-ahead %v, window %v, background %v: want [min, max] seconds, windows and jobs at least 1", ErrConfig, c.BookAhead, c.Window, c.Background)
	case c.Levels < 1 || c.Levels > 1000:
		return fmt.Errorf("%w: levels %d, want 1..1000", ErrConfig, c.Levels)
	}
	return nil
}

func uni(r *rand.Rand, s [2]int) int { return s[0] + r.IntN(s[1]-s[0]+1) }

func sec(s int) time.Duration { return time.Duration(s) * time.Second }

// NewSynthetic draws a synthetic world. Every resource runs non-reserved jobs
// back to back from before T0 until well after the last window, so that one
// is running whenever a reservation starts (the paper: "enough non-reserved
// jobs that at each reservation's start every resource is running one").
// Their expected run time is their run time. The requests' windows, arrivals,
// book-ahead and demands do not depend on the flexibility, so a sweep over it
// changes only the durations.
func NewSynthetic(c Synthetic) (*World, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(c.Seed, 0xd44))
	w := &World{round: time.Second}
	for i := range c.Resources {
		w.Res = append(w.Res, reserve.Resource{Name: fmt.Sprintf("r%03d", i), Capacity: 1, Level: 1 + r.IntN(c.Levels)})
	}
	now := T0
	for i := range c.Requests {
		now = now.Add(time.Duration(r.ExpFloat64() * c.Gap * float64(time.Second)))
		et := now.Add(sec(uni(r, c.BookAhead)))
		win := sec(uni(r, c.Window))
		w.At = append(w.At, now)
		w.Win = append(w.Win, win)
		w.Reqs = append(w.Reqs, reserve.Request{ID: fmt.Sprintf("q%05d", i), ET: et, LT: et.Add(win),
			Dur: durFor(win, c.Flexibility, time.Second), Demand: 1 + r.IntN(c.Levels)})
	}
	end := T0.Add(w.Horizon() + sec(2*c.Background[1]))
	for range w.Res {
		var jobs []BGJob
		for t := T0.Add(-sec(r.IntN(c.Background[1]))); t.Before(end); {
			l := sec(uni(r, c.Background))
			jobs = append(jobs, BGJob{Start: t, Len: l, Expected: l})
			t = t.Add(l)
		}
		w.BG = append(w.BG, jobs)
	}
	return w, nil
}

// OSC configures the trace experiment (§3.3) on OSC-Clust: 57 nodes, a
// share of the trace's jobs turned into reservations of three types (quad,
// dual, careless), the others spread evenly over the nodes.
type OSC struct {
	Jobs        []swf.Job // the trace, in submit order
	Quad, Dual  int       // nodes with 4 and 2 CPUs (the trace's header: 32 quad, 25 dual)
	Share       float64   // share of jobs that become reservations (paper: 0.1)
	Requests    int       // the first Requests of them (0 = all)
	Gap         float64   // λ in seconds
	Flexibility float64   // in [0, 1)
	Seed        uint64
}

// Validate reports the first field out of range, wrapping ErrConfig.
func (c OSC) Validate() error {
	switch {
	case len(c.Jobs) == 0:
		return fmt.Errorf("%w: the trace has no jobs", ErrConfig)
	case c.Quad < 0 || c.Dual < 0 || c.Quad+c.Dual < 1 || c.Quad+c.Dual > 10000:
		return fmt.Errorf("%w: %d quad and %d dual nodes, want 1..10000 in all", ErrConfig, c.Quad, c.Dual)
	case !(c.Share > 0 && c.Share <= 1):
		return fmt.Errorf("%w: share %v, want (0, 1]", ErrConfig, c.Share)
	case c.Requests < 0:
		return fmt.Errorf("%w: requests %d, want >= 0", ErrConfig, c.Requests)
	case !(c.Gap > 0 && c.Gap <= 1e7):
		return fmt.Errorf("%w: gap %v, want (0, 1e7] seconds", ErrConfig, c.Gap)
	case !(c.Flexibility >= 0 && c.Flexibility < 1):
		return fmt.Errorf("%w: flexibility %v, want [0, 1)", ErrConfig, c.Flexibility)
	}
	return nil
}

// Reservation types of the trace experiment.
const (
	TypeQuad     = "quad"     // wants a 4-CPU node
	TypeDual     = "dual"     // wants a 2-CPU node
	TypeCareless = "careless" // takes either
)

// NewOSC builds the trace world. Jobs with no run time or no processors are
// skipped. A seeded draw picks round(Share·N) jobs as reservations (kept in
// trace order; the first Requests of them are used) and gives each a type,
// uniform over quad, dual and careless. A job of run time t on n processors
// holds a node of m CPUs for t·n/m (the paper's rule); a careless
// reservation does not know its node at admission and is sized for a dual
// node (m = 2, the longer hold). Arrivals are Poisson with mean gap Gap,
// book-ahead is half the window, and the window is dur/(1 − flexibility).
// The other jobs go round-robin to the nodes in trace order and run there
// back to back from T0 (cycling through the node's list until the last
// window ends), each expected to run exactly as long as it does: the trace
// has no user estimates (workloads/README.md).
func NewOSC(c OSC) (*World, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var jobs []swf.Job
	for _, j := range c.Jobs {
		if j.Run > 0 && j.Width() > 0 {
			jobs = append(jobs, j)
		}
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("%w: no job of the trace has a run time and processors", ErrConfig)
	}
	r := rand.New(rand.NewPCG(c.Seed, 0x05c))
	nres := int(math.Round(c.Share * float64(len(jobs))))
	isRes := make([]bool, len(jobs))
	for _, k := range r.Perm(len(jobs))[:max(1, nres)] {
		isRes[k] = true
	}
	w := &World{round: time.Second}
	var quad, dual []string
	cpus := []int{}
	for i := range c.Quad {
		n := fmt.Sprintf("quad%02d", i)
		quad = append(quad, n)
		w.Res = append(w.Res, reserve.Resource{Name: n, Capacity: 1, Level: 1})
		cpus = append(cpus, 4)
	}
	for i := range c.Dual {
		n := fmt.Sprintf("dual%02d", i)
		dual = append(dual, n)
		w.Res = append(w.Res, reserve.Resource{Name: n, Capacity: 1, Level: 1})
		cpus = append(cpus, 2)
	}
	hold := func(j swf.Job, m int) time.Duration {
		return max(time.Second, time.Duration(j.Run*j.Width())*time.Second/time.Duration(m))
	}
	now := T0
	var bgJobs []swf.Job
	for k, j := range jobs {
		if !isRes[k] {
			bgJobs = append(bgJobs, j)
			continue
		}
		if c.Requests > 0 && len(w.Reqs) >= c.Requests {
			continue
		}
		typ := r.IntN(3)
		var allowed []string
		m := 2
		switch typ {
		case 0:
			allowed, m = quad, 4
		case 1:
			allowed = dual
		}
		now = now.Add(time.Duration(r.ExpFloat64() * c.Gap * float64(time.Second)))
		dur := hold(j, m)
		win := max(time.Duration(float64(dur)/(1-c.Flexibility)), dur)
		et := now.Add(win / 2)
		w.At = append(w.At, now)
		w.Win = append(w.Win, win)
		w.Reqs = append(w.Reqs, reserve.Request{ID: fmt.Sprintf("j%d", j.ID), ET: et, LT: et.Add(win), Dur: dur, Demand: 1, Allowed: allowed})
	}
	end := T0.Add(w.Horizon())
	per := make([][]swf.Job, len(w.Res))
	for k, j := range bgJobs {
		per[k%len(w.Res)] = append(per[k%len(w.Res)], j)
	}
	w.BG = make([][]BGJob, len(w.Res))
	for i := range w.Res {
		lens := make([]time.Duration, len(per[i])) // one cycle through the node's list
		for k, j := range per[i] {
			lens[k] = hold(j, cpus[i])
		}
		n := 0 // how many jobs until the last window ends, to allocate once
		for t := T0; t.Before(end) && len(lens) > 0; n++ {
			t = t.Add(lens[n%len(lens)])
		}
		out := make([]BGJob, 0, n)
		for t, k := T0, 0; t.Before(end) && len(lens) > 0; k++ {
			l := lens[k%len(lens)]
			out = append(out, BGJob{Start: t, Len: l, Expected: l})
			t = t.Add(l)
		}
		w.BG[i] = out
	}
	return w, nil
}
