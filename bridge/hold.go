package bridge

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// UserHoldWaiting is what a job held by the user waits for (Job.Waiting).
const UserHoldWaiting = "held by the user: `gridsub release ID` queues it again"

// Hold keeps a waiting job (Queued, or Held for its dependencies) out of
// the queue until Release, as SLURM's `scontrol hold` does: it is not
// placed, and keeps its dependencies. A job already dispatched or running
// is refused (ErrBadRequest: Requeue it first); an ended one is ErrFinal;
// a group's parent, a reservation and a job being moved are refused too.
func (b *Broker) Hold(ctx context.Context, id string, now time.Time) error {
	b.cycleMu.Lock()
	defer b.cycleMu.Unlock()
	defer b.flushEvents()
	b.mu.Lock()
	defer b.mu.Unlock()
	j, ok := b.jobs[id]
	switch {
	case !ok:
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	case j.State.Final():
		return fmt.Errorf("%w: %s is %s", ErrFinal, id, j.State)
	case j.UserHold:
		return nil
	case j.Group != nil:
		return fmt.Errorf("%w: %s is %s %s: hold its elements (they are jobs of their own)", ErrBadRequest, id, article(j.Group.Kind), j.Group.Kind)
	case j.Resv != nil:
		return fmt.Errorf("%w: %s has an advance reservation; cancel it instead", ErrBadRequest, id)
	case j.State != Queued && j.State != Held:
		return fmt.Errorf("%w: %s is %s; only a waiting job can be held (requeue it first)", ErrBadRequest, id, j.State)
	}
	if j.State == Queued {
		b.dequeue(id)
		b.held = append(b.held, id)
	}
	j.UserHold, j.Waiting = true, UserHoldWaiting
	b.transition(j, Held, now, "held", "", "held by the user")
	return b.save(ctx, j)
}

// Release ends a user's hold (Hold): the job waits for its dependencies
// again, if it has any, and enters the queue in the next cycle that finds
// them met. A job not held by the user is refused (ErrBadRequest).
func (b *Broker) Release(ctx context.Context, id string, now time.Time) error {
	b.cycleMu.Lock()
	defer b.cycleMu.Unlock()
	defer b.flushEvents()
	b.mu.Lock()
	defer b.mu.Unlock()
	j, ok := b.jobs[id]
	switch {
	case !ok:
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	case j.State.Final():
		return fmt.Errorf("%w: %s is %s", ErrFinal, id, j.State)
	case !j.UserHold:
		return fmt.Errorf("%w: %s is %s, not held by the user; nothing to release", ErrBadRequest, id, j.State)
	}
	j.UserHold, j.Waiting = false, ""
	b.record(ctx, j, now, "released", "", "released by the user; queued once its dependencies (if any) are met")
	return nil
}

// Requeue stops a dispatched or running job's attempt at its sites and
// puts the job back at its place in the queue, as SLURM's `scontrol
// requeue` does: the sites' jobs are cancelled, and the broker places it
// again (perhaps elsewhere) in a later cycle. A waiting job is refused
// (ErrBadRequest: there is nothing to stop), an ended one is ErrFinal; a
// group's parent and a reservation are refused.
func (b *Broker) Requeue(ctx context.Context, id string, now time.Time) error {
	b.cycleMu.Lock()
	defer b.cycleMu.Unlock()
	defer b.flushEvents()
	b.mu.Lock()
	j, ok := b.jobs[id]
	switch {
	case !ok:
		b.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	case j.State.Final():
		b.mu.Unlock()
		return fmt.Errorf("%w: %s is %s", ErrFinal, id, j.State)
	case j.Group != nil || j.Resv != nil:
		b.mu.Unlock()
		return fmt.Errorf("%w: %s is a group's parent or has an advance reservation; requeue applies to one job that runs", ErrBadRequest, id)
	case j.State != Dispatched && j.State != Running:
		b.mu.Unlock()
		return fmt.Errorf("%w: %s is %s; only a dispatched or running job can be requeued", ErrBadRequest, id, j.State)
	}
	var cs []cancelReq
	for _, c := range j.Comps {
		if !c.State.Final() && c.RemoteID != "" {
			cs = append(cs, cancelReq{id, c.Site, c.RemoteID, "requeued by the user"})
		}
	}
	b.requeueAs(j, now, "requeued", fmt.Sprintf("requeued by the user: attempt %d stopped at %s; the job is placed again", j.Attempts, j.Sites()))
	b.compactLive()
	err := b.save(ctx, j)
	b.mu.Unlock()
	b.duties.doCancels(ctx, now, cs)
	return err
}

// article is "a" or "an" before a word.
func article(w string) string {
	if w != "" && slices.Contains([]byte("aeiou"), w[0]) {
		return "an"
	}
	return "a"
}
