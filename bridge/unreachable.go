package bridge

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Jobs whose sites cannot be reached wait; they are never rejected for it.
//
// A site whose Info fails in a cycle is Down in the policy's snapshot, and
// its size was 0: a planner that checks a job's width against the sites it
// may use then rejected a 2-node job as "too wide" when every site was
// merely unreachable. Two measures, both here in the broker so that every
// planner (built-in or plugin) gets them:
//
//   - a down site keeps the size and node shape it had when last seen
//     (downKeepsSize), so "too wide" is judged on what the grid has, and a
//     job too wide for the sites that are up waits for the others;
//   - a queued job whose every eligible site is down is not handed to the
//     planner at all (holdUnreachable): nothing can be decided for it, even
//     for a site never seen yet whose size is unknown. It stays queued with
//     Reason "waiting: every eligible site is unreachable (A, B)" and one
//     "waiting" event, and is planned again once one of them answers.

// unreachableReason starts the Reason of a job held by holdUnreachable.
const unreachableReason = "waiting: every eligible site is unreachable"

// holdUnreachable takes out of snap's queue the jobs whose every eligible
// site (allowed, or all) is down, and marks them; it clears the mark of
// the jobs planned again. Without a down site and a marked job it costs
// one pass over the sites.
func (ps *planStage) holdUnreachable(ctx context.Context, now time.Time, snap *policy.Snapshot) {
	down := 0
	for i := range snap.Sites {
		if snap.Sites[i].Down {
			down++
		}
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if down == 0 && len(ps.unreachable) == 0 {
		return
	}
	var keep []policy.Job
	for k := range snap.Queue {
		pj := &snap.Queue[k]
		j := ps.jobs[pj.ID]
		if j == nil {
			continue
		}
		if names, all := ps.allDown(snap, pj); all {
			if keep == nil {
				keep = append(make([]policy.Job, 0, len(snap.Queue)), snap.Queue[:k]...)
			}
			why := unreachableReason + " (" + strings.Join(names, ", ") + ")" + ps.misconfiguredOf(names)
			if j.Reason != why {
				j.Reason = why
				ps.record(ctx, j, now, "waiting", "", why[len("waiting: "):]+": the job waits for one to answer")
			}
			if ps.unreachable == nil {
				ps.unreachable = map[string]bool{}
			}
			ps.unreachable[j.ID] = true
			continue
		}
		if ps.unreachable[j.ID] {
			delete(ps.unreachable, j.ID)
			if strings.HasPrefix(j.Reason, unreachableReason) {
				j.Reason = ""
				_ = ps.save(ctx, j)
			}
		}
		if keep != nil {
			keep = append(keep, *pj)
		}
	}
	for id := range ps.unreachable {
		if j := ps.jobs[id]; j == nil || j.State != Queued {
			delete(ps.unreachable, id) // cancelled, or gone
		}
	}
	if keep != nil {
		snap.Queue = keep[:len(keep):len(keep)]
	}
}

// allDown reports whether every site job pj may use is down, with their
// names.
func (ps *planStage) allDown(snap *policy.Snapshot, pj *policy.Job) ([]string, bool) {
	var names []string
	for i := range snap.Sites {
		if pj.Allowed != nil && !slices.Contains(pj.Allowed, i) {
			continue
		}
		if !snap.Sites[i].Down {
			return nil, false
		}
		names = append(names, snap.Sites[i].Name)
	}
	return names, len(names) > 0
}

// misconfiguredOf is "; " and the refusal of each site among names whose
// Info failed because the site refuses its configuration (misconfig.go),
// or "". The ledger's lock held.
func (ps *planStage) misconfiguredOf(names []string) string {
	var out []string
	for _, n := range names {
		if s := ps.siteIdx[n]; misconfigured(ps.infoErr[s]) {
			out = append(out, ps.downWhy(s))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "; " + strings.Join(out, "; ")
}
