// Package registry finds a built-in policy by the name a config file gives
// it, one lookup per extension point (policy.Kinds): planners (ByName:
// broker.policy, an experiment's policies, `gridsub serve planner NAME`;
// paper 000's co-allocation planners in policy/coalloc and paper 003's
// mapping heuristics in policy/benefit), Feasibility, Admission, Trust,
// Tiering and Remap. NamesOf lists a kind's built-ins, the default first.
package registry

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/benefit"
	"github.com/gridsub/gridsub/policy/coalloc"
)

// ErrUnknown: no built-in of the kind has the name.
var ErrUnknown = errors.New("unknown policy")

// Names lists every built-in planner name.
func Names() []string { return append(coalloc.Names(), benefit.Names()...) }

// ByName returns the built-in planner of that name (case and surrounding
// blanks ignored). The error names the valid ones and wraps ErrUnknown.
func ByName(name string) (policy.Planner, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if slices.Contains(benefit.Names(), n) {
		return benefit.ByName(n)
	}
	if p, err := coalloc.ByName(n); err == nil {
		return p, nil
	}
	return nil, fmt.Errorf("%w: planner name %q: valid are %s", ErrUnknown, name, strings.Join(Names(), ", "))
}
