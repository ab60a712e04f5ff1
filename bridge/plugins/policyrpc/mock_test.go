package policyrpc

import (
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Function-field mocks of every kind (PLUGIN-STYLE §6): a nil field
// answers the zero value.

type mockTrust struct {
	scores func(*policy.TrustInput) (map[string]float64, error)
	decay  func(policy.Outcomes, time.Duration, time.Duration) policy.Outcomes
}

func (mockTrust) Name() string { return "mock-trust" }
func (m mockTrust) Scores(in *policy.TrustInput) (map[string]float64, error) {
	if m.scores == nil {
		return nil, nil
	}
	return m.scores(in)
}
func (m mockTrust) Decay(o policy.Outcomes, e, h time.Duration) policy.Outcomes {
	if m.decay == nil {
		return o
	}
	return m.decay(o, e, h)
}

type mockRemap struct {
	moves func(*policy.RemapInput) ([]policy.Move, error)
}

func (mockRemap) Name() string                                         { return "mock-remap" }
func (m mockRemap) Moves(in *policy.RemapInput) ([]policy.Move, error) { return m.moves(in) }

type mockTiering struct {
	tier   func(*policy.TierDemand, []policy.Site) (policy.Tier, string)
	copies func(*policy.CopyInput) ([]policy.Part, []policy.Part)
	backup func(*policy.BackupInput) policy.Backup
}

func (mockTiering) Name() string { return "mock-tiering" }
func (m mockTiering) Tier(d *policy.TierDemand, s []policy.Site) (policy.Tier, string) {
	return m.tier(d, s)
}
func (m mockTiering) Copies(in *policy.CopyInput) ([]policy.Part, []policy.Part) { return m.copies(in) }
func (m mockTiering) Backup(in *policy.BackupInput) policy.Backup                { return m.backup(in) }

type mockFeasibility struct {
	feasible func(*policy.Demand, *policy.Snapshot) (policy.Verdict, error)
	late     func(*policy.Demand, *policy.Snapshot) (string, error)
}

func (mockFeasibility) Name() string { return "mock-feasibility" }
func (m mockFeasibility) Feasible(d *policy.Demand, s *policy.Snapshot) (policy.Verdict, error) {
	return m.feasible(d, s)
}
func (m mockFeasibility) Late(d *policy.Demand, s *policy.Snapshot) (string, error) {
	return m.late(d, s)
}

type mockOrder struct {
	order func(*policy.OrderInput) ([]int, error)
}

func (mockOrder) Name() string                                 { return "mock-order" }
func (m mockOrder) Order(in *policy.OrderInput) ([]int, error) { return m.order(in) }
