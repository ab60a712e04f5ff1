package plugins_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/gridsub/gridsub/bridge/plugins"
	_ "github.com/gridsub/gridsub/bridge/plugins/plannerrpc" // installs the planner kind's loader
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/trust"
)

// TestPolicyCatalog: every policy is built by kind and reference in one
// way; what a reference cannot name fails before anything starts.
func TestPolicyCatalog(t *testing.T) {
	ctx := context.Background()
	inst, err := plugins.Policy(ctx, plugins.PolicySpec{Kind: plugins.KindPlanner, Ref: "greedy-easy"})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := inst.Value.(policy.Planner); !ok || p.Name() != "greedy-easy" || inst.Mode != plugins.ModeInProcess || inst.Plugin != nil {
		t.Errorf("greedy-easy: %+v", inst)
	}
	inst, err = plugins.Policy(ctx, plugins.PolicySpec{Kind: plugins.KindPlanner, Ref: trust.PlannerName,
		Input: plugins.PolicyInput{Areas: map[string]string{"a": "north"}}})
	if err != nil {
		t.Fatal(err)
	}
	if tp, ok := inst.Value.(*trust.Planner); !ok || tp.Areas["a"] != "north" {
		t.Errorf("trust-min-min did not get the sites' areas: %#v", inst.Value)
	}
	for _, c := range []struct {
		spec plugins.PolicySpec
		want error
	}{
		{plugins.PolicySpec{Kind: "nosuchkind", Ref: "x"}, plugins.ErrUnknownPlugin},
		{plugins.PolicySpec{Kind: plugins.KindPlanner, Ref: "plugin:"}, plugins.ErrBadRef},
		{plugins.PolicySpec{Kind: plugins.KindPlanner, Ref: "plugin:builtin:"}, plugins.ErrBadRef},
		{plugins.PolicySpec{Kind: plugins.KindPlanner, Ref: "plugin:/opt/planner -v"}, plugins.ErrBadRef}, // no sha256
		{plugins.PolicySpec{Kind: plugins.KindPlanner, Ref: "no-such-planner"}, nil},
		{plugins.PolicySpec{Kind: plugins.KindPlanner, Ref: "plugin:builtin:no-such-planner"}, nil},
		// trust-min-min needs the broker's sites: it does not run isolated.
		{plugins.PolicySpec{Kind: plugins.KindPlanner, Ref: "plugin:builtin:" + trust.PlannerName}, nil},
	} {
		_, err := plugins.Policy(ctx, c.spec)
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s %q: %v, want an error (%v)", c.spec.Kind, c.spec.Ref, err, c.want)
		}
	}
	// The planner, and the six kinds catalog_policykinds.go adds.
	if ks := plugins.PolicyKinds(); len(ks) != 7 || !slices.Contains(ks, plugins.KindPlanner) || !slices.Contains(ks, plugins.KindTrust) || !slices.Contains(ks, plugins.KindOrder) {
		t.Errorf("policy kinds %v", ks)
	}
}
