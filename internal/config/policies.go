package config

import (
	"fmt"
	"strings"

	"github.com/gridsub/gridsub/bridge/jobfile"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/registry"
)

// validatePolicies checks that broker.feasibility, admission, trust,
// tiering and remap.policy name built-ins of their extension point ("" is
// the default); an unknown name lists the valid ones and suggests the
// nearest.
func validatePolicies(b *Broker, bad func(key, format string, args ...any)) {
	for _, x := range []struct {
		key  string
		kind policy.Kind
		name string
	}{
		{"broker.feasibility", policy.KindFeasibility, b.Feasibility},
		{"broker.admission", policy.KindAdmission, b.Admission},
		{"broker.trust", policy.KindTrust, b.Trust},
		{"broker.tiering", policy.KindTiering, b.Tiering},
		{"broker.remap.policy", policy.KindRemap, b.Remap.Policy},
	} {
		if registry.Valid(x.kind, x.name) == nil {
			continue
		}
		valid := registry.NamesOf(x.kind)
		msg := fmt.Sprintf("must name a built-in %s policy (%s), got %q", x.kind, strings.Join(valid, ", "), x.name)
		if sg := jobfile.Suggest(x.name, valid); sg != "" {
			msg += fmt.Sprintf("; did you mean %q?", sg)
		}
		bad(x.key, "%s", msg)
	}
}
