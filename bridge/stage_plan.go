package bridge

import (
	"context"
	"fmt"

	"github.com/gridsub/gridsub/policy"
)

// planStage is the plan stage: it holds out of the snapshot's queue the
// jobs no site they may use can be reached (holdUnreachable) and asks the
// policy for a plan — pure and deterministic: a Snapshot in, a Plan out.
type planStage struct {
	part
	planner policy.Planner
}

// run is the plan stage: it reads cs.snap and writes cs.plan.
func (ps *planStage) run(ctx context.Context, cs *cycleState) error {
	ps.holdUnreachable(ctx, cs.now, cs.snap)
	ps.orderQueue(cs.snap, cs.now)
	counts := ps.holdOverLimit(ctx, cs.now, cs.snap)
	plan, err := ps.planner.Plan(ctx, cs.snap)
	if err != nil {
		return fmt.Errorf("policy %s: %w", ps.planner.Name(), err)
	}
	ps.trimOverLimit(ctx, cs.now, cs.snap, plan, counts)
	cs.plan = plan
	return nil
}
