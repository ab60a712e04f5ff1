package assemble

import (
	"fmt"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/policy/registry"
)

// PolicyNames names the built-in of each extension point beside the
// planner (broker.feasibility, admission, trust, tiering, remap.policy);
// "" = the kind's default (registry.Default).
type PolicyNames struct {
	Feasibility, Admission, Trust, Tiering, Remap string
}

// build looks the names up in the policy registry.
func (n PolicyNames) build() (bridge.Policies, error) {
	var p bridge.Policies
	var err error
	if p.Feasibility, err = registry.Feasibility(n.Feasibility); err != nil {
		return p, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if p.Admission, err = registry.Admission(n.Admission); err != nil {
		return p, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if p.Trust, err = registry.Trust(n.Trust); err != nil {
		return p, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if p.Tiering, err = registry.Tiering(n.Tiering); err != nil {
		return p, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if p.Remap, err = registry.Remap(n.Remap); err != nil {
		return p, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return p, nil
}
