package bridge

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/bridge/jobrules"
)

// Groups: job arrays, parameter sweeps and pipelines.
//
// A group is one parent job (Job.Group set, never in the policy's queue)
// and its elements, each a grid job of its own, placed independently, with
// Job.Parent naming the parent and the id <parent>_<index>: the array
// index ("g000042_57"), the sweep position (0-based) or the step number
// (1-based). The parent is stored once, at submission, with the whole
// request; the broker then makes the elements, in order, in its cycles:
// as many as the group's limit allows (at most Limit unfinished at once),
// each stored before it is counted. Because an element's id follows from
// its parent and position, Recover finds every element made before a
// crash (Filter.Parent) and makes the next one, never one twice.
//
// The parent is Held while its own dependencies are unmet, Running while
// its elements are made and run, and ends once every element has ended:
// Completed when all completed, Failed otherwise (with the count and the
// first failure), Cancelled when cancelled (which cancels every element).

// Group is the state of a group's parent.
type Group struct {
	Kind   string           // "array", "sweep" or "pipeline"
	Total  int              // elements in all
	Made   int              // elements made so far, in order
	Limit  int              // at most this many elements unfinished at once; 0 = no limit
	Counts map[JobState]int `json:",omitempty"` // ended elements by final state
}

// Group kinds.
const (
	KindArray    = "array"
	KindSweep    = "sweep"
	KindPipeline = "pipeline"
)

// MakePerCycle bounds the elements one cycle makes, over all groups: each
// is a durable store write made under the broker's lock, and an array of
// 10,000 elements without a limit must not hold the broker (and the API
// behind it) for as many writes at once. The rest are made by the next
// cycles.
const MakePerCycle = 256

// ElementID is the id of a group's element: the parent's id, "_", the index.
func ElementID(parent string, index int) string { return parent + "_" + strconv.Itoa(index) }

// grouped reports whether the request is a group.
func (r *Request) grouped() bool { return r.Array != "" || r.Sweep != nil || len(r.Steps) > 0 }

// hasDeps reports whether the request depends on other jobs.
func (r *Request) hasDeps() bool { return len(r.After)+len(r.AfterOK)+len(r.AfterAny) > 0 }

// groups makes the elements of arrays, sweeps and pipelines and holds the
// jobs whose dependencies are not met yet (deps.go). Guarded by the
// ledger's lock.
type groups struct {
	part
	*intake       // the rules every element and step obeys
	*reservations // an element's reservation ends with it
}

// groupInfo is what the broker keeps in memory of a live parent.
type groupInfo struct {
	indices []int    // element index by position
	kids    []string // ids of made elements not yet ended
}

