package plugins

import "github.com/gridsub/gridsub/policy/registry"

// The catalog's built-ins of the six policy kinds beside the planner,
// from policy/registry ("" is a kind's default). Their out-of-process
// loader is policyrpc's (RegisterPolicyLoader from its init), as
// plannerrpc's is the planner's.
func init() {
	policyMu.Lock()
	defer policyMu.Unlock()
	for kind, b := range map[string]func(name string, _ PolicyInput) (any, error){
		KindFeasibility: func(n string, _ PolicyInput) (any, error) { return registry.Feasibility(n) },
		KindAdmission:   func(n string, _ PolicyInput) (any, error) { return registry.Admission(n) },
		KindTrust:       func(n string, _ PolicyInput) (any, error) { return registry.Trust(n) },
		KindTiering:     func(n string, _ PolicyInput) (any, error) { return registry.Tiering(n) },
		KindRemap:       func(n string, _ PolicyInput) (any, error) { return registry.Remap(n) },
		KindOrder:       func(n string, _ PolicyInput) (any, error) { return registry.Order(n) },
	} {
		k := policyKinds[kind]
		if k == nil {
			k = &PolicyKind{}
			policyKinds[kind] = k
		}
		k.Builtin = b
	}
}
