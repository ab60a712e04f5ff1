package dependable

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Event is what Observe learns about a site.
type Event int

// Events.
const (
	// Up: the site answers (first contact, or back after a Down: a repair).
	Up Event = iota + 1
	// Down: the site stopped answering (its controller or front end is
	// gone). Ends an uptime: its length is a TTF.
	Down
	// Fail: a failure the site survives at once (a node or a running job
	// lost while the site keeps answering). Ends an uptime (a TTF) and
	// starts the next at the same instant.
	Fail
)

var eventNames = [...]string{"", "up", "down", "fail"}

func (e Event) String() string {
	if e >= Up && e <= Fail {
		return eventNames[e]
	}
	return fmt.Sprintf("event(%d)", int(e))
}

// Defaults of Config.
const (
	DefaultThreshold = 10 * time.Minute
	DefaultMaxStates = 64
	// MaxSites bounds the sites a marshalled predictor may hold.
	MaxSites = 100_000
)

// Config tunes a Predictor.
type Config struct {
	// Threshold is the merge distance of the chains (default
	// DefaultThreshold). The paper leaves its value open.
	Threshold time.Duration
	// MaxStates bounds each chain's state space (default DefaultMaxStates,
	// at most 4096): beyond it a new TTF joins the nearest state.
	MaxStates int
	// Conditional reads equation (12) given the site's age:
	// r = Σ_{S_k > age+d} S_k·Q_qk / Σ_{S_k > age} S_k·Q_qk, the chance to
	// survive d more among the uptimes still possible; a site that has
	// outlived every uptime seen has r = 1. The default (false) is the
	// paper's formula as written, whose denominator counts every state, so
	// a site up longer than all its learned TTFs has r = 0 however stable.
	Conditional bool
}

func (c Config) withDefaults() (Config, error) {
	if c.Threshold < 0 || c.MaxStates < 0 || c.MaxStates > 4096 {
		return c, fmt.Errorf("%w: threshold must be >= 0 and max states in 0..4096, got %v and %d", ErrBadState, c.Threshold, c.MaxStates)
	}
	if c.Threshold == 0 {
		c.Threshold = DefaultThreshold
	}
	if c.MaxStates == 0 {
		c.MaxStates = DefaultMaxStates
	}
	return c, nil
}

// Predictor learns each site's availability from what happens to it and
// predicts the reliability r of a job there (see the package doc).
//
// Contract: every time is an argument, so the same observations give the
// same predictions. Observations of one site must come in time order (an
// older one wraps ErrOutOfOrder and changes nothing); sites are independent.
// A site never observed has reliability 1; a site observed Down has
// reliability 0 until it is observed Up. A Predictor is not safe for
// concurrent use: its owner serialises calls.
type Predictor struct {
	cfg   Config
	sites map[string]*siteState
}

type siteState struct {
	chain *Chain
	up    bool
	since time.Time // up since (or down since)
	last  time.Time // the last observation
}

// NewPredictor returns an empty predictor; a Config field out of range wraps
// ErrBadState.
func NewPredictor(cfg Config) (*Predictor, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Predictor{cfg: cfg, sites: map[string]*siteState{}}, nil
}

// Config returns the predictor's configuration, defaults filled in.
func (p *Predictor) Config() Config { return p.cfg }