// newGroup checks a group request's own fields (the job fields are checked
// by validate) and returns its state and element indices.
func newGroup(req *Request, p *problems) (*Group, []int) {
	n := 0
	for _, set := range []bool{req.Array != "", req.Sweep != nil, len(req.Steps) > 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		p.addf("Array", "give one of an array, a sweep or pipeline steps, not several")
		return nil, nil
	}
	if req.Window != nil {
		p.addf("Window", "an array, sweep or pipeline cannot ask for a reservation window")
	}
	switch {
	case req.Array != "":
		a, err := jobrules.ParseArray(req.Array)
		if err != nil {
			p.add("Array", err)
			return nil, nil
		}
		if len(req.Env)+2 > jobrules.MaxEnvVars {
			p.addf("Env", "has %d variables; an array element adds 2, at most %d in all", len(req.Env), jobrules.MaxEnvVars)
		}
		return &Group{Kind: KindArray, Total: len(a.Indices), Limit: a.Limit}, a.Indices
	case req.Sweep != nil:
		sw := req.Sweep
		sizes := make([]int, len(sw.Params))
		names := make([]string, len(sw.Params))
		for i, prm := range sw.Params {
			f := "Sweep.Params[" + strconv.Itoa(i) + "]"
			sizes[i], names[i] = len(prm.Values), prm.Name
			p.add(f+".Name", jobrules.EnvName(prm.Name))
			if _, clash := req.Env[prm.Name]; clash {
				p.addf(f+".Name", "%q is also set in Env; a swept variable takes its values from the sweep", prm.Name)
			}
			for k, v := range prm.Values {
				p.add(f+".Values["+strconv.Itoa(k)+"]", jobrules.EnvValue(v))
			}
			if d := jobrules.UniqueStrings(prm.Values); d != "" {
				p.addf(f+".Values", "%q is given twice", d)
			}
		}
		if d := jobrules.UniqueStrings(names); d != "" {
			p.addf("Sweep.Params", "parameter %q is given twice", d)
		}
		if sw.Limit < 0 || sw.Limit > jobrules.MaxElements {
			p.addf("Sweep.Limit", "must be 0 (no limit) or a whole number up to %d", jobrules.MaxElements)
		}
		if len(req.Env)+len(sw.Params)+2 > jobrules.MaxEnvVars {
			p.addf("Sweep.Params", "with Env, more than %d environment variables", jobrules.MaxEnvVars)
		}
		total, err := jobrules.SweepSize(sizes)
		if err != nil {
			p.add("Sweep.Params", err)
			return nil, nil
		}
		idx := make([]int, total)
		for i := range idx {
			idx[i] = i
		}
		return &Group{Kind: KindSweep, Total: total, Limit: sw.Limit}, idx
	default:
		if len(req.Steps) > jobrules.MaxSteps {
			p.addf("Steps", "has %d steps; at most %d", len(req.Steps), jobrules.MaxSteps)
			return nil, nil
		}
		idx := make([]int, len(req.Steps))
		for i := range idx {
			idx[i] = i + 1
		}
		return &Group{Kind: KindPipeline, Total: len(req.Steps)}, idx
	}
}

// element builds the request of a group's element at position k. The ledger's lock
// held (or the job not shared).
func element(parent *Job, indices []int, k int) (Request, error) {
	pr := &parent.Req
	if pr.Steps != nil {
		// A step's dependencies on earlier steps became ids at
		// submission (resolveSteps).
		st := pr.Steps[k].clone()
		st.OutputDir = strings.ReplaceAll(st.OutputDir, IDPlaceholder, ElementID(parent.ID, indices[k]))
		st.Owner = pr.Owner // a step is its pipeline's owner's, whatever the step says
		return st, nil
	}
	r := pr.clone()
	r.Array, r.Sweep, r.After, r.AfterOK, r.AfterAny, r.IdempotencyKey = "", nil, nil, nil, nil, "" // the parent's key is the parent's
	idx := indices[k]
	if r.Env == nil {
		r.Env = map[string]string{}
	}
	r.Env["GRIDSUB_ARRAY_INDEX"] = strconv.Itoa(idx)
	r.Env["GRIDSUB_ARRAY_JOB_ID"] = parent.ID
	if sw := pr.Sweep; sw != nil {
		sizes := make([]int, len(sw.Params))
		for i, prm := range sw.Params {
			sizes[i] = len(prm.Values)
		}
		for i, v := range jobrules.SweepValues(sizes, idx) {
			r.Env[sw.Params[i].Name] = sw.Params[i].Values[v]
		}
	}
	r.OutputDir = elementOutputDir(pr.OutputDir, ElementID(parent.ID, idx), idx)
	return r, nil
}

// elementOutputDir is where an element's outputs go: the parent's
// directory with IDPlaceholder replaced by the element's id, or, without
// the placeholder, a subdirectory named by the index (elements never share
// a directory).
func elementOutputDir(dir, id string, idx int) string {
	switch {
	case dir == "":
		return ""
	case strings.Contains(dir, IDPlaceholder):
		return strings.ReplaceAll(dir, IDPlaceholder, id)
	default:
		return filepath.Join(dir, strconv.Itoa(idx))
	}
}

