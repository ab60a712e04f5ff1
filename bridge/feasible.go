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

// model is what the broker knows of its sites for Feasible at now: each
// site's size and node shape as last seen when sizes is set (a site not
// seen yet, or every site without sizes, counts as not known), its h, the
// configured links and the multi-site factor. b.mu held.
func (b *Broker) model(now time.Time, sizes bool) *policy.Snapshot {
	m := &policy.Snapshot{Now: now, Links: b.opts.Links, MultiSite: b.opts.MultiSite, Sites: make([]policy.Site, len(b.sites))}
	for s := range b.sites {
		m.Sites[s] = policy.Site{Name: b.names[s], H: b.sites[s].H}
		if sizes && b.known != nil && b.seen[s] {
			m.Sites[s].Nodes, m.Sites[s].Shape = b.known[s].Nodes, b.known[s].Shape
		}
	}
	return m
}

// feasible checks a request at submission (Feasible): with Options.
// CheckFeasible against the sites as last seen — sites never seen yet are
// asked for their Info first (bounded by capacityWait), except those whose
// connection is known to be down: what cannot be learnt is not known, and
// never rules a site out; without it (trace replays, where the planner
// rejects a job too wide in its cycle) no site's size or shape is known,
// so only the deadline rule can refuse.
func (b *Broker) feasible(ctx context.Context, req *Request, now time.Time) (string, error) {
	if !b.opts.CheckFeasible {
		b.mu.Lock()
		m := b.model(now, false)
		b.mu.Unlock()
		return feasibleBy(b.feasibility(), req, m)
	}
	b.mu.Lock()
	var ask []int
	for s := range b.sites {
		if b.seen == nil || !b.seen[s] {
			ask = append(ask, s)
		}
	}
	b.mu.Unlock()
	if len(ask) > 0 {
		wait, cancel := context.WithTimeout(ctx, capacityWait)
		infos := make([]*backends.SiteInfo, len(b.sites))
		b.eachSite(func(s int) {
			if !slices.Contains(ask, s) {
				return
			}
			if c, ok := backends.AsConnectivity(b.sites[s].Backend); ok && c.ConnErr() != nil {
				return
			}
			if in, err := b.sites[s].Backend.Info(wait); err == nil && in != nil {
				infos[s] = in
			}
		})
		cancel()
		b.mu.Lock()
		for s, in := range infos {
			if in != nil {
				b.see(s, in.Nodes, policy.NodeShape{Cores: in.CoresPerNode, MemBytes: in.MemPerNode, GPUs: in.GPUsPerNode})
			}
		}
		b.mu.Unlock()
	}
	b.mu.Lock()
	m := b.model(now, true)
	b.mu.Unlock()
	return feasibleBy(b.feasibility(), req, m)
}

// see records what a site's Info says of its size and node shape, for
// feasible. b.mu held.
func (b *Broker) see(s, nodes int, shape policy.NodeShape) {
	if b.known == nil {
		b.known = make([]policy.Site, len(b.sites))
		b.seen = make([]bool, len(b.sites))
		for i := range b.sites {
			b.known[i] = policy.Site{Name: b.names[i], H: b.sites[i].H}
		}
	}
	b.seen[s] = true
	b.known[s].Nodes, b.known[s].Shape = nodes, shape
}

// shapeAllowed is the sites a reservation may be bound to: its allowed
// sites (nil: all) less those whose nodes, as last seen, lack what it asks
// per node. Nil when nothing is left out (or everything would be: Submit's
// feasibility check refused that case; the sites' own answer decides).
// b.mu held.
func (b *Broker) shapeAllowed(j *Job) []string {
	ask := policy.NodeShape{Cores: j.Req.CoresPerNode, MemBytes: j.Req.MemPerNode, GPUs: j.Req.GPUsPerNode}
	if ask.Zero() || b.known == nil {
		return slices.Clone(j.Req.Sites)
	}
	names := j.Req.Sites
	if names == nil {
		names = b.names
	}
	var out []string
	for _, n := range names {
		s := b.siteIdx[n]
		if !b.seen[s] || b.known[s].Shape.Lacks(ask) == "" {
			out = append(out, n)
		}
	}
	if len(out) == 0 || len(out) == len(names) {
		return slices.Clone(j.Req.Sites)
	}
	return out
}
