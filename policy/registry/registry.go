// Package registry finds a built-in planner by the name a config file
// gives it (broker.policy, an experiment's policies, `gridsub serve
// planner NAME`): paper 000's co-allocation planners (policy/coalloc) and
// paper 003's mapping heuristics (policy/benefit).
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

// ErrUnknown: no built-in planner has the name.
var ErrUnknown = errors.New("unknown planner")

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
