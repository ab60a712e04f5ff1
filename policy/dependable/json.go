package dependable

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"time"
)

// stateVersion is the version of the marshalled form.
const stateVersion = 1

type jsonPredictor struct {
	Version     int                  `json:"version"`
	Threshold   int64                `json:"threshold_ns"`
	MaxStates   int                  `json:"max_states"`
	Conditional bool                 `json:"conditional,omitempty"`
	Sites       map[string]*jsonSite `json:"sites"`
}

type jsonSite struct {
	Up      bool      `json:"up"`
	Since   time.Time `json:"since"`
	Last    time.Time `json:"last"`
	TTF     []float64 `json:"ttf_ns"` // S_k
	Visits  []int64   `json:"visits"`
	Trans   [][]int64 `json:"trans"` // n_qk
	Current int       `json:"current"`
}

// MarshalJSON writes everything the predictor has learned: its config and,
// per site, up/down and since when, the chain's states, visit counts,
// transition counts and current state. Keys are sorted, so equal predictors
// give equal bytes.
func (p *Predictor) MarshalJSON() ([]byte, error) {
	out := jsonPredictor{Version: stateVersion, Threshold: int64(p.cfg.Threshold), MaxStates: p.cfg.MaxStates, Conditional: p.cfg.Conditional, Sites: map[string]*jsonSite{}}
	for n, s := range p.sites {
		c := s.chain
		js := &jsonSite{Up: s.up, Since: s.since, Last: s.last, TTF: c.states, Visits: c.visits, Trans: c.trans, Current: c.cur}
		if js.TTF == nil {
			js.TTF, js.Visits, js.Trans = []float64{}, []int64{}, [][]int64{}
		}
		out.Sites[n] = js
	}
	return json.Marshal(out) // encoding/json sorts map keys
}

// UnmarshalJSON replaces p with a marshalled predictor after checking it
// whole: the version, the config's ranges, at most MaxSites sites, and for
// each site states and counts that agree in size, finite non-negative TTFs,
// non-negative counts and a current state in range. Anything else wraps
// ErrBadState naming the site and field, and leaves p unchanged.
func (p *Predictor) UnmarshalJSON(data []byte) error {
	var in jsonPredictor
	if err := json.Unmarshal(data, &in); err != nil {
		return fmt.Errorf("%w: %w", ErrBadState, err)
	}
	if in.Version != stateVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrBadState, in.Version, stateVersion)
	}
	if in.Threshold <= 0 || in.MaxStates <= 0 {
		return fmt.Errorf("%w: threshold_ns and max_states must be > 0, got %d and %d", ErrBadState, in.Threshold, in.MaxStates)
	}
	cfg, err := Config{Threshold: time.Duration(in.Threshold), MaxStates: in.MaxStates, Conditional: in.Conditional}.withDefaults()
	if err != nil {
		return err
	}
	if len(in.Sites) > MaxSites {
		return fmt.Errorf("%w: %d sites, at most %d", ErrBadState, len(in.Sites), MaxSites)
	}
	names := make([]string, 0, len(in.Sites))
	for n := range in.Sites {
		names = append(names, n)
	}
	sort.Strings(names)
	sites := make(map[string]*siteState, len(names))
	for _, n := range names {
		js := in.Sites[n]
		if n == "" || js == nil {
			return fmt.Errorf("%w: a site with an empty name or no state", ErrBadState)
		}
		m := len(js.TTF)
		switch {
		case m > cfg.MaxStates:
			return fmt.Errorf("%w: site %s: %d states, max_states is %d", ErrBadState, n, m, cfg.MaxStates)
		case len(js.Visits) != m || len(js.Trans) != m:
			return fmt.Errorf("%w: site %s: %d states but %d visit counts and %d transition rows", ErrBadState, n, m, len(js.Visits), len(js.Trans))
		case js.Current < -1 || js.Current >= m || (m > 0 && js.Current < 0):
			return fmt.Errorf("%w: site %s: current state %d out of range for %d states", ErrBadState, n, js.Current, m)
		case js.Last.Before(js.Since):
			return fmt.Errorf("%w: site %s: last observation before since", ErrBadState, n)
		}
		for k := range m {
			if t := js.TTF[k]; math.IsNaN(t) || math.IsInf(t, 0) || t < 0 || t > math.MaxInt64 {
				return fmt.Errorf("%w: site %s: ttf_ns[%d] = %v is not a finite duration >= 0", ErrBadState, n, k, t)
			}
			if js.Visits[k] < 1 {
				return fmt.Errorf("%w: site %s: visits[%d] = %d, want >= 1", ErrBadState, n, k, js.Visits[k])
			}
			if len(js.Trans[k]) != m {
				return fmt.Errorf("%w: site %s: trans[%d] has %d entries, want %d", ErrBadState, n, k, len(js.Trans[k]), m)
			}
			for i, c := range js.Trans[k] {
				if c < 0 {
					return fmt.Errorf("%w: site %s: trans[%d][%d] = %d < 0", ErrBadState, n, k, i, c)
				}
			}
		}
		c := NewChain(cfg.Threshold, cfg.MaxStates)
		c.states, c.visits, c.trans, c.cur = js.TTF, js.Visits, js.Trans, js.Current
		if m == 0 {
			c.states, c.visits, c.trans = nil, nil, nil
		}
		sites[n] = &siteState{chain: c, up: js.Up, since: js.Since, last: js.Last}
	}
	p.cfg, p.sites = cfg, sites
	return nil
}
