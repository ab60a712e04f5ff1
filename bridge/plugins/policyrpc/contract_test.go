package policyrpc

import (
	"testing"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/policytest"
	"github.com/gridsub/gridsub/policy/registry"
)

// TestContractsThroughTheSeam runs policy/policytest's contract checks for
// every built-in of every kind on the host's client of it, served over a
// real gRPC connection: what holds in process holds through the seam.
func TestContractsThroughTheSeam(t *testing.T) {
	for _, name := range registry.NamesOf(policy.KindFeasibility) {
		t.Run("feasibility/"+name, func(t *testing.T) {
			impl, err := registry.Feasibility(name)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := Test(t, plugins.KindFeasibility, impl)
			policytest.Feasibility(t, raw.(*FeasibilityClient))
		})
	}
	for _, name := range registry.NamesOf(policy.KindAdmission) {
		t.Run("admission/"+name, func(t *testing.T) {
			impl, err := registry.Admission(name)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := Test(t, plugins.KindAdmission, impl)
			policytest.Admission(t, raw.(*AdmissionClient))
		})
	}
	for _, name := range registry.NamesOf(policy.KindTrust) {
		t.Run("trust/"+name, func(t *testing.T) {
			impl, err := registry.Trust(name)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := Test(t, plugins.KindTrust, impl)
			policytest.Trust(t, raw.(*TrustClient))
		})
	}
	for _, name := range registry.NamesOf(policy.KindTiering) {
		t.Run("tiering/"+name, func(t *testing.T) {
			impl, err := registry.Tiering(name)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := Test(t, plugins.KindTiering, impl)
			c := raw.(*TieringClient)
			policytest.Tiering(t, c)
			if err := c.Err(); err != nil {
				t.Errorf("a call failed: %v", err)
			}
		})
	}
	for _, name := range registry.NamesOf(policy.KindRemap) {
		t.Run("remap/"+name, func(t *testing.T) {
			impl, err := registry.Remap(name)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := Test(t, plugins.KindRemap, impl)
			policytest.Remap(t, raw.(*RemapClient))
		})
	}
	for _, name := range registry.NamesOf(policy.KindOrder) {
		t.Run("order/"+name, func(t *testing.T) {
			impl, err := registry.Order(name)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := Test(t, plugins.KindOrder, impl)
			policytest.Order(t, raw.(*OrderClient))
		})
	}
}
