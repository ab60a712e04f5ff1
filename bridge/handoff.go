package bridge

import (
	"context"
	"slices"
	"time"
)

// Take adds to the broker jobs another broker sharing its store wrote
// there — the submissions a follower accepted and handed to the leader —
// as Recover adds stored jobs: a queued job joins the end of the queue, a
// held job or a group's parent waits as after a restart, a reserved job is
// admitted again. Jobs the broker already has, and jobs no longer waiting
// (another leader dispatched or ended them), are left out. Nothing is
// written. It returns the ids it added.
func (b *Broker) Take(ctx context.Context, jobs []*Job, now time.Time) []string {
	b.cycleMu.Lock()
	defer b.cycleMu.Unlock()
	var fresh []*Job
	b.mu.Lock()
	for _, j := range jobs {
		if _, dup := b.jobs[j.ID]; dup || !slices.Contains([]JobState{Queued, Held, Reserved}, j.State) {
			continue
		}
		if b.checkSites("sites of stored job "+j.ID, compSites(j)) != nil {
			continue
		}
		fresh = append(fresh, j)
	}
	resv := slices.ContainsFunc(fresh, func(j *Job) bool { return j.Resv != nil })
	b.mu.Unlock()
	if resv {
		b.resv.learnCapacity(ctx, now)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if resv {
		b.resv.readmit(ctx, fresh, now)
	}
	var ids []string
	for _, j := range fresh {
		if _, dup := b.jobs[j.ID]; dup {
			continue
		}
		b.jobs[j.ID] = j
		j.final = nil
		ids = append(ids, j.ID)
		switch {
		case j.Group != nil || j.State == Held:
			if j.State == Held {
				b.held = append(b.held, j.ID)
			}
			if j.Group != nil {
				b.parents = append(b.parents, j.ID)
			}
		case j.State == Queued:
			b.queueLast(j)
		case j.State == Reserved:
			b.reserved = append(b.reserved, j.ID)
		}
	}
	return ids
}
