package faults

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/gridsub/gridsub/simbackend"
)

// ErrBadModel: a Model field out of range; the message names it.
var ErrBadModel = errors.New("faults: bad failure model")

// Model is a failure model.
type Model struct {
	// Shape (α) and Scale (η) of the Weibull time between two failures
	// anywhere in the grid.
	Shape float64
	Scale time.Duration
	// Beta is Zipf's β: how much the failures crowd on a few sites (0 =
	// evenly spread).
	Beta float64
	// Theta (θ, the shortest repair) and Omega (ω) of the Pareto repair
	// time.
	Theta time.Duration
	Omega float64
	// MaxRepair caps a repair (default 24 h).
	MaxRepair time.Duration
}

// DefaultMaxRepair is Model.MaxRepair's default.
const DefaultMaxRepair = 24 * time.Hour

// Validate names the first field out of range.
func (m Model) Validate() error {
	switch {
	case !(m.Shape > 0) || math.IsInf(m.Shape, 0):
		return fmt.Errorf("%w: shape α must be > 0, got %v", ErrBadModel, m.Shape)
	case m.Scale <= 0:
		return fmt.Errorf("%w: scale η must be > 0, got %v", ErrBadModel, m.Scale)
	case !(m.Beta >= 0) || math.IsInf(m.Beta, 0):
		return fmt.Errorf("%w: Zipf β must be >= 0, got %v", ErrBadModel, m.Beta)
	case m.Theta <= 0:
		return fmt.Errorf("%w: Pareto θ must be > 0, got %v", ErrBadModel, m.Theta)
	case !(m.Omega > 0) || math.IsInf(m.Omega, 0):
		return fmt.Errorf("%w: Pareto ω must be > 0, got %v", ErrBadModel, m.Omega)
	case m.MaxRepair < 0 || (m.MaxRepair > 0 && m.MaxRepair < m.Theta):
		return fmt.Errorf("%w: max repair must be 0 (default %v) or >= θ, got %v", ErrBadModel, DefaultMaxRepair, m.MaxRepair)
	}
	return nil
}

// RateScale is the Weibull scale η that gives a mean time between failures
// of 1/perMinute minutes at shape α: η = mean / Γ(1 + 1/α).
func RateScale(shape, perMinute float64) time.Duration {
	mean := float64(time.Minute) / perMinute
	return time.Duration(mean / math.Gamma(1+1/shape))
}

// MeanGap is the model's mean time between failures, η·Γ(1 + 1/α).
func (m Model) MeanGap() time.Duration {
	return time.Duration(float64(m.Scale) * math.Gamma(1+1/m.Shape))
}

// Paper004 returns the model of paper 004's low ("low") or high ("high")
// failure rate: the shape α its figures print (0.873 low, 0.871 high),
// Zipf β = 0.76 and Pareto θ = 127 s, ω = 0.87 as printed, and a scale η
// derived (RateScale) from Table 1's grid-wide failure arrival rates,
// 0.016 and 2.177 per minute: η = 18 000 as printed gives neither rate in
// seconds or minutes.
func Paper004(level string) (Model, error) {
	m := Model{Beta: 0.76, Theta: 127 * time.Second, Omega: 0.87, MaxRepair: DefaultMaxRepair}
	switch level {
	case "low":
		m.Shape, m.Scale = 0.873, RateScale(0.873, 0.016)
	case "high":
		m.Shape, m.Scale = 0.871, RateScale(0.871, 2.177)
	default:
		return Model{}, fmt.Errorf("%w: paper 004 failure level %q (want low or high)", ErrBadModel, level)
	}
	return m, nil
}

// Outage is one failure: Site (an index) is down over [Down, Up), offsets
// from the start of the log.
type Outage struct {
	Site     int
	Down, Up time.Duration
}

// Stats counts a log's draws.
type Stats struct {
	Failures int // outages in the log
	Absorbed int // failures that hit a site already down
	// PerSite counts each site's outages.
	PerSite []int
	// Rank[i] is site i's Zipf rank (1 = most failures expected).
	Rank []int
}

// Schedule draws a failure log for sites sites over [0, horizon), from seed
// alone: outages in order of Down (then site), none overlapping on a site.
func (m Model) Schedule(seed uint64, sites int, horizon time.Duration) ([]Outage, Stats, error) {
	if err := m.Validate(); err != nil {
		return nil, Stats{}, err
	}
	if sites < 1 || horizon < 0 {
		return nil, Stats{}, fmt.Errorf("%w: want >= 1 site and a horizon >= 0, got %d and %v", ErrBadModel, sites, horizon)
	}
	maxRep := m.MaxRepair
	if maxRep == 0 {
		maxRep = DefaultMaxRepair
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15^seed))
	// Ranks: a permutation drawn from the seed; cum holds Zipf's CDF by rank.
	bySite := rng.Perm(sites) // bySite[i] = rank-1 of site i
	siteOf := make([]int, sites)
	for s, r := range bySite {
		siteOf[r] = s
	}
	cum := make([]float64, sites)
	total := 0.0
	for r := range sites {
		total += math.Pow(float64(r+1), -m.Beta)
		cum[r] = total
	}
	st := Stats{PerSite: make([]int, sites), Rank: make([]int, sites)}
	for s, r := range bySite {
		st.Rank[s] = r + 1
	}
	upAt := make([]time.Duration, sites) // a site is down until upAt
	var out []Outage
	t := time.Duration(0)
	for {
		u := 1 - rng.Float64() // (0, 1]
		gap := float64(m.Scale) * math.Pow(-math.Log(u), 1/m.Shape)
		if gap >= float64(horizon-t) {
			break
		}
		t += time.Duration(gap)
		x := rng.Float64() * total
		r := sort.SearchFloat64s(cum, x)
		if r >= sites {
			r = sites - 1
		}
		site := siteOf[r]
		v := 1 - rng.Float64()
		rep := float64(m.Theta) * math.Pow(v, -1/m.Omega)
		repair := maxRep
		if rep < float64(maxRep) {
			repair = max(time.Duration(rep), m.Theta)
		}
		if t < upAt[site] {
			st.Absorbed++
			continue
		}
		upAt[site] = t + repair
		out = append(out, Outage{Site: site, Down: t, Up: t + repair})
		st.Failures++
		st.PerSite[site]++
	}
	return out, st, nil
}

// Inject schedules the outages on e, relative to start: at Down the site's
// Fail (reason "injected failure (paper 004 model)"), at Up its Repair.
// onEvent, if set, is called after each (site index, down or up, when). Two
// events at one instant run down before up, in log order.
func Inject(e *simbackend.Engine, sites []*simbackend.Site, start time.Time, outs []Outage, onEvent func(site int, down bool, at time.Time)) error {
	for _, o := range outs {
		if o.Site < 0 || o.Site >= len(sites) || o.Up < o.Down {
			return fmt.Errorf("%w: outage %+v does not fit %d sites", ErrBadModel, o, len(sites))
		}
	}
	for _, o := range outs {
		s, idx := sites[o.Site], o.Site
		e.AtClass(start.Add(o.Down), simbackend.ClassEarly, func() {
			s.Fail(fmt.Sprintf("injected failure until %s", start.Add(o.Up).UTC().Format(time.RFC3339)))
			if onEvent != nil {
				onEvent(idx, true, start.Add(o.Down))
			}
		})
		e.AtClass(start.Add(o.Up), simbackend.ClassDefault, func() {
			s.Repair()
			if onEvent != nil {
				onEvent(idx, false, start.Add(o.Up))
			}
		})
	}
	return nil
}
