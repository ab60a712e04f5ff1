package assemble

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/registry"
)

// The configured names reach the broker, and an unknown one is a
// configuration error listing the valid names.
func TestPolicyNamesReachTheBroker(t *testing.T) {
	ctx := context.Background()
	spec := simSpec(bridge.NewMemStore(), epoch)
	spec.Policies = PolicyNames{Admission: "srrm", Trust: "paper002", Order: "fairshare"}
	e, err := Build(ctx, spec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got := e.Broker.PolicyNames()
	for k, want := range map[policy.Kind]string{policy.KindFeasibility: "capacity", policy.KindAdmission: "srrm",
		policy.KindTrust: "paper002", policy.KindTiering: "dgjs", policy.KindRemap: "gain", policy.KindOrder: "fairshare"} {
		if got[k] != want {
			t.Fatalf("%s: %q, want %q (all: %v)", k, got[k], want, got)
		}
	}
	for _, bad := range []PolicyNames{{Feasibility: "x"}, {Admission: "drm"}, {Trust: "x"}, {Tiering: "x"}, {Remap: "x"}, {Order: "lottery"}} {
		spec := simSpec(bridge.NewMemStore(), epoch)
		spec.Policies = bad
		_, err := Build(ctx, spec, Options{})
		if !errors.Is(err, ErrConfig) || !errors.Is(err, registry.ErrUnknown) || !strings.Contains(err.Error(), "valid are") {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
}
