package bridge

import (
	"fmt"
	"strings"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/dependable"
	"github.com/gridsub/gridsub/policy/feasible"
	"github.com/gridsub/gridsub/policy/remap"
	"github.com/gridsub/gridsub/policy/reserve"
	"github.com/gridsub/gridsub/policy/trust"
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
	// Order orders the queue before each plan (fair share; nil keeps the
	// broker's own order, fcfs). It sees each user's shares
	// (UserLimits.Shares) and their use of the sites decayed with
	// Options.FairShareHalfLife: the running jobs and each user's
	// accounted use of the jobs that ended, kept in the Store
	// (UsageStore) across restarts.
	Order policy.Order
}

// admission is the reservation mechanism in use.
func (o *Options) admission() policy.Admission {
	if a := o.Policies.Admission; a != nil {
		return a
	}
	return reserve.DRRM{}
}

// admissionsBook is the reservations the broker admitted.
type admissionsBook = policy.ReservationBook

// feasibility is the feasibility check in use.
func (o *Options) feasibility() policy.Feasibility {
	if f := o.Policies.Feasibility; f != nil {
		return f
	}
	return feasible.Check{}
}

// demandOf is a request as the feasibility check reads it.
func demandOf(req *Request) *policy.Demand {
	return &policy.Demand{Width: req.Nodes, Estimate: req.Estimate, DataSize: req.DataSize, Origin: req.Origin,
		Sites: req.Sites, PerNode: policy.NodeShape{Cores: req.CoresPerNode, MemBytes: req.MemPerNode, GPUs: req.GPUsPerNode},
		NoSplit: req.NoSplit, Deadline: req.Deadline, BestEffort: req.DeadlinePolicy == DeadlineBestEffort, Window: req.Window != nil}
}

// feasibleBy asks f about req on m: a refusal is an error wrapping
// ErrInfeasible (and ErrDeadline when the deadline refused it), an
// acceptance may carry a warning.
func feasibleBy(f policy.Feasibility, req *Request, m *policy.Snapshot) (string, error) {
	v, err := f.Feasible(demandOf(req), m)
	if err != nil {
		return "", fmt.Errorf("feasibility check %s: %w", f.Name(), err)
	}
	if v.Feasible() {
		return v.Warning, nil
	}
	return "", infeasible(v.Cause == policy.CauseDeadline, strings.Join(v.Status.Reasons, "; "))
}

// late is why a waiting request can no longer meet its deadline on m, ""
// when it can. A check that broke says so in the log and counts as not
// late: a job is never rejected for a policy's fault. The ledger's lock
// held.
func (p part) late(req *Request, m *policy.Snapshot) string {
	f := p.opts.feasibility()
	why, err := f.Late(demandOf(req), m)
	if err != nil {
		p.log.Warn("deadline check failed", "policy", f.Name(), "err", err)
		return ""
	}
	return why
}

// TrustPolicy is the trust policy in use: Options.Policies.Trust, else
// paper 002's model (the daemon's trust task asks it).
func (b *Broker) TrustPolicy() policy.Trust { return b.opts.trustPolicy() }

func (o *Options) trustPolicy() policy.Trust {
	if t := o.Policies.Trust; t != nil {
		return t
	}
	return trust.Policy{Model: trust.DefaultModel()}
}

// tiering is the tier rule and copy plan in use (with Options.Tiers).
func (o *Options) tiering() policy.Tiering {
	if t := o.Policies.Tiering; t != nil {
		return t
	}
	return dependable.Tiering{}
}

// remapPolicy is the remapping policy in use (with Options.Remap).
func (o *Options) remapPolicy() policy.Remap {
	if r := o.Policies.Remap; r != nil {
		return r
	}
	return remap.Gain{}
}

// FeasibleBy is Feasible with the check f (nil: the built-in one, as
// Feasible): what Submit answers on a broker whose Options.Policies.
// Feasibility is f.
func FeasibleBy(f policy.Feasibility, req *Request, m *policy.Snapshot) (warning string, err error) {
	if f == nil {
		f = feasible.Check{}
	}
	return feasibleBy(f, req, m)
}

// PolicyNames names the implementation of each extension point the broker
// uses (the built-in defaults included), by kind: what `gridsub plugins`
// and the status page can show.
func (b *Broker) PolicyNames() map[policy.Kind]string {
	return map[policy.Kind]string{
		policy.KindPlanner:     b.opts.Planner.Name(),
		policy.KindFeasibility: b.opts.feasibility().Name(),
		policy.KindAdmission:   b.opts.admission().Name(),
		policy.KindTrust:       b.opts.trustPolicy().Name(),
		policy.KindTiering:     b.opts.tiering().Name(),
		policy.KindRemap:       b.opts.remapPolicy().Name(),
		policy.KindOrder:       b.opts.orderName(),
	}
}

// orderName is the queue order's name: fcfs when none is set.
func (o *Options) orderName() string {
	if o.Policies.Order == nil {
		return "fcfs"
	}
	return o.Policies.Order.Name()
}
