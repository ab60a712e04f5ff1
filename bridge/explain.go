package bridge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// DryRunID is the id a dry run's job has in its explanation.
const DryRunID = "dry-run"

// Explanation is where the planner would place a job now and why: the
// chosen placement, the alternatives it beat, the sites that are not
// eligible, and the planner's reasons. Nothing is submitted or changed.
type Explanation struct {
	Job    string    `json:"job"`    // the grid job id (DryRunID for a dry run)
	Time   time.Time `json:"time"`   // the broker's now of the plan
	Action string    `json:"action"` // start, replicate, reserve (waits for the predicted start), reject, or wait (no decision yet)
	// Chosen is the placement (nil for reject and wait); Alternatives the
	// best placements it beat, best first.
	Chosen       *Placement  `json:"chosen,omitempty"`
	Alternatives []Placement `json:"alternatives,omitempty"`
	// Excluded are the sites the job cannot use, with why (not allowed,
	// down, nodes without what it asks, refused it before).
	Excluded []Exclusion `json:"excluded,omitempty"`
	Reasons  []string    `json:"reasons,omitempty"` // the planner's reasons
	Planner  string      `json:"planner"`
	// Data says where the job's data lies and what moving it to each
	// placement shown costs (sitedata.go); "" when it has none.
	Data string `json:"data,omitempty"`
}

// Placement is one candidate placement, with its predicted times.
type Placement struct {
	Parts     []PlacedPart  `json:"parts"`
	Start     time.Time     `json:"start"`
	End       time.Time     `json:"end"`
	Runtime   time.Duration `json:"runtime_ns"`
	Transfer  time.Duration `json:"transfer_ns"`
	Immediate bool          `json:"immediate"` // every part has free nodes now
}

// PlacedPart is the nodes a placement takes at one site.
type PlacedPart struct {
	Site  string `json:"site"`
	Nodes int    `json:"nodes"`
}

// Exclusion is a site a job cannot use, and why.
type Exclusion struct {
	Site string `json:"site"`
	Why  string `json:"why"`
}

// Explain is a dry run: it validates req as Submit does (the same
// errors, the feasibility and deadline checks included) and
// asks the planner where the job would go if it were queued now behind
// the jobs already waiting. Nothing is stored or submitted; the sites are
// asked for their state as in a cycle.
func (b *Broker) Explain(ctx context.Context, req Request, now time.Time) (*Explanation, error) {
	req = req.clone()
	if err := b.in.validate(&req, now); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		field string
		names []string
	}{{"origin", nonEmpty(req.Origin)}, {"sites", req.Sites}, {"prefer", req.Prefer}} {
		if err := b.checkSites(c.field, c.names); err != nil {
			return nil, err
		}
	}
	if err := checkDeadlineFields(&req); err != nil {
		return nil, err
	}
	if _, err := b.in.feasible(ctx, &req, now); err != nil { // as Submit: the deadline rule included
		return nil, err
	}
	if req.Window != nil {
		return nil, fmt.Errorf("%w: a dry run cannot explain an advance reservation (its site is chosen when its window opens)", ErrBadRequest)
	}
	j := &Job{ID: DryRunID, Req: req, State: Queued, Submit: now}
	return b.explain(ctx, j, now, true)
}

// ExplainJob explains where the planner would place a queued job now (see
// Explanation). It fails with ErrNotFound for an unknown job and
// ErrBadRequest for one that is not queued.
func (b *Broker) ExplainJob(ctx context.Context, id string, now time.Time) (*Explanation, error) {
	b.mu.Lock()
	j, ok := b.jobs[id]
	var c *Job
	if ok {
		c = j.Clone()
	}
	b.mu.Unlock()
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	case c.State != Queued:
		return nil, fmt.Errorf("%w: job %s is %s, not queued: only a queued job's placement is still open (`gridsub status %s` shows where it went)%s",
			ErrBadRequest, id, c.State, id, moveNote(c))
	}
	e, err := b.explain(ctx, c, now, false)
	if err == nil && strings.HasPrefix(c.Reason, limitReason) {
		// The planner would place it, but its user's limit holds it back.
		e.Action, e.Chosen, e.Reasons = "wait", nil, append([]string{c.Reason}, e.Reasons...)
	}
	return e, err
}

