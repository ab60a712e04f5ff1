package bridge

import (
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/reserve"
)

// Policies are the broker's extension points beside the planner
// (policy/doc.go lists them). A nil field is the built-in default.
type Policies struct {
	// Feasibility refuses at submission a request no site can ever run,
	// and finds the waiting jobs that can no longer meet their deadline.
	Feasibility policy.Feasibility
	// Admission decides advance reservations: admission at submission,
	// binding when the window opens (nil: DRRM).
	Admission policy.Admission
	// Trust turns the outcomes the daemon counts into the sites' trust
	// scores (bridge/daemon; nil: paper 002's model).
	Trust policy.Trust
	// Tiering gives jobs their dependability tier and places their copies
	// (with Options.Tiers; nil: paper 004's rule).
	Tiering policy.Tiering
	// Remap picks the waiting jobs worth moving (with Options.Remap;
	// nil: the least-gain rule).
	Remap policy.Remap
}

// admission is the reservation mechanism in use.
func (b *Broker) admission() policy.Admission {
	if a := b.opts.Policies.Admission; a != nil {
		return a
	}
	return reserve.DRRM{}
}

// admissionsBook is the reservations the broker admitted.
type admissionsBook = policy.ReservationBook
