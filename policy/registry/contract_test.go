package registry

import (
	"testing"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/policytest"
)

// Every built-in of every extension point keeps its interface's contract.
func TestBuiltinsKeepTheirContracts(t *testing.T) {
	for _, k := range Kinds() {
		if k == policy.KindPlanner {
			continue // planners have their own property and replay tests
		}
		for _, n := range NamesOf(k) {
			t.Run(string(k)+"/"+n, func(t *testing.T) {
				switch k {
				case policy.KindFeasibility:
					f, _ := Feasibility(n)
					policytest.Feasibility(t, f)
				case policy.KindAdmission:
					a, _ := Admission(n)
					policytest.Admission(t, a)
				case policy.KindTrust:
					tr, _ := Trust(n)
					policytest.Trust(t, tr)
				case policy.KindTiering:
					tr, _ := Tiering(n)
					policytest.Tiering(t, tr)
				case policy.KindRemap:
					r, _ := Remap(n)
					policytest.Remap(t, r)
				case policy.KindOrder:
					o, _ := Order(n)
					policytest.Order(t, o)
				default:
					t.Fatalf("no contract test for kind %s", k)
				}
			})
		}
	}
}
