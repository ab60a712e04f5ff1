package bridge

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// Feasible reports whether some placement on sites could ever run req,
// and why not: an error wrapping ErrInfeasible that names every reason.
// It is the one check `gridsub validate`, the CLI's embedded broker and
// the daemon apply (Broker.Submit with Options.CheckFeasible), so all
// three answer alike. It is pure: sites describe what is known of each
// configured site (Name, Nodes, H, Shape; Nodes 0 = the site is not known,
// and neither its size nor its node shape rules it out), now is the
// submission time.
//
// The checks, in order:
//   - node shape: the sites whose nodes lack the cores, memory or GPUs the
//     job asks per node are out (policy.NodeShape.Lacks);
//   - capacity: the job's width fits the sites left (on one site with
//     no_split, else in sum; an advance reservation's size is left to its
//     admission test, which answers at once and keeps the refusal);
//   - deadline: under the run-time model (policy.Snapshot.Runtime: h·T on
//     one site, p·max h·T across several) the fastest placement that holds
//     the job ends by the deadline if it started at once (transfers and
//     queueing are not counted: only a job that cannot make it even then
//     is refused).
func Feasible(req *Request, sites []policy.Site, multiSite float64, now time.Time) error {
	var cand []int
	var misfits []string
	for i, s := range sites {
		if req.Sites != nil && !slices.Contains(req.Sites, s.Name) {
			continue
		}
		if s.Nodes <= 0 { // not known: neither its size nor its nodes rule it out
			cand = append(cand, i)
			continue
		}
		if why := s.Shape.Lacks(policy.NodeShape{Cores: req.CoresPerNode, MemBytes: req.MemPerNode, GPUs: req.GPUsPerNode}); why != "" {
			misfits = append(misfits, s.Name+": "+why)
			continue
		}
		cand = append(cand, i)
	}
	infeasible := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInfeasible, fmt.Sprintf(format, a...))
	}
	if len(cand) == 0 {
		if len(misfits) == 0 {
			return infeasible("no site is allowed")
		}
		return infeasible("no allowed site has nodes with what the job asks per node: %s", strings.Join(misfits, "; "))
	}
	also := ""
	if len(misfits) > 0 {
		also = " (not eligible: " + strings.Join(misfits, "; ") + ")"
	}
	// An advance reservation's size is left to its admission test, which
	// answers at once with its reason and keeps the refusal on record
	// (Submit: Rejected, listed by `gridsub reservations --all`).
	unknown := req.Window != nil || slices.ContainsFunc(cand, func(i int) bool { return sites[i].Nodes <= 0 })
	oneSite := req.NoSplit
	total, largest := 0, cand[0]
	var list []string
	for _, i := range cand {
		total += sites[i].Nodes
		if sites[i].Nodes > sites[largest].Nodes {
			largest = i
		}
		list = append(list, fmt.Sprintf("%s %d", sites[i].Name, sites[i].Nodes))
	}
	if !unknown {
		switch {
		case oneSite && req.Nodes > sites[largest].Nodes:
			return infeasible("needs %d nodes on one site (no_split); the largest eligible site is %s with %d (%s)%s",
				req.Nodes, sites[largest].Name, sites[largest].Nodes, strings.Join(list, ", "), also)
		case req.Nodes > total:
			return infeasible("needs %d nodes; the eligible sites have %d in all (%s)%s", req.Nodes, total, strings.Join(list, ", "), also)
		}
	}
	if req.Deadline.IsZero() || req.Window != nil || unknown || req.DeadlinePolicy == DeadlineBestEffort {
		return nil
	}
	run, parts := fastest(req, sites, cand, oneSite, multiSite)
	if parts == "" {
		return nil
	}
	if end := now.Add(run); end.After(req.Deadline) {
		return infeasible("cannot meet its deadline %s: the fastest placement, %s, runs %s under the run-time model, so even started at once it would end at %s (%s late)%s",
			req.Deadline.UTC().Format(time.RFC3339), parts, run.Round(time.Second), end.UTC().Format(time.RFC3339), end.Sub(req.Deadline).Round(time.Second), also)
	}
	return nil
}

// fastest is the shortest predicted run of req on the candidate sites and
// its placement ("Harbin:32+Shanghai:8"): on one site, the fastest that
// holds it; across sites, the fastest sites first until the width fits.
func fastest(req *Request, sites []policy.Site, cand []int, oneSite bool, multiSite float64) (time.Duration, string) {
	snap := policy.Snapshot{Sites: sites, MultiSite: multiSite}
	pj := policy.Job{Width: req.Nodes, Estimate: req.Estimate, Origin: -1}
	byH := slices.Clone(cand)
	slices.SortStableFunc(byH, func(a, b int) int { return cmp.Compare(sites[a].H, sites[b].H) })
	best, where := time.Duration(-1), ""
	for _, i := range byH {
		if sites[i].Nodes >= req.Nodes {
			parts := []policy.Part{{Site: i, Nodes: req.Nodes}}
			if r := snap.Runtime(&pj, parts); best < 0 || r < best {
				best, where = r, fmt.Sprintf("%s:%d", sites[i].Name, req.Nodes)
			}
		}
	}
	if best >= 0 || oneSite {
		return best, where
	}
	var parts []policy.Part
	left := req.Nodes
	for _, i := range byH {
		n := min(left, sites[i].Nodes)
		parts = append(parts, policy.Part{Site: i, Nodes: n})
		if left -= n; left == 0 {
			break
		}
	}
	if left > 0 {
		return 0, ""
	}
	names := make([]string, len(sites))
	for i, s := range sites {
		names[i] = s.Name
	}
	return snap.Runtime(&pj, parts), partsString(names, parts)
}

// feasible checks a request against the sites as last seen (Options.
// CheckFeasible). Sites never seen yet are asked for their Info first
// (bounded by capacityWait), except those whose connection is known to be
// down: what cannot be learnt is not known, and never rules a site out.
func (b *Broker) feasible(ctx context.Context, req *Request, now time.Time) error {
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
	sites := slices.Clone(b.known)
	b.mu.Unlock()
	if sites == nil { // no site answered: nothing is known
		return nil
	}
	return Feasible(req, sites, b.opts.MultiSite, now)
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
