package bridge

import (
	"context"
	"slices"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/feasible"
)

// Feasible reports whether some placement on the sites could ever run
// req, and why not: an error wrapping ErrInfeasible that names every
// reason (and ErrDeadline too when the deadline is the reason). It is the
// one check `gridsub validate`, the CLI's embedded broker and the daemon
// apply (Broker.Submit), so all three answer alike: the CLI exits 1, the
// API answers 422. A best-effort job that cannot meet its deadline is
// feasible, with warning saying how late it will be. It is pure; it reads
// of m only Now (the submission time), Sites (Name, Nodes, H, Shape;
// Nodes 0 = the site is not known, and neither its size nor its node
// shape rules it out), Links and MultiSite.
//
// The checks, in order:
//   - node shape: the sites whose nodes lack the cores, memory or GPUs the
//     job asks per node are out (policy.NodeShape.Lacks);
//   - capacity: the job's width fits the sites left (on one site with
//     no_split, else in sum; an advance reservation's size is left to its
//     admission test, which answers at once and keeps the refusal);
//   - deadline (the one deadline rule, policy/feasible): the fastest
//     placement ends after the deadline even started at once.
func Feasible(req *Request, m *policy.Snapshot) (warning string, err error) {
	return feasibleBy(feasible.Check{}, req, m)
}

// infeasibleError is Feasible's error: it wraps ErrInfeasible, and
// ErrDeadline when the deadline is the reason.
type infeasibleError struct {
	msg      string
	deadline bool
}

func infeasible(deadline bool, msg string) error { return &infeasibleError{msg, deadline} }

func (e *infeasibleError) Error() string { return ErrInfeasible.Error() + ": " + e.msg }

// Is makes errors.Is find ErrInfeasible (and ErrDeadline for a deadline).
func (e *infeasibleError) Is(target error) bool {
	return target == ErrInfeasible || (e.deadline && target == ErrDeadline)
}

// feasible checks a request at submission (Feasible): with Options.
// CheckFeasible against the sites as last seen — sites never seen yet are
// asked for their Info first (bounded by capacityWait), except those whose
// connection is known to be down: what cannot be learnt is not known, and
// never rules a site out; without it (trace replays, where the planner
// rejects a job too wide in its cycle) no site's size or shape is known,
// so only the deadline rule can refuse. With it, a partition or queue the
// job's SiteOptions name that a site does not list is refused too, with a
// RequestError naming the field (checkOptions).
func (ik *intake) feasible(ctx context.Context, req *Request, now time.Time) (string, error) {
	if !ik.opts.CheckFeasible {
		ik.mu.Lock()
		m := ik.model(now, false)
		ik.mu.Unlock()
		return feasibleBy(ik.opts.feasibility(), req, m)
	}
	ik.mu.Lock()
	var ask []int
	for s := range ik.sites {
		if ik.seen == nil || !ik.seen[s] {
			ask = append(ask, s)
		}
	}
	ik.mu.Unlock()
	if len(ask) > 0 {
		wait, cancel := context.WithTimeout(ctx, capacityWait)
		infos := make([]*backends.SiteInfo, len(ik.sites))
		ik.eachSite(func(s int) {
			if !slices.Contains(ask, s) {
				return
			}
			if c, ok := backends.AsConnectivity(ik.sites[s].Backend); ok && c.ConnErr() != nil {
				return
			}
			if in, err := ik.sites[s].Backend.Info(wait); err == nil && in != nil {
				infos[s] = in
			}
		})
		cancel()
		ik.mu.Lock()
		for s, in := range infos {
			if in != nil {
				ik.see(s, in.Nodes, policy.NodeShape{Cores: in.CoresPerNode, MemBytes: in.MemPerNode, GPUs: in.GPUsPerNode})
				ik.offered(s, in.Kind, in.Partitions, in.Accounts)
			}
		}
		ik.mu.Unlock()
	}
	ik.mu.Lock()
	m := ik.model(now, true)
	bad := ik.checkOptions(req) // a partition or queue a site does not have (misconfig.go)
	ik.mu.Unlock()
	if bad != nil {
		return "", bad
	}
	return feasibleBy(ik.opts.feasibility(), req, m)
}