// advanceGroups makes the elements each running group has room for, counts
// the ones that ended, and ends groups whose elements have all ended.
// Called in every cycle, cycleMu held.
func (gs *groups) advanceGroups(ctx context.Context, now time.Time) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if len(gs.parents) == 0 {
		return
	}
	budget := MakePerCycle
	keep := gs.parents[:0]
	for _, id := range gs.parents {
		p := gs.jobs[id]
		if p == nil || p.State.Final() {
			delete(gs.groups, id)
			continue
		}
		keep = append(keep, id)
		if p.State == Held {
			continue
		}
		gs.advanceGroup(ctx, p, now, &budget)
		if p.State.Final() {
			keep = keep[:len(keep)-1]
			delete(gs.groups, id)
		}
	}
	clear(gs.parents[len(keep):])
	gs.parents = keep
}

// advanceGroup advances one running group. The ledger's lock held.
func (gs *groups) advanceGroup(ctx context.Context, p *Job, now time.Time, budget *int) {
	g, gi := p.Group, gs.groups[p.ID]
	dirty := false
	kids := gi.kids[:0]
	for _, kid := range gi.kids {
		e := gs.jobs[kid]
		if e == nil || !e.State.Final() {
			if e != nil && p.Start.IsZero() && !e.Start.IsZero() {
				p.Start, dirty = e.Start, true
			}
			kids = append(kids, kid)
			continue
		}
		if g.Counts == nil {
			g.Counts = map[JobState]int{}
		}
		g.Counts[e.State]++
		if p.Start.IsZero() && !e.Start.IsZero() {
			p.Start = e.Start
		}
		if e.State != Completed && p.Reason == "" {
			p.Reason = fmt.Sprintf("element %s ended %s: %s", e.ID, e.State, e.Reason)
		}
		dirty = true
	}
	gi.kids = kids
	for g.Made < g.Total && (g.Limit == 0 || len(gi.kids) < g.Limit) && *budget > 0 {
		*budget--
		e, err := gs.makeElement(ctx, p, gi.indices, g.Made, now)
		if err != nil {
			gs.log.Error("making a group element failed", "job", p.ID, "err", err)
			break // tried again next cycle: the id is the same
		}
		g.Made++
		gi.kids = append(gi.kids, e.ID)
		dirty = true
	}
	if g.Made == g.Total && len(gi.kids) == 0 {
		gs.endGroup(p, now)
		dirty = true
	}
	if dirty {
		_ = gs.save(ctx, p)
	}
}

// makeElement creates, stores and queues (or holds) the element at
// position k. The ledger's lock held.
func (gs *groups) makeElement(ctx context.Context, p *Job, indices []int, k int, now time.Time) (*Job, error) {
	req, err := element(p, indices, k)
	if err != nil {
		return nil, err
	}
	idx := indices[k]
	e := &Job{ID: ElementID(p.ID, idx), Req: req, State: Queued, Submit: now, ExitCode: -1, Parent: p.ID, Index: idx}
	// Its QoS tier, from its request as for a single job: a none element
	// is retried after a failure, a high one runs copies.
	gs.assignTier(e, now)
	if req.hasDeps() {
		e.State, e.Waiting = Held, "its dependencies"
	}
	if _, dup := gs.jobs[e.ID]; dup {
		return nil, fmt.Errorf("element %s exists already", e.ID)
	}
	what := fmt.Sprintf("element %d of %s %s", idx, p.Group.Kind, p.ID)
	if p.Group.Kind == KindPipeline {
		what = fmt.Sprintf("step %d (%s) of pipeline %s", idx, req.Name, p.ID)
	}
	if err := gs.commit(ctx, e, now, "submitted", "", fmt.Sprintf("%s: %d node(s), walltime %s", what, req.Nodes, req.Estimate)); err != nil {
		e.Events = nil
		return nil, err
	}
	gs.add(e)
	return e, nil
}

// endGroup ends a group whose elements have all ended. The ledger's lock held.
func (gs *groups) endGroup(p *Job, now time.Time) {
	g := p.Group
	ok := g.Counts[Completed]
	p.End, p.ExitCode = now, 0
	if ok == g.Total {
		p.Reason = ""
		gs.transition(p, Completed, now, "completed", "", fmt.Sprintf("all %d elements completed", g.Total))
		return
	}
	p.ExitCode = 1
	var parts []string
	for _, st := range slices.Sorted(maps.Keys(g.Counts)) {
		if st != Completed {
			parts = append(parts, fmt.Sprintf("%d %s", g.Counts[st], st))
		}
	}
	p.Reason = fmt.Sprintf("%d of %d elements did not complete (%s); first: %s", g.Total-ok, g.Total, strings.Join(parts, ", "), p.Reason)
	gs.transition(p, Failed, now, "failed", "", p.Reason)
}

