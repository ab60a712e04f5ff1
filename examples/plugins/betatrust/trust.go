package betatrust

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Name is the model's name as a policy.Trust.
const Name = "beta"

// Model is the beta reputation model.
type Model struct {
	// Witness weighs outcomes other nodes counted against the observer's
	// own, in [0, 1] (New: 0.5).
	Witness float64
}

var _ policy.Trust = Model{}

// New is the model with its default witness weight.
func New() Model { return Model{Witness: 0.5} }

// Name implements policy.Trust.
func (Model) Name() string { return Name }

// Scores implements policy.Trust: every named site's score (the package
// doc's formula). The error is for a witness weight out of range.
func (m Model) Scores(in *policy.TrustInput) (map[string]float64, error) {
	if !(m.Witness >= 0 && m.Witness <= 1) {
		return nil, fmt.Errorf("betatrust: witness weight %v is not in [0, 1]", m.Witness)
	}
	keys := make([]policy.TrustKey, 0, len(in.Outcomes))
	for k := range in.Outcomes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b policy.TrustKey) int { return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To)) })
	r, f := map[string]float64{}, map[string]float64{}
	for _, k := range keys {
		o, w := in.Outcomes[k], 1.0
		if k.From != in.Observer.Name {
			w = m.Witness
		}
		r[k.To] += w * max(o.Completed, 0)
		f[k.To] += w * (max(o.Failed, 0) + max(o.Unreachable, 0))
	}
	out := make(map[string]float64, len(in.Sites))
	for _, s := range in.Sites {
		if s.Name == "" {
			continue
		}
		out[s.Name] = (r[s.Name] + 2) / (r[s.Name] + f[s.Name] + 2)
	}
	return out, nil
}

// Decay implements policy.Trust: each count times 2^(−elapsed/halfLife).
func (Model) Decay(o policy.Outcomes, elapsed, halfLife time.Duration) policy.Outcomes {
	if halfLife <= 0 || elapsed <= 0 {
		return o
	}
	k := math.Exp2(-elapsed.Seconds() / halfLife.Seconds())
	return policy.Outcomes{Completed: o.Completed * k, Failed: o.Failed * k, Unreachable: o.Unreachable * k}
}
