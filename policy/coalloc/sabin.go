package coalloc

import (
	"context"
	"fmt"
	"strconv"

	"github.com/gridsub/gridsub/policy"
)

// Sabin is the multi-queue baseline of Sabin et al. (2003): every job is
// copied to the local queue of every site that could ever run it alone; the
// first site to start a copy runs it and the broker withdraws the others.
// Jobs are never split, so a job wider than the largest allowed site is
// rejected. Each queued job gets one Replicate decision whose Parts name
// every target site with the full width; the sites' own schedulers do the
// FCFS and backfilling. Chosen.Start is Now and Runtime/Transfer are those of
// the fastest target, for information only.
type Sabin struct{}

var _ policy.Planner = (*Sabin)(nil)

// Name implements policy.Planner.
func (*Sabin) Name() string { return "sabin" }

// Plan implements policy.Planner.
func (*Sabin) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	if err := checkSnapshot(s); err != nil {
		return nil, err
	}
	plan := &policy.Plan{Decisions: make([]policy.Decision, 0, len(s.Queue))}
	g := newGridInfo(s)
	for qi := range s.Queue {
		if qi%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("coalloc: plan interrupted at job %d of %d: %w", qi, len(s.Queue), err)
			}
		}
		j := &s.Queue[qi]
		sites, d, pend := admit(s, j, true, "sabin", g)
		if d != nil {
			plan.Decisions = append(plan.Decisions, *d)
			continue
		}
		if pend != nil {
			plan.Pending = append(plan.Pending, *pend)
			continue
		}
		parts := make([]policy.Part, 0, len(sites))
		for _, i := range sites {
			if s.Sites[i].Nodes >= j.Width {
				parts = append(parts, policy.Part{Site: i, Nodes: j.Width})
			}
		}
		var a [160]byte
		// sites are by slowness (h/trust) ascending: the first is the fastest target.
		first := parts[:1]
		dec := policy.Decision{
			Job:    j.ID,
			Action: policy.Replicate,
			Chosen: policy.Option{Parts: parts, Start: s.Now, Runtime: s.Runtime(j, first), Transfer: s.Transfer(j, first)},
			Status: policy.NewStatus(policy.Success, "sabin", str(appendParts(append(strconv.AppendInt(append(a[:0], "copied to "...), int64(len(parts)), 10), " site queues: "...), s, parts))),
		}
		if !s.Quiet {
			dec.Status.Reasons = append(dec.Status.Reasons, misfitReasons(s, j)...)
		}
		plan.Decisions = append(plan.Decisions, dec)
	}
	return plan, nil
}
