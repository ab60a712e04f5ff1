package dgjs

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/dependable"
	"github.com/gridsub/gridsub/simbackend/faults"
)

// ErrBadConfig: a Config field out of range; the message names it.
var ErrBadConfig = errors.New("dgjs: bad config")

// Schedulers.
const (
	PolicyDGJS   = "dgjs"
	PolicyMinMin = "min-min"
	PolicyRefine = "refine"
)

// Policies lists the schedulers.
func Policies() []string { return []string{PolicyDGJS, PolicyMinMin, PolicyRefine} }

// ConditionalSuffix names a scheduler's variant with the conditional
// reading of equation (12) (Config.Conditional): "dgjs-conditional",
// "refine-conditional".
const ConditionalSuffix = "-conditional"

// PolicyNames lists every name ParsePolicy accepts.
func PolicyNames() []string {
	return []string{PolicyDGJS, PolicyMinMin, PolicyRefine, PolicyDGJS + ConditionalSuffix, PolicyRefine + ConditionalSuffix}
}

// ParsePolicy splits a scheduler name into the scheduler and whether it
// reads reliability conditionally; an unknown name wraps ErrBadConfig.
func ParsePolicy(name string) (policy string, conditional bool, err error) {
	if !slices.Contains(PolicyNames(), name) {
		return "", false, fmt.Errorf("%w: policy %q (want one of %v)", ErrBadConfig, name, PolicyNames())
	}
	base, cond := strings.CutSuffix(name, ConditionalSuffix)
	return base, cond, nil
}

// Job classes, drawn uniformly as in the paper ("each submission picks one
// of the three types at random").
const (
	ClassTight = iota // a strict deadline
	ClassLoose        // a loose deadline
	ClassNone         // no deadline
)

// Config is one run.
type Config struct {
	Policy  string
	Failure faults.Model
	Jobs    int
	Seed    uint64
	// Speeds holds each resource's run-time factor (a job of base run time
	// T runs T·h there); default 20 resources, h evenly 0.5..1.5 (as
	// the experiment files).
	Speeds []float64
	// ArrivalPerMin is the Poisson arrival rate (default 0.4 per minute).
	ArrivalPerMin float64
	// RunMin, RunMax bound the uniform base run time (default 5 and 20 min).
	RunMin, RunMax time.Duration
	// Lambda is the tiers' λ (default 1.5).
	Lambda float64
	// Tight and Loose are the ranges of a deadline's slack, in multiples of
	// CT_min (the base run time on the fastest resource): a tight job's
	// deadline is arrival + U(Tight)·CT_min, a loose one's arrival +
	// U(Loose)·CT_min. Defaults [1.5, 2.5] and [2.5, 6]: with λ = 1.5
	// tight jobs are exactly the high tier, loose ones the low tier.
	Tight, Loose [2]float64
	// MaxAttempts bounds a job's placement rounds (default 5).
	MaxAttempts int
	// History is the failure log the predictor learns before the run
	// (default 48 h): the run continues the same log, so it starts in the
	// failure process's steady state. Threshold is the predictor's merge
	// distance (default 5 min).
	History   time.Duration
	Threshold time.Duration
	// Conditional uses the predictor's conditional reading of equation
	// (12) (dependable.Config.Conditional) instead of the paper's formula
	// as written.
	Conditional bool
	// JobList, when set, replaces the drawn jobs (Jobs is then its length),
	// and Outages, when set, the drawn failure log of the run: for worked
	// examples and tests. The predictor's history is drawn as usual
	// (History 0 leaves it untrained).
	JobList []Job
	Outages []faults.Outage
	// Tiering decides a DGJS job's tier at arrival; nil is the built-in
	// "dgjs" (dependable.TieringName). Any policy.Tiering may stand here: a
	// built-in, or one served by a plugin (bridge/plugins/policyrpc), so a
	// centre replays its own tier rule. Only Tier is called.
	Tiering policy.Tiering
}

func (c *Config) defaults() {
	if c.JobList != nil {
		c.Jobs = len(c.JobList)
	}
	if c.Speeds == nil {
		c.Speeds = make([]float64, 20)
		for i := range c.Speeds {
			c.Speeds[i] = 0.5 + float64(i)/19
		}
	}
	if c.ArrivalPerMin == 0 {
		c.ArrivalPerMin = 0.4
	}
	if c.RunMin == 0 && c.RunMax == 0 {
		c.RunMin, c.RunMax = 5*time.Minute, 20*time.Minute
	}
	if c.Lambda == 0 {
		c.Lambda = dependable.DefaultLambda
	}
	if c.Tight == [2]float64{} {
		c.Tight = [2]float64{1.5, 2.5}
	}
	if c.Loose == [2]float64{} {
		c.Loose = [2]float64{2.5, 6}
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
	}
	if c.History == 0 {
		c.History = 48 * time.Hour
	}
	if c.Threshold == 0 {
		c.Threshold = 5 * time.Minute
	}
}

