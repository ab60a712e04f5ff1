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
//   - deadline (deadlineMiss, the one deadline rule): the fastest
//     placement ends after the deadline even started at once.
func Feasible(req *Request, m *policy.Snapshot) (warning string, err error) {
	sites := m.Sites
	cand, misfits := eligible(req, sites)
	if len(cand) == 0 {
		if len(misfits) == 0 {
			return "", infeasible(false, "no site is allowed")
		}
		return "", infeasible(false, "no allowed site has nodes with what the job asks per node: "+strings.Join(misfits, "; "))
	}
	also := ""
	if len(misfits) > 0 {
		also = " (not eligible: " + strings.Join(misfits, "; ") + ")"
	}
	// An advance reservation's size is left to its admission test, which
	// answers at once with its reason and keeps the refusal on record
	// (Submit: Rejected, listed by `gridsub reservations --all`).
	unknown := req.Window != nil || slices.ContainsFunc(cand, func(i int) bool { return sites[i].Nodes <= 0 })
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
		case req.NoSplit && req.Nodes > sites[largest].Nodes:
			return "", infeasible(false, fmt.Sprintf("needs %d nodes on one site (no_split); the largest eligible site is %s with %d (%s)%s",
				req.Nodes, sites[largest].Name, sites[largest].Nodes, strings.Join(list, ", "), also))
		case req.Nodes > total:
			return "", infeasible(false, fmt.Sprintf("needs %d nodes; the eligible sites have %d in all (%s)%s", req.Nodes, total, strings.Join(list, ", "), also))
		}
	}
	why := deadlineMiss(req, m, cand)
	switch {
	case why == "":
		return "", nil
	case req.DeadlinePolicy == DeadlineBestEffort:
		return "no site can finish the job by its " + why + "; accepted (deadline_policy: best-effort): it will run late", nil
	}
	return "", infeasible(true, "cannot meet its "+why+also+" (deadline_policy: strict; best-effort would accept it to run late)")
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

// eligible lists the sites req may use whose nodes have what it asks per
// node (a site not known yet is eligible), and says why the others' nodes
// do not.
func eligible(req *Request, sites []policy.Site) (cand []int, misfits []string) {
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
	return cand, misfits
}

// deadlineMiss is the deadline rule, the only one: at submission
// (Feasible) and while a job waits (expireDeadlines). Under the run-time
// model the fastest placement on the candidate sites that holds the job
// — one site of unknown size or big enough, else (without no_split, when
// every size is known) the fastest sites together, p·max h·T — ends at
// m.Now + run + transfer (the input transfer from the job's origin over
// the configured links; queueing is not counted). If that is after the
// deadline, it returns why ("deadline T: the fastest placement ..."), else
// "". A job without a deadline, or with a reservation window (the window
// is its deadline: checkWindow), never misses.
func deadlineMiss(req *Request, m *policy.Snapshot, cand []int) string {
	if req.Deadline.IsZero() || req.Window != nil || len(cand) == 0 {
		return ""
	}
	run, where := fastest(req, m, cand)
	if where == "" {
		return ""
	}
	end := m.Now.Add(run)
	if !end.After(req.Deadline) {
		return ""
	}
	return fmt.Sprintf("deadline %s: the fastest placement, %s, takes %s under the run-time model, so even started at once it would end at %s (%s late)",
		req.Deadline.UTC().Format(time.RFC3339), where, run.Round(time.Second), end.UTC().Format(time.RFC3339), end.Sub(req.Deadline).Round(time.Second))
}

// fastest is the shortest predicted run plus input transfer of req on the
// candidate sites and its placement ("Harbin:32 (h 0.5)", or
// "Harbin:32+Shanghai:8" across sites): on one site, the fastest that may
// hold it (size known and enough, or not known); across sites, the fastest
// sites first until the width fits. "" when no placement holds it.
func fastest(req *Request, m *policy.Snapshot, cand []int) (time.Duration, string) {
	sites := m.Sites
	snap := policy.Snapshot{Sites: sites, MultiSite: m.MultiSite, Links: m.Links}
	pj := policy.Job{Width: req.Nodes, Estimate: req.Estimate, Origin: -1, DataSize: req.DataSize}
	for i, s := range sites {
		if req.Origin != "" && s.Name == req.Origin {
			pj.Origin = i
		}
	}
	byH := slices.Clone(cand)
	slices.SortStableFunc(byH, func(a, b int) int { return cmp.Compare(sites[a].H, sites[b].H) })
	best, where := time.Duration(-1), ""
	for _, i := range byH {
		if sites[i].Nodes <= 0 || sites[i].Nodes >= req.Nodes {
			parts := []policy.Part{{Site: i, Nodes: req.Nodes}}
			if r := snap.Runtime(&pj, parts) + snap.Transfer(&pj, parts); best < 0 || r < best {
				best, where = r, fmt.Sprintf("%s:%d (h %g)", sites[i].Name, req.Nodes, sites[i].H)
			}
		}
	}
	if best >= 0 || req.NoSplit {
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
	return snap.Runtime(&pj, parts) + snap.Transfer(&pj, parts), partsString(names, parts)
}

// feasible checks a request at submission (Feasible): with Options.
// CheckFeasible against the sites as last seen — sites never seen yet are
// asked for their Info first (bounded by capacityWait), except those whose
// connection is known to be down: what cannot be learnt is not known, and
// never rules a site out; without it (trace replays, where the planner
// rejects a job too wide in its cycle) no site's size or shape is known,
// so only the deadline rule can refuse.
func (ik *intake) feasible(ctx context.Context, req *Request, now time.Time) (string, error) {
	if !ik.opts.CheckFeasible {
		ik.mu.Lock()
		m := ik.model(now, false)
		ik.mu.Unlock()
		return Feasible(req, m)
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
			}
		}
		ik.mu.Unlock()
	}
	ik.mu.Lock()
	m := ik.model(now, true)
	ik.mu.Unlock()
	return Feasible(req, m)
}