// cancelKids cancels the unfinished elements of a cancelled parent and
// returns the remote cancels to issue. The ledger's lock held.
func (gs *groups) cancelKids(ctx context.Context, p *Job, now time.Time) []cancelReq {
	gi := gs.groups[p.ID]
	if gi == nil {
		return nil
	}
	why := fmt.Sprintf("its %s %s was cancelled", p.Group.Kind, p.ID)
	var cs []cancelReq
	for _, kid := range gi.kids {
		e := gs.jobs[kid]
		if e == nil || e.State.Final() {
			continue
		}
		for _, c := range e.Comps {
			if !c.State.Final() {
				cs = append(cs, cancelReq{e.ID, c.Site, c.RemoteID, why})
			}
		}
		gs.endAs(e, now, Cancelled, "cancelled", "", why)
		gs.dequeue(e.ID)
		gs.dropResv(e, ResvReleased, why)
		if p.Group.Counts == nil {
			p.Group.Counts = map[JobState]int{}
		}
		p.Group.Counts[Cancelled]++
		_ = gs.save(ctx, e)
	}
	gi.kids = nil
	gs.compactLive()
	return cs
}

// recoverGroups rebuilds the live groups after a restart from the store:
// the elements made (Filter.Parent), the ones unfinished, the counts of
// the ended ones. The ledger's lock held; runs inside Recover.
func (gs *groups) recoverGroups(ctx context.Context, now time.Time, rep *RecoverReport) {
	for _, id := range gs.parents {
		p := gs.jobs[id]
		_, indices := newGroup(&p.Req, &problems{})
		gi := &groupInfo{indices: indices}
		gs.groups[id] = gi
		els, err := gs.store.List(ctx, Filter{Parent: id})
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("group %s: listing its elements: %w", id, err))
			continue
		}
		// Made: the elements found, and never fewer than the parent
		// recorded (the history cleanup may have deleted ended ones); the
		// counts of ended elements no longer stored are the recorded ones.
		pos := make(map[int]int, len(indices))
		for k, idx := range indices {
			pos[idx] = k
		}
		made := p.Group.Made
		counts := map[JobState]int{}
		for _, e := range els {
			made = max(made, pos[e.Index]+1)
			if e.State.Final() {
				counts[e.State]++
			} else {
				gi.kids = append(gi.kids, e.ID)
			}
		}
		missing := made - len(els)
		for _, st := range slices.Sorted(maps.Keys(p.Group.Counts)) {
			add := min(missing, max(0, p.Group.Counts[st]-counts[st]))
			counts[st] += add
			missing -= add
		}
		if missing > 0 {
			rep.Errors = append(rep.Errors, fmt.Errorf("group %s: %d made elements are neither stored nor counted", id, missing))
		}
		if made != p.Group.Made || !maps.Equal(counts, p.Group.Counts) {
			gs.note(p, now, "reconciled", "", fmt.Sprintf("after a restart: %d of %d elements made, %d ended", made, p.Group.Total, made-len(gi.kids)))
		}
		p.Group.Made, p.Group.Counts = made, counts
		if len(counts) == 0 {
			p.Group.Counts = nil
		}
		_ = gs.save(ctx, p)
	}
}

// arrayLimit is the limit of elements unfinished at once of the array or
// sweep j is an element of (0: none, or j is no element): a native array
// at a site carries it as its throttle (backends.JobSpec.ArrayLimit). The
// ledger's lock held.
func (l *ledger) arrayLimit(j *Job) int {
	if j.Parent == "" {
		return 0
	}
	if p := l.jobs[j.Parent]; p != nil && p.Group != nil && p.Group.Kind != KindPipeline {
		return p.Group.Limit
	}
	return 0
}