// explain plans one pass, not Quiet, on a fresh snapshot with j in the
// queue (appended when extra, else already there) and reads j's decision.
func (b *Broker) explain(ctx context.Context, j *Job, now time.Time, extra bool) (*Explanation, error) {
	b.cycleMu.Lock()
	defer b.cycleMu.Unlock()
	var rep CycleReport
	snap, err := b.stages.snapshot.snapshot(ctx, now, &rep)
	if err != nil {
		return nil, err
	}
	s := *snap
	s.Quiet = false
	b.mu.Lock()
	pj := b.policyJob(j)
	b.mu.Unlock()
	if extra {
		s.Queue = append(slices.Clip(s.Queue), pj) // a copy: the broker's queue is untouched
	} else if !slices.ContainsFunc(s.Queue, func(q policy.Job) bool { return q.ID == j.ID }) {
		s.Queue = append(slices.Clip(s.Queue), pj)
	}
	plan, err := b.opts.Planner.Plan(ctx, &s)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", b.opts.Planner.Name(), err)
	}
	e := &Explanation{Job: j.ID, Time: now, Action: "wait", Planner: b.opts.Planner.Name()}
	names := b.names
	place := func(o policy.Option) Placement {
		p := Placement{Start: o.Start, End: o.End(), Runtime: o.Runtime, Transfer: o.Transfer, Immediate: o.Immediate}
		for _, part := range o.Parts {
			p.Parts = append(p.Parts, PlacedPart{Site: names[part.Site], Nodes: part.Nodes})
		}
		return p
	}
	for _, d := range plan.Decisions {
		if d.Job != j.ID {
			continue
		}
		e.Action, e.Reasons = d.Action.String(), d.Status.Reasons
		if d.Action != policy.Reject {
			c := place(d.Chosen)
			e.Chosen = &c
			for _, o := range d.Beaten {
				e.Alternatives = append(e.Alternatives, place(o))
			}
		}
	}
	for _, p := range plan.Pending {
		if p.Job == j.ID && e.Action == "wait" {
			e.Reasons = p.Status.Reasons
		}
	}
	if e.Action == "wait" && len(e.Reasons) == 0 {
		e.Reasons = []string{"the planner leaves it waiting in the queue this pass (jobs ahead of it come first)"}
	}
	e.Excluded = b.excluded(&s, j, &pj)
	for _, d := range plan.Decisions {
		if d.Job == j.ID {
			e.Data = dataNote(&s, names, &pj, append([]policy.Option{d.Chosen}, d.Beaten...))
		}
	}
	return e, nil
}

// excluded lists the sites j cannot use now, with why.
func (b *Broker) excluded(s *policy.Snapshot, j *Job, pj *policy.Job) []Exclusion {
	var out []Exclusion
	mis := s.Misfits(pj)
	b.mu.Lock()
	opt := b.optionMisfits(&j.Req, nil)
	b.mu.Unlock()
	for i, name := range b.names {
		if k := slices.IndexFunc(opt, func(m optionMisfit) bool { return m.site == name }); k >= 0 {
			out = append(out, Exclusion{name, opt[k].field + ": " + opt[k].msg})
			continue
		}
		switch {
		case j.Req.Sites != nil && !slices.Contains(j.Req.Sites, name):
			out = append(out, Exclusion{name, "not in the job's sites"})
		case slices.ContainsFunc(j.Refused, func(r Refusal) bool { return r.Site == name }):
			k := slices.IndexFunc(j.Refused, func(r Refusal) bool { return r.Site == name })
			out = append(out, Exclusion{name, "refused the job before: " + j.Refused[k].Why})
		case slices.ContainsFunc(mis, func(m policy.Misfit) bool { return m.Site == i }):
			k := slices.IndexFunc(mis, func(m policy.Misfit) bool { return m.Site == i })
			out = append(out, Exclusion{name, "its nodes have " + mis[k].Why})
		case s.Sites[i].Down:
			b.mu.Lock()
			why := b.downWhy(i)
			b.mu.Unlock()
			out = append(out, Exclusion{name, why})
		}
	}
	return out
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