// Validate fills in the defaults and names the first field out of range.
func (c *Config) Validate() error {
	c.defaults()
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: "+f, append([]any{ErrBadConfig}, a...)...) }
	switch {
	case !slices.Contains(Policies(), c.Policy):
		return bad("policy %q (want one of %v)", c.Policy, Policies())
	case c.Jobs < 1 || c.Jobs > 1_000_000:
		return bad("jobs must be in 1..1000000, got %d", c.Jobs)
	case len(c.Speeds) < 2 || len(c.Speeds) > 10_000:
		return bad("speeds: want 2..10000 resources (replication needs two), got %d", len(c.Speeds))
	case !(c.ArrivalPerMin > 0) || math.IsInf(c.ArrivalPerMin, 0):
		return bad("arrival rate must be > 0 per minute, got %v", c.ArrivalPerMin)
	case c.RunMin <= 0 || c.RunMax < c.RunMin:
		return bad("run time range [%v, %v]: want 0 < min <= max", c.RunMin, c.RunMax)
	case dependable.ValidLambda(c.Lambda) != nil:
		return bad("λ %v must be finite and >= 0", c.Lambda)
	case !(c.Tight[0] > 0 && c.Tight[1] >= c.Tight[0]) || !(c.Loose[0] > 0 && c.Loose[1] >= c.Loose[0]):
		return bad("deadline slack ranges tight %v loose %v: want 0 < lo <= hi", c.Tight, c.Loose)
	case c.MaxAttempts < 1:
		return bad("max attempts must be >= 1, got %d", c.MaxAttempts)
	case c.History < 0 || c.Threshold < 0:
		return bad("history and threshold must be >= 0")
	}
	for i, j := range c.JobList {
		if j.ID != i || j.Base <= 0 || j.Arrival < 0 || (j.Deadline != 0 && j.Deadline <= j.Arrival) || (i > 0 && j.Arrival < c.JobList[i-1].Arrival) {
			return bad("job list[%d]: want ids 0, 1, ... in arrival order, base > 0 and a deadline (if any) after arrival", i)
		}
	}
	for i, o := range c.Outages {
		if o.Site < 0 || o.Site >= len(c.Speeds) || o.Up < o.Down || o.Down < 0 {
			return bad("outages[%d] = %+v does not fit %d resources", i, o, len(c.Speeds))
		}
	}
	for i, h := range c.Speeds {
		if !(h > 0) || math.IsInf(h, 0) {
			return bad("speeds[%d] = %v, want > 0", i, h)
		}
	}
	if err := c.Failure.Validate(); err != nil {
		return fmt.Errorf("%w: failure model: %w", ErrBadConfig, err)
	}
	return nil
}

// Job is one generated job.
type Job struct {
	ID       int
	Arrival  time.Duration // from the start
	Base     time.Duration // run time at h = 1
	Class    int
	Deadline time.Duration // from the start; 0 = none
}

// Workload draws the jobs of a config from its seed (its own PCG stream),
// or returns JobList.
func (c *Config) Workload() []Job {
	if c.JobList != nil {
		return slices.Clone(c.JobList)
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x6a6f6273)) // "jobs"
	minH := slices.Min(c.Speeds)
	jobs := make([]Job, c.Jobs)
	t := 0.0
	for i := range jobs {
		t += rng.ExpFloat64() / c.ArrivalPerMin * float64(time.Minute)
		base := c.RunMin + time.Duration(rng.Float64()*float64(c.RunMax-c.RunMin))
		j := Job{ID: i, Arrival: time.Duration(t), Base: base, Class: rng.IntN(3)}
		ctMin := float64(base) * minH
		switch j.Class {
		case ClassTight:
			j.Deadline = j.Arrival + time.Duration(ctMin*(c.Tight[0]+rng.Float64()*(c.Tight[1]-c.Tight[0])))
		case ClassLoose:
			j.Deadline = j.Arrival + time.Duration(ctMin*(c.Loose[0]+rng.Float64()*(c.Loose[1]-c.Loose[0])))
		}
		jobs[i] = j
	}
	return jobs
}
