package bridge

import (
	"context"
	"time"

	"github.com/gridsub/gridsub/backends"

	"github.com/gridsub/gridsub/policy"
)

// CycleReport says what one cycle did.
type CycleReport struct {
	Polled, Started, Replicated, Rejected, Ended int
	Errors                                       []error
}

// Cycle runs one scheduling cycle at time now: the stages poll, track,
// cancel, fetch, snapshot, plan, dispatch and submit (cycle). Per-site
// failures are reported in the CycleReport (and as job events), not as an
// error: an error means the cycle itself could not run.
func (b *Broker) Cycle(ctx context.Context, now time.Time) (CycleReport, error) {
	b.cycleMu.Lock()
	defer b.cycleMu.Unlock()
	defer b.flushEvents()
	defer b.dropEnded()
	cs := &cycleState{now: now}
	// The cycle's status polls and capacity reports are routine: a site
	// with a command budget answers them on its own schedule.
	err := b.cycle(backends.Routine(ctx), cs)
	return cs.rep, err
}

// cycle runs the stages in order, and the features' own steps where they
// belong: after the poll stage's changes are tracked, their cancels sent
// and their outputs fetched, so that dependencies, groups and deadlines see
// every job that ended in this cycle; before the snapshot, so that what
// they queue is planned in this cycle.
func (b *Broker) cycle(ctx context.Context, cs *cycleState) error {
	p, now := &b.stages, cs.now
	b.rec.retryUnresolved(ctx, now) // intents whose sites could not be asked
	p.poll.run(ctx, cs)
	p.track.run(ctx, cs)
	p.cancel.run(ctx, cs)
	p.fetch.run(ctx, cs)
	b.resv.releaseNative(ctx, now)             // native reservations of ended jobs
	b.duties.watchLate(ctx, now)               // submissions that landed after the grace
	b.grp.releaseHeld(ctx, now)                // jobs whose dependencies are met
	b.grp.advanceGroups(ctx, now)              // the elements a group has room for
	p.track.expireDeadlines(ctx, now, &cs.rep) // jobs that can no longer meet theirs
	b.copies.submitCopies(ctx, now, &cs.rep)   // backups and copies whose time has come
	b.mu.Lock()
	queued := len(b.queue) > 0
	b.mu.Unlock()
	remap := b.rm.remapWanted(now)
	if !queued && !remap {
		return nil
	}
	if err := p.snapshot.run(ctx, cs); err != nil {
		return err
	}
	if queued {
		if err := p.plan.run(ctx, cs); err != nil {
			return err
		}
		p.dispatch.run(ctx, cs)
		p.submit.run(ctx, cs)
	}
	if remap {
		p.snapshot.asReported()                // a waiting job's own site without its own hold
		b.rm.remap(ctx, now, cs.plan, &cs.rep) // into the nodes the plan left free
	}
	return nil
}

// cycleState is what one cycle's stages hand each other, passed explicitly
// from stage to stage (as Kubernetes' CycleState): each stage reads what
// the stages before it wrote and writes its own output. It lives for one
// cycle, and only the goroutine running the cycle touches it.
type cycleState struct {
	now time.Time
	rep CycleReport

	touched []*Job           // poll -> track: jobs whose components changed, in the order of first change
	cancels []cancelReq      // track -> cancel: remote cancels that follow from the changes
	snap    *policy.Snapshot // snapshot -> plan, dispatch, remap
	plan    *policy.Plan     // plan -> dispatch, remap
	pend    []pendingSubmit  // dispatch -> submit: jobs whose intents are stored
}

// pipeline is the cycle's stages, in the order Cycle runs them: poll ->
// track -> cancel -> fetch, then snapshot -> plan -> dispatch -> submit.
// The submit stage (submitAll) and the cancel stage (sendCancel) are the
// only callers of Backend.Submit and Backend.Cancel: every other part of
// the broker hands them requests.
type pipeline struct {
	poll     *poller
	track    *tracker
	cancel   *duties
	fetch    *fetcher
	snapshot *snapshotter
	plan     *planStage
	dispatch *dispatcher
	submit   *submitter
}
