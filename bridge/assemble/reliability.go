package assemble

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/policy/dependable"
)

// The availability model (paper 004's Markov predictor, policy/dependable)
// of every assembled broker: it ranks the sites of QoS copies by reliability
// cost and learns from what the broker sees (a site whose status calls fail,
// a job or node lost, a recovery). Its learned state is a value in the
// store (bridge.ValueStore) under ReliabilityKey: loaded at Build, saved by
// SaveReliability when it changed.

// ReliabilityKey is the store value that holds the learned model (JSON,
// dependable.Predictor.MarshalJSON).
const ReliabilityKey = "reliability.predictor"

// maxReliabilityState bounds the stored model read at Build: far above a
// real one (a few hundred bytes per learned state), and below what could
// exhaust memory.
const maxReliabilityState = 32 << 20

// ReliabilityHorizon is the job length the sites' displayed reliability is
// for (gridsub sites, GET /v1/sites, /metrics).
const ReliabilityHorizon = time.Hour

// buildReliability loads the model from st (a fresh one when st keeps no
// values, has none stored, or holds one that is malformed: that one is kept
// under ReliabilityKey+".rejected" and a warning logged), and reports every
// configured site it does not know yet as up now: the first uptime counts
// from when the broker started watching the site. It returns the model and
// its Changed() as stored.
func buildReliability(ctx context.Context, st bridge.Store, names []string, now func() time.Time, log *slog.Logger) (*dependable.Live, uint64, error) {
	p, err := dependable.NewPredictor(dependable.Config{})
	if err != nil {
		return nil, 0, err
	}
	vs, _ := st.(bridge.ValueStore)
	if vs != nil {
		data, ok, err := vs.Value(ctx, ReliabilityKey)
		if err != nil {
			return nil, 0, fmt.Errorf("reading the learned site reliability (%s) from the store: %w", ReliabilityKey, err)
		}
		var bad error
		switch {
		case !ok:
		case len(data) > maxReliabilityState:
			bad = fmt.Errorf("%d bytes, more than the %d allowed", len(data), maxReliabilityState)
		default:
			bad = p.UnmarshalJSON(data) // validates everything; leaves p empty on error
		}
		if bad != nil {
			log.Warn("ignoring the stored site reliability model: it starts empty", "key", ReliabilityKey,
				"kept_as", ReliabilityKey+".rejected", "err", bad)
			if err := vs.SetValue(ctx, ReliabilityKey+".rejected", data); err != nil {
				return nil, 0, fmt.Errorf("keeping the rejected site reliability model: %w", err)
			}
		}
	}
	l := dependable.NewLive(p, now)
	saved := l.Changed()
	known := map[string]bool{}
	for _, v := range l.Sites() {
		known[v.Site] = true
	}
	at := now()
	for _, n := range names {
		if !known[n] {
			l.Observe(n, true, at)
		}
	}
	return l, saved, nil // the sites just added are not saved yet
}

// Reliability is the broker's availability model (nil when the caller set
// its own in Spec.Tiers.Reliability).
func (e *Env) Reliability() *dependable.Live { return e.rel }

// SaveReliability writes the model's learned state to the store when it
// changed since the last save (or load). It is a no-op without a model or a
// store that keeps values. Safe to call from one goroutine at a time.
func (e *Env) SaveReliability(ctx context.Context) error {
	if e.rel == nil {
		return nil
	}
	vs, ok := e.spec.Store.(bridge.ValueStore)
	if !ok {
		return nil
	}
	gen := e.rel.Changed()
	if gen == e.relSaved {
		return nil
	}
	data, err := e.rel.MarshalJSON()
	if err != nil {
		return fmt.Errorf("saving the site reliability model: %w", err)
	}
	if err := vs.SetValue(ctx, ReliabilityKey, data); err != nil {
		return fmt.Errorf("saving the site reliability model: %w", err)
	}
	e.relSaved = gen
	return nil
}

// SiteReliability is what the model knows of one site, for display.
type SiteReliability struct {
	Site string
	Up   bool
	// Since is when the site was last seen coming up (or going down).
	Since time.Time
	// States is the size of the site's learned chain (TTF states);
	// Failures the uptimes it ended (failures seen).
	States   int
	Failures int64
	MTTF     time.Duration
	// R is the reliability of a job of ReliabilityHorizon starting now.
	R float64
}

// SitesReliability lists the model's view of every configured site, in
// configuration order; nil without a model.
func (e *Env) SitesReliability() []SiteReliability {
	if e.rel == nil {
		return nil
	}
	views := map[string]dependable.SiteView{}
	for _, v := range e.rel.Sites() {
		views[v.Site] = v
	}
	out := make([]SiteReliability, 0, len(e.Sites))
	for _, s := range e.Sites {
		v, ok := views[s.Name]
		r := SiteReliability{Site: s.Name, Up: true, R: e.rel.Reliability(s.Name, ReliabilityHorizon)}
		if ok {
			r.Up, r.Since, r.States, r.Failures, r.MTTF = v.Up, v.Since, len(v.States), v.Failures, v.MTTF
		}
		out = append(out, r)
	}
	return out
}
