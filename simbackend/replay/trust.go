package replay

import (
	"time"

	"github.com/gridsub/gridsub/policy"
)

// trustLearner learns the sites' trust during a replay as the live
// broker's daemon does (bridge/daemon, trust.go): every job that ends
// counts as completed or failed at each site it ran on, counts age by the
// half-life (the policy's Decay, in virtual time), and the policy's scores
// from the broker (the observer, From "") to each site are what the
// planner sees as Snapshot.Sites[i].Trust.
type trustLearner struct {
	tp       policy.Trust
	halfLife time.Duration
	sites    []policy.TrustNode
	counts   []policy.Outcomes
	at       []time.Time // when counts[i] was last aged
	dirty    bool
}

func newTrustLearner(tp policy.Trust, halfLife time.Duration, sites []Site) *trustLearner {
	l := &trustLearner{tp: tp, halfLife: halfLife, sites: make([]policy.TrustNode, len(sites)),
		counts: make([]policy.Outcomes, len(sites)), at: make([]time.Time, len(sites))}
	for i, s := range sites {
		h := s.H
		if h <= 0 {
			h = 1
		}
		l.sites[i] = policy.TrustNode{Name: s.Name, Power: float64(s.Nodes) / h} // the daemon's power: nodes / h
	}
	return l
}

// age brings site i's counts to now.
func (l *trustLearner) age(i int, now time.Time) {
	if !l.at[i].IsZero() && now.After(l.at[i]) {
		l.counts[i] = l.tp.Decay(l.counts[i], now.Sub(l.at[i]), l.halfLife)
	}
	l.at[i] = now
}

// outcome counts one job's end at site i.
func (l *trustLearner) outcome(i int, ok bool, now time.Time) {
	l.age(i, now)
	if ok {
		l.counts[i].Completed++
	} else {
		l.counts[i].Failed++
	}
	l.dirty = true
}

// scores are the policy's scores at now when an outcome came in since the
// last call; nil when nothing changed.
func (l *trustLearner) scores(now time.Time) (map[string]float64, error) {
	if !l.dirty {
		return nil, nil
	}
	l.dirty = false
	out := make(map[policy.TrustKey]policy.Outcomes, len(l.sites))
	for i, s := range l.sites {
		l.age(i, now)
		out[policy.TrustKey{To: s.Name}] = l.counts[i]
	}
	return l.tp.Scores(&policy.TrustInput{Sites: l.sites, Outcomes: out})
}
