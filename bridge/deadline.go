package bridge

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gridsub/gridsub/backends"
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

// earliestEnd is a lower bound of the job's completion if it started at
// now: the fastest site it may use, idle, with its input transfer
// (equations 1–2: h_j·T and t_trans(origin, j)). A job wider than every
// single site ends no earlier (the multi-site factor p >= 1 only adds). It
// returns the site that gives it, or -1 when no site is allowed.
func (b *Broker) earliestEnd(req *Request, snap *policy.Snapshot) (time.Time, int) {
	pj := policy.Job{Width: req.Nodes, Estimate: req.Estimate, Origin: -1, DataSize: req.DataSize}
	if req.Origin != "" {
		pj.Origin = b.siteIdx[req.Origin]
	}
	best, at := time.Duration(math.MaxInt64), -1
	for s := range b.sites {
		if req.Sites != nil && !slices.Contains(req.Sites, b.sites[s].Name) {
			continue
		}
		parts := []policy.Part{{Site: s, Nodes: req.Nodes}}
		if d := snap.Runtime(&pj, parts) + snap.Transfer(&pj, parts); d < best {
			best, at = d, s
		}
	}
	if at < 0 {
		return time.Time{}, -1
	}
	return snap.Now.Add(best), at
}

// modelSnapshot is the run-time model's view of the sites (h, links, the
// measured uplinks) at now, for earliestEnd.
func (b *Broker) modelSnapshot(now time.Time) *policy.Snapshot {
	snap := &policy.Snapshot{Now: now, Links: b.opts.Links, Uplinks: b.linkEstimates(), Sites: make([]policy.Site, len(b.sites))}
	for s := range b.sites {
		snap.Sites[s] = policy.Site{Name: b.sites[s].Name, H: b.sites[s].H}
	}
	return snap
}

// linkEstimates is each site's measured uplink (backends.LinkEstimator),
// for the deadline checks; nil when none is measured.
func (b *Broker) linkEstimates() []policy.Link {
	var out []policy.Link
	for s, sc := range b.sites {
		le, ok := backends.AsLinkEstimator(sc.Backend)
		if !ok {
			continue
		}
		spb, lat, ok := le.LinkEstimate()
		if !ok {
			continue
		}
		if out == nil {
			out = make([]policy.Link, len(b.sites))
		}
		out[s] = policy.Link{SecPerByte: spb, Latency: lat}
	}
	return out
}

// CheckDeadline checks a request's deadline fields at submission (after
// the sites it names are known to exist): the policy and the benefit
// function must be valid, and some site must be able to finish the job by
// its deadline if it started now on an idle site. If none can, a strict
// request is refused (a RequestError with ErrDeadline, naming the
// predicted end), and a best-effort one is accepted with the warning
// returned (the caller records it as a deadline-missed event). Submit
// calls it; a dry run (gridsub validate) may too: it reads only the
// configuration and the measured links, never a site.
func (b *Broker) CheckDeadline(req *Request, now time.Time) (warning string, err error) {
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
		return "", RequestError(p)
	}
	if req.Deadline.IsZero() || req.Window != nil {
		return "", nil // a reservation's window is its deadline (checkWindow)
	}
	end, at := b.earliestEnd(req, b.modelSnapshot(now))
	if at < 0 || !end.After(req.Deadline) {
		return "", nil
	}
	msg := fmt.Sprintf("no site can finish the job by its deadline %s: even started now on the fastest site it may use (%s, h %g) it would end at %s, %s late",
		req.Deadline.UTC().Format(time.RFC3339), b.sites[at].Name, b.sites[at].H, end.UTC().Format(time.RFC3339), end.Sub(req.Deadline).Round(time.Second))
	if req.DeadlinePolicy == DeadlineBestEffort {
		return msg + "; accepted (deadline_policy: best-effort): it will run late", nil
	}
	return "", RequestError{{Field: "Deadline", Msg: msg + " (deadline_policy: strict; best-effort would accept it)", Err: ErrDeadline}}
}

// expireDeadlines reports the jobs that can no longer meet their deadline
// while they wait: a queued job that would end after its deadline even if
// it started now on its fastest site is rejected (strict) or reported once
// and kept (best-effort); a job dispatched to a site but not yet running
// there is reported once (a deadline-missed event; it is not withdrawn).
// Called by Cycle after the poll, before planning, so no planner ever
// starts a strict job that is already late.
func (b *Broker) expireDeadlines(ctx context.Context, now time.Time, rep *CycleReport) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var snap *policy.Snapshot
	check := func(j *Job) (string, bool) {
		if j.Req.Deadline.IsZero() || j.Req.Window != nil {
			return "", false
		}
		if snap == nil {
			snap = b.modelSnapshot(now)
		}
		end, at := b.earliestEnd(&j.Req, snap)
		if at < 0 || !end.After(j.Req.Deadline) {
			return "", false
		}
		return fmt.Sprintf("cannot meet its deadline %s any more: started now on the fastest site it may use (%s) it would end at %s, %s late",
			j.Req.Deadline.UTC().Format(time.RFC3339), b.sites[at].Name, end.UTC().Format(time.RFC3339), end.Sub(j.Req.Deadline).Round(time.Second)), true
	}
	var rejected []string
	for _, id := range b.queue {
		j := b.jobs[id]
		if j.State != Queued || (j.DeadlineMissed && j.Req.DeadlinePolicy == DeadlineBestEffort) {
			continue
		}
		why, late := check(j)
		if !late {
			continue
		}
		j.DeadlineMissed = true
		if j.Req.DeadlinePolicy == DeadlineBestEffort {
			b.addEvent(j, now, EventDeadlineMissed, "", why+"; best-effort: it stays queued and will run late")
			_ = b.persist(ctx, j)
			continue
		}
		j.State, j.Reason, j.End = Rejected, "deadline missed while queued: "+why, now
		b.addEvent(j, now, EventDeadlineMissed, "", j.Reason)
		_ = b.persist(ctx, j)
		rejected = append(rejected, id)
		rep.Rejected++
	}
	for _, id := range rejected {
		b.dequeue(id)
	}
	for _, id := range b.live {
		j := b.jobs[id]
		if j == nil || j.State != Dispatched || j.DeadlineMissed {
			continue
		}
		if why, late := check(j); late {
			j.DeadlineMissed = true
			b.addEvent(j, now, EventDeadlineMissed, "", why+" (it waits in a site's queue: reported, not withdrawn)")
			_ = b.persist(ctx, j)
		}
	}
}
