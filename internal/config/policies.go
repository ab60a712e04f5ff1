package config

import (
	"encoding/hex"
	"fmt"
	"path"
	"strings"

	"github.com/gridsub/gridsub/bridge/jobfile"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/registry"
)

// policyKey is one extension point's configuration key beside the
// planner: its name (key) and the checksum of a plugin executable
// (key+"_sha256").
type policyKey struct {
	key       string
	kind      policy.Kind
	name, sum string
}

// policyKeys are broker.feasibility, admission, trust, tiering,
// remap.policy and order with what the configuration gives them.
func policyKeys(b *Broker) []policyKey {
	return []policyKey{
		{"broker.feasibility", policy.KindFeasibility, b.Feasibility, b.FeasibilitySHA256},
		{"broker.admission", policy.KindAdmission, b.Admission, b.AdmissionSHA256},
		{"broker.trust", policy.KindTrust, b.Trust, b.TrustSHA256},
		{"broker.tiering", policy.KindTiering, b.Tiering, b.TieringSHA256},
		{"broker.remap.policy", policy.KindRemap, b.Remap.Policy, b.Remap.PolicySHA256},
		{"broker.order", policy.KindOrder, b.Order, b.OrderSHA256},
	}
}

// validatePolicies checks broker.feasibility, admission, trust, tiering,
// remap.policy and order and their *_sha256 keys. Each names a built-in of its
// extension point ("" is the default) or, as broker.policy does, a policy
// plugin: plugin:/path/to/exe ARGS, whose checksum the *_sha256 key must
// give, or plugin:builtin:NAME with NAME a built-in of the kind (no
// checksum: it is this gridsub binary). An unknown name lists the valid
// ones and suggests the nearest.
func validatePolicies(b *Broker, bad func(key, format string, args ...any)) {
	for _, x := range policyKeys(b) {
		sumKey := x.key + "_sha256"
		rest, isPlugin := strings.CutPrefix(x.name, PlannerPluginPrefix)
		switch {
		case !isPlugin:
			if registry.Valid(x.kind, x.name) != nil {
				bad(x.key, "%s", unknownPolicy(x.kind, x.name, fmt.Sprintf("must name a built-in %s policy", x.kind),
					" (or a plugin: plugin:/path/to/exe ARGS, plugin:builtin:NAME)"))
			}
			if x.sum != "" {
				bad(sumKey, "is only for the %s policy plugin executable (%s: plugin:/path/to/exe); remove it", x.kind, x.key)
			}
		case strings.HasPrefix(rest, "builtin:"):
			if name := strings.TrimPrefix(rest, "builtin:"); name == "" || registry.Valid(x.kind, name) != nil {
				bad(x.key, "%s", unknownPolicy(x.kind, name, fmt.Sprintf("plugin:builtin: must be followed by a built-in %s policy's name", x.kind), ""))
			}
			if x.sum != "" {
				bad(sumKey, "a plugin:builtin: %s policy is this gridsub binary itself and has no checksum to give; remove it", x.kind)
			}
		default:
			f := strings.Fields(rest)
			if len(f) == 0 || !path.IsAbs(f[0]) {
				bad(x.key, "plugin: must be followed by the %s policy plugin executable's absolute path and its arguments (plugin:/path/to/exe ARGS), got %q", x.kind, x.name)
			}
			exe := "/path/to/exe"
			if len(f) > 0 {
				exe = f[0]
			}
			if sum, err := hex.DecodeString(x.sum); err != nil || len(sum) != 32 {
				k := sumKey[strings.LastIndexByte(sumKey, '.')+1:]
				bad(sumKey, "must be the %s policy plugin's SHA-256 as 64 hex digits, quoted (%s: \"...\"; sha256sum %s), got %q", x.kind, k, exe, x.sum)
			}
		}
	}
}

// unknownPolicy is the message for name, not a built-in of kind: what
// the key must be, the valid names, the nearest, and also what else it
// may be.
func unknownPolicy(kind policy.Kind, name, what, also string) string {
	valid := registry.NamesOf(kind)
	msg := fmt.Sprintf("%s (%s), got %q", what, strings.Join(valid, ", "), name)
	if sg := jobfile.Suggest(name, valid); sg != "" {
		msg += fmt.Sprintf("; did you mean %q?", sg)
	}
	return msg + also
}

// policySHA256 is the checksum of each extension point's plugin
// executable, by kind (assemble.Spec.PolicySHA256); kinds without one
// are absent.
func policySHA256(b *Broker) map[string]string {
	out := map[string]string{}
	for _, x := range policyKeys(b) {
		if x.sum != "" {
			out[string(x.kind)] = x.sum
		}
	}
	return out
}
