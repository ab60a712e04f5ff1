package registry

import (
	"fmt"
	"strings"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/dependable"
	"github.com/gridsub/gridsub/policy/fairshare"
	"github.com/gridsub/gridsub/policy/feasible"
	"github.com/gridsub/gridsub/policy/remap"
	"github.com/gridsub/gridsub/policy/reserve"
	"github.com/gridsub/gridsub/policy/trust"
)

// Kinds lists the extension points that have built-ins, in a fixed order.
func Kinds() []policy.Kind { return policy.Kinds() }

// NamesOf lists the built-ins of a kind (of every kind but planners, the
// default first); nil for a kind that is not one of Kinds.
func NamesOf(kind policy.Kind) []string {
	switch kind {
	case policy.KindPlanner:
		return Names()
	case policy.KindFeasibility:
		return feasible.Names()
	case policy.KindAdmission:
		return reserve.Names()
	case policy.KindTrust:
		return trust.Names()
	case policy.KindTiering:
		return dependable.TieringNames()
	case policy.KindRemap:
		return remap.Names()
	case policy.KindOrder:
		return fairshare.Names()
	}
	return nil
}

// Default is the name of the built-in a broker uses for a kind when its
// configuration names none ("" for a kind that is not one of Kinds).
func Default(kind policy.Kind) string {
	if kind == policy.KindPlanner {
		if p, err := ByName("greedy"); err == nil { // the config's default broker.policy
			return p.Name()
		}
	}
	if n := NamesOf(kind); len(n) > 0 {
		return n[0]
	}
	return ""
}

// unknown is the error for a name no built-in of kind has.
func unknown(kind policy.Kind, name string) error {
	return fmt.Errorf("%w: %s name %q: valid are %s", ErrUnknown, kind, name, strings.Join(NamesOf(kind), ", "))
}

// Feasibility returns the built-in feasibility check of that name ("" is
// the default). Errors wrap ErrUnknown and name the valid ones.
func Feasibility(name string) (policy.Feasibility, error) {
	f, err := feasible.ByName(orDefault(policy.KindFeasibility, name))
	if err != nil {
		return nil, unknown(policy.KindFeasibility, name)
	}
	return f, nil
}

// Admission returns the built-in reservation mechanism of that name ("" is
// the default, drrm). Errors wrap ErrUnknown and name the valid ones.
func Admission(name string) (policy.Admission, error) {
	a, err := reserve.ByName(orDefault(policy.KindAdmission, name))
	if err != nil {
		return nil, unknown(policy.KindAdmission, name)
	}
	return a, nil
}

// Trust returns the built-in trust policy of that name ("" is the default,
// paper002). Errors wrap ErrUnknown and name the valid ones.
func Trust(name string) (policy.Trust, error) {
	t, err := trust.ByName(orDefault(policy.KindTrust, name))
	if err != nil {
		return nil, unknown(policy.KindTrust, name)
	}
	return t, nil
}

// Tiering returns the built-in tiering policy of that name ("" is the
// default, dgjs). Errors wrap ErrUnknown and name the valid ones.
func Tiering(name string) (policy.Tiering, error) {
	t, err := dependable.TieringByName(orDefault(policy.KindTiering, name))
	if err != nil {
		return nil, unknown(policy.KindTiering, name)
	}
	return t, nil
}

// Remap returns the built-in remapping policy of that name ("" is the
// default, gain). Errors wrap ErrUnknown and name the valid ones.
func Remap(name string) (policy.Remap, error) {
	r, err := remap.ByName(orDefault(policy.KindRemap, name))
	if err != nil {
		return nil, unknown(policy.KindRemap, name)
	}
	return r, nil
}

// Order returns the built-in queue order of that name ("" is the
// default, fcfs). Errors wrap ErrUnknown and name the valid ones.
func Order(name string) (policy.Order, error) {
	o, err := fairshare.ByName(orDefault(policy.KindOrder, name))
	if err != nil {
		return nil, unknown(policy.KindOrder, name)
	}
	return o, nil
}

// Valid checks that a built-in of kind has the name ("" names the
// default); the error wraps ErrUnknown and names the valid ones.
func Valid(kind policy.Kind, name string) error {
	var err error
	switch kind {
	case policy.KindPlanner:
		_, err = ByName(name)
	case policy.KindFeasibility:
		_, err = Feasibility(name)
	case policy.KindAdmission:
		_, err = Admission(name)
	case policy.KindTrust:
		_, err = Trust(name)
	case policy.KindTiering:
		_, err = Tiering(name)
	case policy.KindRemap:
		_, err = Remap(name)
	case policy.KindOrder:
		_, err = Order(name)
	default:
		err = fmt.Errorf("%w: no extension point is called %q", ErrUnknown, kind)
	}
	return err
}

func orDefault(kind policy.Kind, name string) string {
	if strings.TrimSpace(name) == "" {
		return Default(kind)
	}
	return name
}
