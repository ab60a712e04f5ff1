package bridge

import (
	"context"
	"math"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Deadline policies (Request.DeadlinePolicy, the job file's
// scheduling.deadline_policy).
const (
	// DeadlineStrict: a job no site can finish by its deadline is refused
	// at submission, and rejected when it can no longer while it waits in
	// the queue. The default ("").
	DeadlineStrict = "strict"
	// DeadlineBestEffort: such a job is accepted (and kept) with a
	// "deadline-missed" event: it runs late rather than not at all.
	DeadlineBestEffort = "best-effort"
)

// EventDeadlineMissed is the event kind that reports a job that cannot
// (or did not) meet its deadline.
const EventDeadlineMissed = "deadline-missed"

// checkDeadlineFields checks a request's deadline fields at submission:
// the policy and the benefit function must be valid (a RequestError
// naming each field). Whether the deadline can be met is Feasible's to
// say (policy/feasible: the one deadline rule).
func checkDeadlineFields(req *Request) error {
	var p problems
	switch req.DeadlinePolicy {
	case "", DeadlineStrict, DeadlineBestEffort:
	default:
		p.addf("DeadlinePolicy", "%q: valid are %q and %q", req.DeadlinePolicy, DeadlineStrict, DeadlineBestEffort)
	}
	if w := req.Worth; w != nil {
		if req.Deadline.IsZero() {
			p.addf("Worth", "needs a deadline: the benefit function is measured against it (SPEC.md §4)")
		}
		if w.Shape != policy.Linear && w.Shape != policy.Step {
			p.addf("Worth.Shape", "%d: valid are %d (linear) and %d (step)", w.Shape, policy.Linear, policy.Step)
		}
		for _, x := range []struct {
			f      string
			v, min float64
			open   bool
		}{{"Worth.A", w.A, 0, true}, {"Worth.B", w.B, 0, true}, {"Worth.C", w.C, 0, false}} {
			if x.v != x.v || math.IsInf(x.v, 0) || x.v < x.min || x.open && x.v == x.min || x.v > 1e15 {
				op := ">="
				if x.open {
					op = ">"
				}
				p.addf(x.f, "must be a finite number %s %g and at most 1e15, got %g", op, x.min, x.v)
			}
		}
	}
	if len(p) > 0 {
		return RequestError(p)
	}
	return nil
}

// expireDeadlines reports the jobs that can no longer meet their deadline
// while they wait: a queued job that would end after its deadline even if
// it started now on its fastest site is rejected (strict) or reported once
// and kept (best-effort); a job dispatched to a site but not yet running
// there is reported once (a deadline-missed event; it is not withdrawn).
// Called by Cycle after the poll, before planning, so no planner ever
// starts a strict job that is already late.
func (tk *tracker) expireDeadlines(ctx context.Context, now time.Time, rep *CycleReport) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	var m *policy.Snapshot
	check := func(j *Job) (string, bool) {
		if j.Req.Deadline.IsZero() || j.Req.Window != nil {
			return "", false
		}
		if m == nil {
			m = tk.model(now, tk.opts.CheckFeasible) // what Submit knew
		}
		why := tk.late(&j.Req, m) // the rule Submit applied (policies.go)
		if why == "" {
			return "", false
		}
		return "cannot meet its " + why + " any more", true
	}
	var rejected []string
	for _, id := range tk.queue {
		j := tk.jobs[id]
		if j.State != Queued || (j.DeadlineMissed && j.Req.DeadlinePolicy == DeadlineBestEffort) {
			continue
		}
		why, late := check(j)
		if !late {
			continue
		}
		j.DeadlineMissed = true
		if j.Req.DeadlinePolicy == DeadlineBestEffort {
			tk.record(ctx, j, now, EventDeadlineMissed, "", why+"; best-effort: it stays queued and will run late")
			continue
		}
		tk.endAs(j, now, Rejected, EventDeadlineMissed, "", "deadline missed while queued: "+why)
		_ = tk.persist(ctx, j)
		rejected = append(rejected, id)
		rep.Rejected++
	}
	for _, id := range rejected {
		tk.dequeue(id)
	}
	for _, id := range tk.live {
		j := tk.jobs[id]
		if j == nil || j.State != Dispatched || j.DeadlineMissed {
			continue
		}
		if why, late := check(j); late {
			j.DeadlineMissed = true
			tk.record(ctx, j, now, EventDeadlineMissed, "", why+" (it waits in a site's queue: reported, not withdrawn)")
		}
	}
}
