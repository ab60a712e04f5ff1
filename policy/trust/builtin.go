package trust

import (
	"fmt"
	"strings"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// BuiltinName is the name of the built-in trust policy (policy.Trust):
// paper 002's model with DefaultModel's constants.
const BuiltinName = "paper002"

// Names lists the built-in trust policies.
func Names() []string { return []string{BuiltinName} }

// ByName returns the built-in trust policy of that name; the error names
// the valid ones.
func ByName(name string) (policy.Trust, error) {
	if strings.ToLower(strings.TrimSpace(name)) == BuiltinName {
		return Policy{Model: DefaultModel()}, nil
	}
	return nil, fmt.Errorf("unknown trust %q: valid are %s", name, strings.Join(Names(), ", "))
}

// Policy is a Model as a policy.Trust: the scores Model.Scores gives from
// the observer to each site, and Decay of each count.
type Policy struct{ Model Model }

var _ policy.Trust = Policy{}

// Name is BuiltinName.
func (Policy) Name() string { return BuiltinName }

// Scores returns every named site's score as in.Observer sees it. The
// broker (Observer.Name "") scores with Model.Scores; a named observer (a
// cluster or a local area that asks, as in paper 002's experiment) with
// Model.Score from it to each site, over the observer and the sites as
// nodes. The error wraps ErrModel when the model is out of range.
func (p Policy) Scores(in *policy.TrustInput) (map[string]float64, error) {
	if err := p.Model.Validate(); err != nil {
		return nil, err
	}
	out := make(map[Key]Outcomes, len(in.Outcomes))
	for k, o := range in.Outcomes {
		out[Key(k)] = Outcomes(o)
	}
	if in.Observer.Name == "" {
		sites := make([]Node, len(in.Sites))
		for i, s := range in.Sites {
			sites[i] = Node(s)
		}
		return p.Model.Scores(Node(in.Observer), sites, out), nil
	}
	nodes := make(map[string]Node, len(in.Sites)+1)
	nodes[in.Observer.Name] = Node(in.Observer)
	for _, s := range in.Sites {
		if s.Name != "" {
			nodes[s.Name] = Node(s)
		}
	}
	scores := make(map[string]float64, len(in.Sites))
	score := p.Model.scorer(nodes, out, in.Observer.Name) // Model.Score from the observer
	for _, s := range in.Sites {
		if s.Name != "" {
			scores[s.Name] = score(s.Name)
		}
	}
	return scores, nil
}

// Decay ages each count by elapsed at halfLife (Decay).
func (Policy) Decay(o policy.Outcomes, elapsed, halfLife time.Duration) policy.Outcomes {
	return policy.Outcomes{Completed: Decay(o.Completed, elapsed, halfLife), Failed: Decay(o.Failed, elapsed, halfLife),
		Unreachable: Decay(o.Unreachable, elapsed, halfLife)}
}