// Observe learns one event of a site at time at. Up on a site that is up,
// and Down or Fail on one that is down, change nothing. The first
// observation of a site only sets its state (down for Down, else up since
// at): its earlier uptime is unknown, so it is no TTF. An empty site,
// an unknown event or a time older than the site's last observation is an
// error (ErrBadEvent, ErrOutOfOrder) and changes nothing.
func (p *Predictor) Observe(site string, ev Event, at time.Time) error {
	if site == "" {
		return fmt.Errorf("%w: empty site name", ErrBadEvent)
	}
	if ev < Up || ev > Fail {
		return fmt.Errorf("%w: site %s: unknown event %v", ErrBadEvent, site, ev)
	}
	if p.sites == nil { // the zero Predictor: default config
		p.cfg, _ = Config{}.withDefaults()
		p.sites = map[string]*siteState{}
	}
	s := p.sites[site]
	if s == nil {
		s = &siteState{chain: NewChain(p.cfg.Threshold, p.cfg.MaxStates), up: ev != Down, since: at, last: at}
		p.sites[site] = s
		return nil
	}
	if at.Before(s.last) {
		return fmt.Errorf("%w: site %s: %v at %s, after one at %s", ErrOutOfOrder, site, ev, at.UTC().Format(time.RFC3339Nano), s.last.UTC().Format(time.RFC3339Nano))
	}
	s.last = at
	switch {
	case ev == Up && !s.up:
		s.up, s.since = true, at
	case ev == Down && s.up:
		s.chain.Add(at.Sub(s.since))
		s.up, s.since = false, at
	case ev == Fail && s.up:
		s.chain.Add(at.Sub(s.since))
		s.since = at
	}
	return nil
}

// Curve returns site's reliability curve at time at (see Curve.R): the
// fast path for a planner that asks one site about many jobs.
func (p *Predictor) Curve(site string, at time.Time) Curve {
	s := p.sites[site]
	if s == nil {
		return Curve{}
	}
	if !s.up {
		return Curve{down: true}
	}
	cv := s.chain.Curve(at.Sub(s.since))
	cv.cond = p.cfg.Conditional
	return cv
}

// Reliability is r for a job that needs d on site from time at: the chance
// that the site, up since its last repair, stays up for d more.
func (p *Predictor) Reliability(site string, at time.Time, d time.Duration) float64 {
	return p.Curve(site, at).R(d)
}

// RC is the reliability cost (1 − r)·ct of a job whose completion time on
// site is ct (CT = run + transfer + queue length, see CT), from time at.
func (p *Predictor) RC(site string, at time.Time, ct time.Duration) time.Duration {
	return Cost(p.Reliability(site, at, ct), ct)
}

// CT is equation (7): run time + data transfer time + the site's schedule
// (queue) length.
func CT(run, transfer, queue time.Duration) time.Duration { return run + transfer + queue }

// Cost is equation (13): (1 − r)·ct, r clamped to [0, 1].
func Cost(r float64, ct time.Duration) time.Duration {
	r = min(max(r, 0), 1)
	return time.Duration((1 - r) * float64(ct))
}

// SiteView is what a predictor knows about one site, for display.
type SiteView struct {
	Site     string
	Up       bool
	Since    time.Time // up (or down) since
	Failures int64     // TTFs learned
	MTTF     time.Duration
	States   []StateView
	Current  int // index into States of the last failure's state, -1 none
}

// StateView is one TTF state: its mean and the TTFs merged into it.
type StateView struct {
	TTF   time.Duration
	Count int64
}

// Sites lists every known site, sorted by name.
func (p *Predictor) Sites() []SiteView {
	names := make([]string, 0, len(p.sites))
	for n := range p.sites {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]SiteView, 0, len(names))
	for _, n := range names {
		s := p.sites[n]
		v := SiteView{Site: n, Up: s.up, Since: s.since, Failures: s.chain.Failures(), Current: s.chain.cur}
		var sum float64
		for k := range s.chain.states {
			ttf, c := s.chain.State(k)
			v.States = append(v.States, StateView{TTF: ttf, Count: c})
			sum += s.chain.states[k] * float64(c)
		}
		if v.Failures > 0 {
			v.MTTF = time.Duration(sum / float64(v.Failures))
		}
		out = append(out, v)
	}
	return out
}

// Chain returns a copy of site's chain (nil for an unknown site).
func (p *Predictor) Chain(site string) *Chain {
	s := p.sites[site]
	if s == nil {
		return nil
	}
	c := *s.chain
	c.states, c.visits = slices.Clone(c.states), slices.Clone(c.visits)
	c.trans = make([][]int64, len(s.chain.trans))
	for i := range c.trans {
		c.trans[i] = slices.Clone(s.chain.trans[i])
	}
	return &c
}
