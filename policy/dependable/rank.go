package dependable

import (
	"context"
	"fmt"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Ranked composes reliability cost with another planner's placement search
// (paper 000's co-allocation, policy/coalloc): the inner planner proposes,
// for each job it starts, its chosen placement and the runner-ups it beat
// (Decision.Beaten); Ranked re-ranks the immediate ones by RC and starts
// the least. A placement on several sites fails when any of them fails, so
// its reliability is the product of its sites' r over its CT (predicted end
// − now), and RC = (1 − r)·CT. Ties keep the inner planner's order.
//
// A runner-up replaces the chosen placement only if its parts fit in the
// nodes the whole plan leaves free (the chosen parts given back first), so
// the Start parts of a site still never exceed its free nodes. The inner
// planner's reservations are kept as they are; a swap may take nodes it
// counted on, in which case its next pass re-plans. Ranked asks the inner
// planner without Quiet (it needs the runner-ups) and honours Quiet itself.
type Ranked struct {
	Inner policy.Planner
	Rel   Reliabilities
}

var _ policy.Planner = (*Ranked)(nil)

// Name is the inner planner's name + "+rc".
func (r *Ranked) Name() string { return r.Inner.Name() + "+rc" }

// Plan runs the inner planner and re-ranks its starts; see Ranked.
func (r *Ranked) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	loud := *s
	loud.Quiet = false
	plan, err := r.Inner.Plan(ctx, &loud)
	if err != nil {
		return nil, err
	}
	free := make([]int, len(s.Sites))
	curves := make([]Curve, len(s.Sites))
	for i := range s.Sites {
		free[i] = s.Sites[i].Free
		if r.Rel != nil {
			curves[i] = r.Rel.Curve(s.Sites[i].Name, s.Now)
		}
	}
	for _, d := range plan.Decisions {
		if d.Action == policy.Start {
			for _, p := range d.Chosen.Parts {
				free[p.Site] -= p.Nodes
			}
		}
	}
	for di := range plan.Decisions {
		d := &plan.Decisions[di]
		if d.Action != policy.Start || len(d.Beaten) == 0 {
			continue
		}
		bestRC, bestR := r.cost(s.Now, curves, d.Chosen)
		best := -1
		for bi, o := range d.Beaten {
			if !o.Immediate || !fits(free, d.Chosen.Parts, o.Parts) {
				continue
			}
			if rc, rr := r.cost(s.Now, curves, o); rc < bestRC {
				best, bestRC, bestR = bi, rc, rr
			}
		}
		if best < 0 {
			if !s.Quiet {
				d.Status.Reasons = append(d.Status.Reasons, fmt.Sprintf("least RC %v (r %.4f) of the placements offered", bestRC, bestR))
			}
			continue
		}
		old := d.Chosen
		for _, p := range old.Parts {
			free[p.Site] += p.Nodes
		}
		d.Chosen = d.Beaten[best]
		for _, p := range d.Chosen.Parts {
			free[p.Site] -= p.Nodes
		}
		d.Beaten[best] = old
		if !s.Quiet {
			d.Status.Reasons = append(d.Status.Reasons, fmt.Sprintf("ranked by reliability cost: RC %v (r %.4f) beat the earliest end's", bestRC, bestR))
			d.Status.Plugin = r.Name()
		}
	}
	if s.Quiet {
		plan.Pending = nil
		for di := range plan.Decisions {
			d := &plan.Decisions[di]
			if d.Action == policy.Start {
				d.Beaten, d.Status = nil, policy.Status{}
			}
		}
	}
	return plan, nil
}

// cost is RC and r of a placement from now.
func (r *Ranked) cost(now time.Time, curves []Curve, o policy.Option) (time.Duration, float64) {
	ct := max(o.End().Sub(now), 0)
	rel := 1.0
	seen := map[int]bool{}
	for _, p := range o.Parts {
		if !seen[p.Site] {
			seen[p.Site] = true
			rel *= curves[p.Site].R(ct)
		}
	}
	return Cost(rel, ct), rel
}

// fits reports whether parts fit in free once give is given back.
func fits(free []int, give, parts []policy.Part) bool {
	need := map[int]int{}
	for _, p := range parts {
		need[p.Site] += p.Nodes
	}
	for _, p := range give {
		need[p.Site] -= p.Nodes
	}
	for site, n := range need {
		if n > free[site] {
			return false
		}
	}
	return true
}
