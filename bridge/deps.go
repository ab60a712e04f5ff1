package bridge

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/bridge/jobrules"
)

// Dependencies are held by the broker, not by any site's batch system, so
// a job may wait for jobs on other sites. A job with dependencies is
// stored Held and enters the queue in the first cycle that finds them met
// (releaseHeld); the store keeps it Held across a restart, and Recover
// checks it again against the stored states of its dependencies. Every
// dependency must name a job that exists when the dependent is submitted,
// so a dependency always points to an earlier job: a cycle cannot be
// formed. In a pipeline, a step may name only earlier steps.

// depKind is one kind of dependency.
type depKind struct {
	field string // the request's field, for messages
	name  string // as the job file spells it
	ids   func(r *Request) *[]string
}

var depKinds = []depKind{
	{"After", "after", func(r *Request) *[]string { return &r.After }},
	{"AfterOK", "afterok", func(r *Request) *[]string { return &r.AfterOK }},
	{"AfterAny", "afterany", func(r *Request) *[]string { return &r.AfterAny }},
}

// depStatus is a dependency's state as the broker can see it.
type depStatus struct {
	state   JobState
	started bool
	reason  string
	found   bool
	owner   string // Request.Owner of the dependency
}

// depOf looks a dependency up: in memory, else in the store (a job that
// ended before a restart). The ledger's lock held.
func (gs *groups) depOf(ctx context.Context, id string) depStatus {
	if j, ok := gs.jobs[id]; ok {
		return depStatus{j.State, !j.Start.IsZero(), j.Reason, true, j.Req.Owner}
	}
	j, err := gs.store.Get(ctx, id)
	if err != nil {
		return depStatus{}
	}
	return depStatus{j.State, !j.Start.IsZero(), j.Reason, true, j.Req.Owner}
}

// depMatcher finds the jobs a shortened dependency id may name: those in
// memory and, when the store can search, those it holds — of one owner
// only. The ledger's lock held.
type depMatcher struct {
	gs    *groups
	owner string
}

