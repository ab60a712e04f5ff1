package remap

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Names of the built-ins.
const (
	Name        = "gain"    // Gain: oldest dispatch first, the least gain in completion time
	BenefitName = "benefit" // Benefit: the most benefit gained first (paper 003's benefit functions)
)

// Names lists the built-in remapping policies, the default first.
func Names() []string { return []string{Name, BenefitName} }

// ByName returns the built-in remapping policy of that name; the error
// names the valid ones.
func ByName(name string) (policy.Remap, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case Name:
		return Gain{}, nil
	case BenefitName:
		return Benefit{}, nil
	}
	return nil, fmt.Errorf("unknown remap policy %q: valid are %s", name, strings.Join(Names(), ", "))
}

// Gain moves a waiting job, whole, to the one site that could start it now
// and end it soonest, when that ends it at least MinGain before it would
// end where it waits. Where it waits it starts when the batch system says
// (Waiting.Estimates), else when the site's busy profile frees its nodes;
// a job whose start cannot be told, or that starts now, stays. Jobs are
// taken in input order, each taking its target's nodes from the free ones.
type Gain struct{}

var _ policy.Remap = Gain{}

// Name is Name.
func (Gain) Name() string { return Name }

// Moves runs one pass.
func (Gain) Moves(in *policy.RemapInput) ([]policy.Move, error) {
	s, now := in.Snapshot, in.Now
	free := slices.Clone(in.Free)
	var out []policy.Move
	sorted := make([][]policy.Hold, len(s.Sites)) // each site's busy profile by end, sorted once per pass
	for wi := range in.Waiting {
		w := &in.Waiting[wi]
		pj := &w.Job
		fromStart, ok := waitStart(s, w, sorted, now)
		if !ok {
			continue // starts now where it is, or its wait cannot be told
		}
		fromEnd := fromStart.Add(s.Runtime(pj, w.Parts))
		best := bestNow(s, w, free, now)
		if best.Parts == nil {
			continue
		}
		gain := fromEnd.Sub(best.End())
		if gain < in.MinGain {
			continue
		}
		free[best.Parts[0].Site] -= pj.Width
		out = append(out, policy.Move{Job: pj.ID, To: best, FromStart: fromStart, Gain: gain})
	}
	return out, nil
}

// waitStart is when w starts where it waits: the latest of its parts'
// starts, each the batch system's estimate when given, else when the site's
// busy profile (sorted[site], filled on first use) frees its nodes. ok is
// false when it starts now or its start cannot be told.
func waitStart(s *policy.Snapshot, w *policy.Waiting, sorted [][]policy.Hold, now time.Time) (time.Time, bool) {
	fromStart, known := now, true
	for k, p := range w.Parts {
		if sorted[p.Site] == nil {
			sorted[p.Site] = slices.Clone(s.Sites[p.Site].Busy)
			slices.SortStableFunc(sorted[p.Site], func(x, y policy.Hold) int { return x.Until.Compare(y.Until) })
		}
		t, ok := EarliestFree(s.Sites[p.Site].Free, sorted[p.Site], p.Nodes, now)
		if k < len(w.Estimates) && !w.Estimates[k].IsZero() {
			// The batch system's own estimate sees the jobs queued
			// ahead, which the profile does not: it wins when given.
			t, ok = w.Estimates[k], true
		}
		known = known && ok
		if t.After(fromStart) {
			fromStart = t
		}
	}
	return fromStart, known && fromStart.After(now)
}

// bestNow is the one-site placement with free nodes now (other than the
// one site w waits at) that ends w soonest; no Parts when there is none.
func bestNow(s *policy.Snapshot, w *policy.Waiting, free []int, now time.Time) policy.Option {
	pj := &w.Job
	misfits := s.Misfits(pj)
	best := policy.Option{}
	for site := range free {
		if free[site] < pj.Width || (pj.Allowed != nil && !slices.Contains(pj.Allowed, site)) ||
			(len(w.Parts) == 1 && w.Parts[0].Site == site) || slices.ContainsFunc(misfits, func(m policy.Misfit) bool { return m.Site == site }) {
			continue
		}
		parts := []policy.Part{{Site: site, Nodes: pj.Width}}
		opt := policy.Option{Parts: parts, Start: now, Runtime: s.Runtime(pj, parts), Transfer: s.Transfer(pj, parts), Immediate: true}
		if best.Parts == nil || opt.End().Before(best.End()) {
			best = opt
		}
	}
	return best
}

// EarliestFree is when a site with free nodes now and holds (its busy
// profile, sorted by end) first has nodes free: now when they are free,
// else the end of the running job whose release frees enough (an end
// already past counts as now). ok is false when even every release
// together does not free them (nodes held by something the profile does
// not list).
func EarliestFree(free int, holds []policy.Hold, nodes int, now time.Time) (time.Time, bool) {
	if free >= nodes {
		return now, true
	}
	for _, h := range holds {
		free += h.Nodes
		if free >= nodes {
			if h.Until.Before(now) {
				return now, true
			}
			return h.Until, true
		}
	}
	return time.Time{}, false
}