func (m depMatcher) MatchIDs(ctx context.Context, q string, limit int) ([]string, error) {
	var out []string
	for id := range m.gs.jobs {
		if strings.HasPrefix(id, q) || strings.HasSuffix(id, q) {
			out = append(out, id)
		}
	}
	if s, ok := m.gs.store.(IDMatcher); ok {
		more, err := s.MatchIDs(ctx, q, limit)
		if err != nil {
			return nil, err
		}
		for _, id := range more {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	out = slices.DeleteFunc(out, func(id string) bool { return m.gs.depOf(ctx, id).owner != m.owner })
	slices.Sort(out)
	return out, nil
}

// verdict says whether a job's dependencies are met (""), can never be
// met (fail: why), or are still awaited (wait: what). The ledger's lock held.
func (gs *groups) verdict(ctx context.Context, r *Request) (fail, wait string) {
	var waits []string
	for _, k := range depKinds {
		for _, id := range *k.ids(r) {
			d := gs.depOf(ctx, id)
			switch {
			case !d.found:
				return fmt.Sprintf("dependency %s (%s) is not known to the broker", id, k.name), ""
			case k.name == "after" && d.started:
			case k.name == "after" && d.state.Final():
				return fmt.Sprintf("dependency %s (after) ended %s without starting", id, d.state), ""
			case k.name == "afterok" && d.state == Completed:
			case k.name == "afterok" && d.state.Final():
				why := fmt.Sprintf("dependency %s (afterok) ended %s", id, d.state)
				if d.reason != "" {
					why += ": " + d.reason
				}
				return why, ""
			case k.name == "afterany" && d.state.Final():
			default:
				waits = append(waits, id+" ("+k.name+")")
			}
		}
	}
	return "", strings.Join(waits, ", ")
}

// checkDeps refuses dependencies that cannot be held: an unknown id, too
// many, or one that can never be met any more. names are the step names a
// pipeline step may also use (resolved to ids by the caller). The ledger's lock held.
func (gs *groups) checkDeps(ctx context.Context, r *Request, field string, p *problems) {
	n := 0
	for _, k := range depKinds {
		ids := *k.ids(r)
		n += len(ids)
		if d := jobrules.UniqueStrings(ids); d != "" {
			p.addf(field+k.field, "%q is given twice", d)
		}
		for i, id := range ids {
			f := field + k.field + "[" + strconv.Itoa(i) + "]"
			d := gs.depOf(ctx, id)
			if !d.found && id != "" {
				// A shortened id, as every command takes one.
				full, err := ResolveID(ctx, id, func(string) error { return ErrNotFound }, depMatcher{gs, r.Owner})
				switch {
				case errors.Is(err, ErrAmbiguous):
					p.addf(f, "%s", strings.TrimPrefix(err.Error(), ErrBadRequest.Error()+": "+ErrAmbiguous.Error()+": "))
					continue
				case err == nil:
					ids = slices.Clone(ids) // the caller's slice stays as it was
					ids[i], id = full, full
					*k.ids(r) = ids
					d = gs.depOf(ctx, id)
				}
			}
			if !d.found || d.owner != r.Owner {
				// Another user's job is not found either: a user cannot
				// wait on, or learn of, what is not theirs.
				p.addf(f, "no job %q: a dependency must name a job the broker knows (its id, or a unique prefix or suffix of it)", id)
				continue
			}
			if k.name == "afterok" && d.state.Final() && d.state != Completed {
				p.addf(f, "job %s already ended %s; this job could never run", id, d.state)
			}
			if k.name == "after" && d.state.Final() && !d.started {
				p.addf(f, "job %s already ended %s without starting; this job could never run", id, d.state)
			}
		}
	}
	if n > jobrules.MaxDeps {
		p.addf(field+"AfterOK", "%d dependencies; at most %d", n, jobrules.MaxDeps)
	}
}

// resolveSteps turns the step names in a pipeline's dependencies into
// element ids and checks them: a step may depend on earlier steps (by
// name) and on existing jobs (by id). The ledger's lock held.
func (gs *groups) resolveSteps(ctx context.Context, parent, owner string, steps []Request, p *problems) {
	names := map[string]int{}
	for i := range steps {
		st := &steps[i]
		f := "Steps[" + strconv.Itoa(i) + "]."
		if err := jobrules.StepName(st.Name); err != nil {
			p.add(f+"Name", err)
		} else if prev, dup := names[st.Name]; dup {
			p.addf(f+"Name", "step %q is also step %d; step names must be unique", st.Name, prev+1)
		}
		if st.grouped() {
			p.addf(f+"Array", "a pipeline step cannot itself be an array, sweep or pipeline")
		}
		var ids problems
		for _, k := range depKinds {
			list := *k.ids(st)
			for j, ref := range list {
				if at, ok := names[ref]; ok {
					list[j] = ElementID(parent, at+1)
					continue
				}
				if later := slices.IndexFunc(steps[i:], func(s Request) bool { return s.Name == ref }); later >= 0 {
					p.addf(f+k.field+"["+strconv.Itoa(j)+"]", "step %q comes later (or is this step); a step may depend only on the steps before it", ref)
					list[j] = ""
				}
			}
		}
		// Ids (not names) must be known jobs.
		ext := Request{Owner: owner}
		for _, k := range depKinds {
			for _, ref := range *k.ids(st) {
				if ref != "" && !strings.HasPrefix(ref, parent+"_") {
					switch k.name {
					case "after":
						ext.After = append(ext.After, ref)
					case "afterok":
						ext.AfterOK = append(ext.AfterOK, ref)
					default:
						ext.AfterAny = append(ext.AfterAny, ref)
					}
				}
			}
		}
		gs.checkDeps(ctx, &ext, f, &ids)
		// The step keeps the ids checkDeps resolved (shortened ones in full).
		for _, k := range depKinds {
			own, full := k.ids(st), *k.ids(&ext)
			resolved := slices.Clone(*own)
			n := 0
			for j, ref := range resolved {
				if ref != "" && !strings.HasPrefix(ref, parent+"_") && n < len(full) {
					resolved[j] = full[n]
					n++
				}
			}
			*own = resolved
		}
		*p = append(*p, ids...)
		names[st.Name] = i
	}
}

// submitHeld submits a group or a job with dependencies: it is stored
// Held (dependencies unmet) or, for a group without dependencies, Running
// (its elements are made by the cycles).
func (gs *groups) submitHeld(ctx context.Context, req Request, now time.Time) (*Job, error) {
	var p problems
	var g *Group
	if req.grouped() {
		g, _ = newGroup(&req, &p)
	}
	if req.Window != nil && req.hasDeps() && !req.grouped() {
		p.addf("Window", "a job with dependencies cannot ask for a reservation window")
	}
	if len(req.Steps) > 0 {
		if err := jobrules.Name(req.Name); err != nil {
			p.add("Name", err)
		}
		own := req
		own.Name, own.OutputDir, own.Steps, own.After, own.AfterOK, own.AfterAny = "", "", nil, nil, nil, nil
		own.IdempotencyKey = "" // the pipeline's own, not a step's
		if !reflect.DeepEqual(own, Request{}) {
			p.addf("Steps", "a pipeline's own fields are Name, OutputDir, After, AfterOK, AfterAny and Steps; give the job fields in each step")
		}
		for i := range req.Steps {
			st := &req.Steps[i]
			if st.OutputDir == "" {
				// The pipeline's output directory is its steps' (each its
				// own: IDPlaceholder becomes the step's id, or a
				// subdirectory per step).
				st.OutputDir = req.OutputDir
				if st.OutputDir != "" && !strings.Contains(st.OutputDir, IDPlaceholder) {
					st.OutputDir = filepath.Join(st.OutputDir, strconv.Itoa(i+1))
				}
			}
			if st.Window != nil {
				p.addf("Steps["+strconv.Itoa(i)+"].Window", "a pipeline step cannot ask for a reservation window")
			}
			var sp problems
			if err := gs.validate(st, now); err != nil {
				var re RequestError
				if errors.As(err, &re) {
					for _, fe := range re {
						c := *fe
						c.Field = "Steps[" + strconv.Itoa(i) + "]." + c.Field
						sp = append(sp, &c)
					}
				}
			}
			p = append(p, sp...)
		}
	} else if err := gs.validate(&req, now); err != nil {
		var re RequestError
		if !errors.As(err, &re) {
			return nil, err
		}
		p = append(p, re...)
	}
	gs.mu.Lock()
	gs.checkDeps(ctx, &req, "", &p)
	gs.mu.Unlock()
	if len(p) > 0 {
		return nil, RequestError(p)
	}
	for _, r := range append([]Request{req}, req.Steps...) {
		if r.Origin != "" {
			if err := gs.checkSites("origin", []string{r.Origin}); err != nil {
				return nil, err
			}
		}
		if err := gs.checkSites("sites", r.Sites); err != nil {
			return nil, err
		}
		if err := gs.checkSites("prefer", r.Prefer); err != nil {
			return nil, err
		}
	}
	if len(req.Steps) == 0 {
		// The rule a single job obeys (Submit): an array, a sweep or a job
		// with dependencies that no site could ever run — too wide, or a
		// strict deadline missed even started at once — is refused here,
		// as `gridsub validate` refuses it, not element by element later.
		if err := checkDeadlineFields(&req); err != nil {
			return nil, err
		}
		if _, err := gs.intake.feasible(ctx, &req, now); err != nil {
			return nil, err
		}
	}
	seq, err := gs.store.NextID(ctx)
	if err != nil {
		return nil, fmt.Errorf("allocating a job id: %w", err)
	}
	j := &Job{ID: fmt.Sprintf("%s%06d", gs.opts.IDPrefix, seq), Req: req, State: Held, Submit: now, ExitCode: -1, Group: g}
	if len(req.Steps) > 0 {
		gs.mu.Lock()
		gs.resolveSteps(ctx, j.ID, j.Req.Owner, j.Req.Steps, &p)
		gs.mu.Unlock()
		if len(p) > 0 {
			return nil, RequestError(p)
		}
	}
	switch {
	case len(req.Steps) > 0:
		j.Req.OutputDir = "" // handed to the steps above; the parent fetches nothing
	case g == nil:
		j.Req.OutputDir = strings.ReplaceAll(req.OutputDir, IDPlaceholder, j.ID)
	}
	msg := fmt.Sprintf("%d node(s), walltime %s", req.Nodes, req.Estimate)
	if g != nil {
		msg = fmt.Sprintf("%s of %d element(s)", g.Kind, g.Total)
		if g.Limit > 0 {
			msg += fmt.Sprintf(", at most %d at once", g.Limit)
		}
	}
	if req.hasDeps() {
		j.Waiting = "its dependencies"
		msg += "; held until its dependencies are met"
	} else {
		j.State = Running
	}
	gs.mu.Lock()
	gs.note(j, now, "submitted", "", msg)
	gs.mu.Unlock()
	if err := gs.putNew(ctx, j); err != nil {
		return nil, fmt.Errorf("storing job: %w", err)
	}
	gs.mu.Lock()
	gs.add(j)
	if g != nil {
		_, idx := newGroup(&j.Req, &problems{})
		gs.groups[j.ID] = &groupInfo{indices: idx}
		gs.parents = append(gs.parents, j.ID)
	}
	c := j.Clone()
	gs.mu.Unlock()
	gs.flushEvents()
	return c, nil
}

// releaseHeld queues every held job whose dependencies are met and
// cancels those whose dependencies failed. Called in every cycle (cycleMu
// held).
func (gs *groups) releaseHeld(ctx context.Context, now time.Time) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if len(gs.held) == 0 {
		return
	}
	keep := gs.held[:0]
	for _, id := range gs.held {
		j := gs.jobs[id]
		if j == nil || j.State != Held {
			continue
		}
		if j.UserHold {
			keep = append(keep, id)
			continue
		}
		fail, wait := gs.verdict(ctx, &j.Req)
		switch {
		case fail != "":
			j.Waiting = ""
			gs.endAs(j, now, Cancelled, "cancelled", "", fail)
		case wait != "":
			keep = append(keep, id)
			if w := "waiting for " + wait; w != j.Waiting {
				j.Waiting = w
				_ = gs.save(ctx, j)
			}
			continue
		case j.Group != nil:
			j.Waiting = ""
			gs.transition(j, Running, now, "released", "", "dependencies met; making its elements")
		default:
			j.Waiting = ""
			gs.transition(j, Queued, now, "released", "", "dependencies met; queued")
			gs.queueLast(j)
		}
		_ = gs.save(ctx, j)
	}
	clear(gs.held[len(keep):])
	gs.held = keep
}
