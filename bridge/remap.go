package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// Repetitive mapping, live (SPEC.md §4; GridWay's rescheduling of pending
// jobs). Every pass (each cycle, or every RemapOptions.Interval), a job
// that was sent to a site and still waits in that site's queue is
// compared with the best placement that could start it now elsewhere:
//
//   - where it waits, its predicted start is the batch system's own
//     estimate when the site's status gives one (SLURM: a pending job's
//     StartTime, once its backfill scheduler computed it; it counts the
//     jobs queued ahead), else the earliest time the site's busy profile
//     (the running jobs' nodes and the ends of their time limits, from
//     the site's Info) frees the nodes it asked for — a lower bound, as
//     jobs queued ahead are not counted, so no move is made on an
//     overestimated wait;
//   - elsewhere, only single sites with the whole width free now (after
//     this cycle's plan took its nodes) count; completion there is now +
//     input transfer + run time (the snapshot's model, heterogeneity
//     included), against predicted start + run time where it waits (its
//     inputs are already there).
//
// A job moves when the gain is at least MinGain and it has moved fewer
// than MaxMoves times. A co-allocated job moves whole or not at all. Never
// moved: QoS copies (high/low tiers), replicas, reservation (window) jobs,
// group parents and held jobs (never at a site), jobs whose job file pins
// `sites:` to one site, and jobs at a site that cannot withdraw a waiting
// job without the risk of killing it once started (backends.Withdrawer:
// SLURM and the simulated sites can; PBS and plugin sites cannot).
//
// A move is a write-ahead intent, like any dispatch:
//
//  1. Job.Moving (phase withdraw) is stored: "withdraw attempt k from A,
//     then submit attempt k+1 at B".
//  2. Each component at A is withdrawn (backends.Withdrawer: removed only
//     if it has not started; never killed). If the job started first, the
//     move is abandoned and the job stays at A (event move-abandoned). If
//     a site did not answer, the withdrawal is tried again next cycle.
//  3. Once A confirms it gone, attempt k+1 is stored as an ordinary
//     dispatch intent (State Submitting, phase submit, event moved) and
//     submitted at B under RemoteTag(id, k+1).
//
// After a crash Recover resolves the intent (recoverMove): in phase
// withdraw, nothing can be at B yet, and the withdrawal is redone (it is
// idempotent) before anything is submitted — old job still waiting: it is
// withdrawn now; started: the job stays at A; gone: attempt k+1 is
// submitted (or, if B has no room any more, the job is queued again for
// the planner). In phase submit, the old tag is checked once more: if the
// old job were somehow still at A, it is kept and any job of the new tag
// cancelled; otherwise the new tag is reconciled like any dispatch intent
// (found: adopted; missing: queued again, after Options.SubmitGrace for a
// submission that may still be in flight). So a job is never in two
// queues and never in none.

// RemapOptions turn on repetitive mapping (Options.Remap).
type RemapOptions struct {
	// MinGain is the least predicted gain in completion time worth a
	// move (0: DefaultRemapMinGain).
	MinGain time.Duration
	// MaxMoves bounds the moves of one job (0: DefaultRemapMaxMoves).
	MaxMoves int
	// Interval is the least time between two passes (0: every cycle).
	Interval time.Duration
}

// Defaults of RemapOptions.
const (
	DefaultRemapMinGain  = 10 * time.Minute
	DefaultRemapMaxMoves = 2
)

// Move phases (Move.Phase).
const (
	MoveWithdraw = "withdraw" // the old attempt is being withdrawn; nothing submitted at the target yet
	MoveSubmit   = "submit"   // the old attempt is confirmed gone; the new one is being submitted
)

// Event kinds of moves.
const (
	EventMoving        = "moving"         // a move's intent is recorded; withdrawing at the old site
	EventMoved         = "moved"          // withdrawn at the old site; submitting at the new one
	EventMoveAbandoned = "move-abandoned" // the job started where it waited; it stays there
	EventMoveWait      = "move-wait"      // the old site did not confirm the withdrawal; tried again
)

// Move is a move under way (Job.Moving), stored before any site hears
// of it.
type Move struct {
	Phase       string
	FromAttempt int         // the attempt being withdrawn
	From        []Component // its components
	To          []Component // the target placement (Site, Nodes)
	Since       time.Time   // when the move was decided
	FromStart   time.Time   // the predicted start where the job waited
	Gain        time.Duration
}

// remapper moves waiting jobs (see the top of this file). Its own
// bookkeeping is guarded by the ledger's lock.
type remapper struct {
	part
	*duties                     // the cancel stage
	*submitter                  // the submit stage, and how a submission is settled
	snap       *policy.Snapshot // the cycle's snapshot

	last   time.Time // when the last pass ran (RemapOptions.Interval)
	moving []string  // jobs whose withdrawal is to be (re)tried
	// hook, in tests, is called at each crash point of a move; true makes
	// the broker stop there as if the process had been killed.
	hook    func(point, id string) bool
	crashed bool // the hook said stop: the broker acts as if dead
	// est is the batch system's own estimated start of each waiting
	// component, as its last status said (SLURM: StartTime of a pending
	// job, once its backfill scheduler has computed it).
	est map[compKey]time.Time
}

// noteEstimate records the start a site estimates for a waiting
// component (only while remapping is on). The ledger's lock held.
func (rm *remapper) noteEstimate(site int, st backends.JobStatus) {
	if rm.opts.Remap == nil {
		return
	}
	k := compKey{site, st.ID}
	if st.State != backends.StatePending || st.Start.IsZero() {
		delete(rm.est, k)
		return
	}
	if rm.est == nil {
		rm.est = map[compKey]time.Time{}
	}
	rm.est[k] = st.Start
}

// Crash points of a move, for tests (remapper.hook).
const (
	crashBeforeWithdraw = "before-withdraw" // intent stored, nothing withdrawn
	crashAfterWithdraw  = "after-withdraw"  // withdrawn at the old site, the new intent not stored
	crashBeforeSubmit   = "before-submit"   // new intent stored, nothing submitted
	crashAfterSubmit    = "after-submit"    // submitted at the new site, the outcome not stored
)

func (rm *remapper) crashAt(point, id string) bool {
	return rm.hook != nil && rm.hook(point, id)
}

// remapOptions are Options.Remap with the defaults filled in.
func (rm *remapper) remapOptions() RemapOptions {
	o := *rm.opts.Remap
	if o.MinGain <= 0 {
		o.MinGain = DefaultRemapMinGain
	}
	if o.MaxMoves <= 0 {
		o.MaxMoves = DefaultRemapMaxMoves
	}
	return o
}

// remapWanted says whether this cycle has moves to carry on or look for.
func (rm *remapper) remapWanted(now time.Time) bool {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if len(rm.moving) > 0 {
		return true
	}
	if rm.opts.Remap == nil || rm.remapLater(now) {
		return false
	}
	return slices.ContainsFunc(rm.live, func(id string) bool { j := rm.jobs[id]; return j != nil && j.State == Dispatched })
}

// remapLater: the interval since the last pass has not passed. The ledger's lock held.
func (rm *remapper) remapLater(now time.Time) bool {
	iv := rm.opts.Remap.Interval
	return iv > 0 && !rm.last.IsZero() && now.Before(rm.last.Add(iv))
}

// remap runs one pass, after the cycle's plan was dispatched: it carries
// on the moves a restart or an unanswered withdrawal left, then moves the
// waiting jobs worth moving, oldest dispatch first, into the nodes the
// plan left free.
func (rm *remapper) remap(ctx context.Context, now time.Time, plan *policy.Plan, rep *CycleReport) {
	free := make([]int, len(rm.sites))
	for s := range free {
		if s < len(rm.snap.Sites) && !rm.snap.Sites[s].Down {
			free[s] = rm.snap.Sites[s].Free
		}
	}
	if plan != nil {
		for _, d := range plan.Decisions {
			if d.Action == policy.Start || d.Action == policy.Replicate {
				for _, p := range d.Chosen.Parts {
					free[p.Site] -= p.Nodes
				}
			}
		}
	}
	rm.mu.Lock()
	resume := rm.moving
	rm.moving = nil
	rm.mu.Unlock()
	for _, id := range resume {
		rm.carryMove(ctx, now, id, free, false, rep)
	}
	rm.mu.Lock()
	if rm.opts.Remap == nil || rm.remapLater(now) {
		rm.mu.Unlock()
		return
	}
	rm.last = now
	moves := rm.planMoves(now, free)
	rm.mu.Unlock()
	for _, mv := range moves {
		rm.startMove(ctx, now, mv, rep)
		if rm.crashed {
			return
		}
	}
}

// plannedMove is a move a pass decided.
type plannedMove struct {
	id        string
	to        policy.Option
	fromStart time.Time
	gain      time.Duration
}

// movable says whether a job may be moved now (see the top of this file).
// The ledger's lock held.
func (rm *remapper) movable(j *Job, now time.Time, o RemapOptions) bool {
	if j.State != Dispatched || j.Moving != nil || j.Moves >= o.MaxMoves || j.Resv != nil || j.Group != nil ||
		len(j.Req.Sites) == 1 || hasCopies(j) || !j.Intent.Before(now) || len(j.Comps) == 0 {
		return false
	}
	for _, c := range j.Comps {
		if c.Replica || c.State != backends.StatePending || c.RemoteID == "" {
			return false
		}
		if _, ok := backends.AsWithdrawer(rm.sites[rm.siteIdx[c.Site]].Backend); !ok {
			return false
		}
	}
	return true
}

// planMoves picks the moves of this pass and takes their nodes from free.
// The ledger's lock held, inside a cycle (the snapshot is this cycle's).
func (rm *remapper) planMoves(now time.Time, free []int) []plannedMove {
	o := rm.remapOptions()
	in := &policy.RemapInput{Now: now, Snapshot: rm.snap, Free: free, MinGain: o.MinGain}
	for _, id := range rm.live {
		j := rm.jobs[id]
		if j == nil || !rm.movable(j, now, o) {
			continue
		}
		w := policy.Waiting{Job: rm.policyJob(j), Parts: make([]policy.Part, len(j.Comps)), Estimates: make([]time.Time, len(j.Comps))}
		for k, c := range j.Comps {
			s := rm.siteIdx[c.Site]
			w.Parts[k] = policy.Part{Site: s, Nodes: c.Nodes}
			w.Estimates[k] = rm.est[compKey{s, c.RemoteID}]
		}
		in.Waiting = append(in.Waiting, w)
	}
	if len(in.Waiting) == 0 {
		return nil
	}
	rp := rm.opts.remapPolicy()
	moves, err := rp.Moves(in)
	if err != nil {
		rm.log.Warn("remapping pass failed", "policy", rp.Name(), "err", err)
		return nil
	}
	out := make([]plannedMove, 0, len(moves))
	for _, mv := range moves {
		for _, p := range mv.To.Parts {
			free[p.Site] -= p.Nodes
		}
		out = append(out, plannedMove{id: mv.Job, to: mv.To, fromStart: mv.FromStart, gain: mv.Gain})
	}
	return out
}

// startMove records a move's intent, then carries it out. The target's
// nodes were taken by planMoves.
func (rm *remapper) startMove(ctx context.Context, now time.Time, mv plannedMove, rep *CycleReport) {
	rm.mu.Lock()
	j := rm.jobs[mv.id]
	if j == nil || j.State != Dispatched || j.Moving != nil {
		rm.mu.Unlock()
		return
	}
	to := make([]Component, len(mv.to.Parts))
	for k, p := range mv.to.Parts {
		to[k] = Component{Site: rm.names[p.Site], Nodes: p.Nodes, State: backends.StateUnknown, ExitCode: -1}
	}
	j.Moving = &Move{Phase: MoveWithdraw, FromAttempt: j.Attempts, From: slices.Clone(j.Comps), To: to, Since: now,
		FromStart: mv.fromStart, Gain: mv.gain}
	if err := rm.commit(ctx, j, now, EventMoving, "", fmt.Sprintf("attempt %d waits at %s (predicted start %s); %s can start it now: gain %s; withdrawing it from %s first",
		j.Attempts, compsString(j.Comps), clock(mv.fromStart, now), compsString(to), gainString(mv.gain), compsString(j.Comps))); err != nil {
		j.Moving = nil // not recorded, so not acted on
		rm.mu.Unlock()
		rep.Errors = append(rep.Errors, fmt.Errorf("job %s: recording the move intent: %w", j.ID, err))
		return
	}
	// Its components may read as cancelled from now on: no poll may take
	// that for a failure.
	rm.unindex(j)
	for _, c := range j.Comps {
		delete(rm.est, compKey{rm.siteIdx[c.Site], c.RemoteID})
	}
	rm.mu.Unlock()
	if rm.crash(crashBeforeWithdraw, mv.id) {
		return
	}
	rm.carryMove(ctx, now, mv.id, nil, true, rep)
}

// carryMove withdraws a moving job's old attempt and, once its site
// confirms it gone, submits the new one (see the top of this file). fresh:
// the move was decided in this pass and its target's nodes are taken;
// otherwise (resumed) the target must still have them in free, or the job
// is queued again for the planner.
func (rm *remapper) carryMove(ctx context.Context, now time.Time, id string, free []int, fresh bool, rep *CycleReport) {
	rm.mu.Lock()
	j := rm.jobs[id]
	if j == nil || j.Moving == nil || j.Moving.Phase != MoveWithdraw || j.State != Dispatched {
		rm.mu.Unlock()
		return
	}
	mv := j.Moving
	from := slices.Clone(mv.From)
	owner := rm.identityOwner(j)
	rm.mu.Unlock()

	errs := make([]error, len(from))
	for k, c := range from {
		s := rm.siteIdx[c.Site]
		be, err := rm.backendFor(ctx, s, owner)
		if err != nil {
			errs[k] = err
			continue
		}
		w, ok := backends.AsWithdrawer(be)
		if !ok {
			errs[k] = fmt.Errorf("%w: site %s cannot withdraw a waiting job", backends.ErrUnsupported, c.Site)
			continue
		}
		errs[k] = w.Withdraw(ctx, c.RemoteID)
		rm.markStale(s)
	}
	if rm.crash(crashAfterWithdraw, id) {
		return
	}

	rm.mu.Lock()
	var started, unknown []string
	var cancels []cancelReq
	gone := 0
	for k, err := range errs {
		switch {
		case err == nil:
			gone++
			from[k].State = backends.StateCancelled
		case errors.Is(err, backends.ErrStarted):
			started = append(started, fmt.Sprintf("%s: %v", from[k].Site, err))
			cancels = append(cancels, cancelReq{id, from[k].Site, from[k].RemoteID, "its co-allocated siblings were withdrawn to move the job"})
		default:
			unknown = append(unknown, fmt.Sprintf("%s: %v", from[k].Site, err))
		}
	}
	switch {
	case len(started) > 0 && gone == 0:
		// Lost the race with the start: the job stays where it is.
		j.Moving = nil
		for _, c := range j.Comps {
			rm.index(id, c)
		}
		rm.record(ctx, j, now, EventMoveAbandoned, "", fmt.Sprintf("the move to %s was abandoned: the job started at %s before it could be withdrawn (%s); it stays there",
			compsString(mv.To), compsString(j.Comps), strings.Join(started, "; ")))
		rm.mu.Unlock()
		rm.giveBack(free, fresh, mv.To)
		return
	case len(unknown) > 0:
		rm.record(ctx, j, now, EventMoveWait, "", fmt.Sprintf("withdrawing attempt %d not confirmed (%s); tried again next cycle before anything is submitted elsewhere",
			mv.FromAttempt, strings.Join(unknown, "; ")))
		rm.moving = append(rm.moving, id)
		rm.mu.Unlock()
		rm.giveBack(free, fresh, mv.To)
		return
	}
	// Gone everywhere (a started share of a co-allocated job is cancelled
	// below: its siblings are gone, so it can never run as the job).
	ts := rm.siteIdx[mv.To[0].Site]
	nodes := mv.To[0].Nodes
	if !fresh && (free == nil || free[ts] < nodes) {
		j.Moving = nil
		j.Moves++
		j.Comps = from
		rm.requeueAs(j, now, "requeued", fmt.Sprintf("attempt %d was withdrawn from %s to move the job to %s, which has no room any more; queued again",
			mv.FromAttempt, compsString(from), compsString(mv.To)))
		rm.compactLive()
		_ = rm.save(ctx, j)
		rm.mu.Unlock()
		rm.duties.doCancels(ctx, now, cancels)
		return
	}
	if !fresh {
		free[ts] -= nodes
	}
	pj := rm.policyJob(j)
	parts := []policy.Part{{Site: ts, Nodes: nodes}}
	opt := policy.Option{Parts: parts, Start: now, Runtime: rm.snapRuntime(&pj, parts), Transfer: rm.snapTransfer(&pj, parts), Immediate: true}
	oldSites := compsString(from)
	j.Moves++
	mv.Phase, mv.From = MoveSubmit, from
	j.Attempts++
	j.Predicted, j.Beaten, j.SiteNames = opt, nil, rm.names
	j.Comps = []Component{{Site: rm.names[ts], Nodes: nodes, State: backends.StateUnknown, ExitCode: -1}}
	j.State, j.Intent = Submitting, now
	delete(rm.restarted, id) // an intent of this process (recover.go: inFlight)
	msg := fmt.Sprintf("moved from %s (predicted start %s) to %s (start now): gain %s (move %d of %d)",
		oldSites, clock(mv.FromStart, now), rm.names[ts], gainString(mv.Gain), j.Moves, rm.maxMoves())
	if len(started) > 0 {
		msg += "; the share that had started is cancelled: " + strings.Join(started, "; ")
	}
	if err := rm.commit(ctx, j, now, EventMoved, "", msg); err != nil {
		// Not recorded: nothing is submitted. The old attempt is gone,
		// so the job waits in the queue for the planner.
		j.Attempts--
		j.Moves--
		j.Moving = nil
		rm.requeueAs(j, now, "requeued", fmt.Sprintf("attempt %d was withdrawn from %s, but the move could not be recorded (%v); queued again", mv.FromAttempt, oldSites, err))
		rm.compactLive()
		rm.mu.Unlock()
		rep.Errors = append(rep.Errors, fmt.Errorf("job %s: recording the move: %w", id, err))
		rm.duties.doCancels(ctx, now, cancels)
		return
	}
	rm.compactLive() // a Submitting job is not live; finishParts makes it live again
	spec := rm.spec(j, 0, 1, rm.names[ts], nodes, opt)
	rm.mu.Unlock()
	rm.duties.doCancels(ctx, now, cancels)
	if rm.crash(crashBeforeSubmit, id) {
		return
	}
	d := policy.Decision{Job: id, Action: policy.Start, Chosen: opt}
	rids, errs := rm.submitAll(ctx, []submitReq{{ts, spec, rm.identityOwner(j)}})
	if rm.crash(crashAfterSubmit, id) {
		return
	}
	rm.finishParts(ctx, now, id, d, rids, errs, rep)
	rm.mu.Lock()
	if j.Moving != nil {
		// Settled like any dispatch: dispatched, unresolved (reconciled
		// by the new tag), queued again, or failed.
		j.Moving = nil
		if j.State == Queued && !slices.Contains(rm.queue, id) {
			rm.enqueue(j)
		}
		_ = rm.save(ctx, j)
	}
	rm.mu.Unlock()
}

// moveNote is what explain says of a job that is no longer queued: its
// last move (or abandoned move), "" when it has none.
func moveNote(j *Job) string {
	for i := len(j.Events) - 1; i >= 0; i-- {
		if e := j.Events[i]; e.Kind == EventMoved || e.Kind == EventMoveAbandoned {
			return "; last move: " + e.Msg
		}
	}
	return ""
}

// giveBack returns a move's target nodes to free when this pass took them.
func (rm *remapper) giveBack(free []int, fresh bool, to []Component) {
	if !fresh || free == nil {
		return
	}
	for _, c := range to {
		free[rm.siteIdx[c.Site]] += c.Nodes
	}
}

// snapRuntime and snapTransfer use this cycle's snapshot, or the
// estimate alone when the cycle has none.
func (rm *remapper) snapRuntime(pj *policy.Job, parts []policy.Part) time.Duration {
	if len(rm.snap.Sites) != len(rm.sites) {
		return pj.Estimate
	}
	return rm.snap.Runtime(pj, parts)
}

func (rm *remapper) snapTransfer(pj *policy.Job, parts []policy.Part) time.Duration {
	if len(rm.snap.Sites) != len(rm.sites) {
		return 0
	}
	return rm.snap.Transfer(pj, parts)
}

func (rm *remapper) maxMoves() int {
	if rm.opts.Remap == nil {
		return DefaultRemapMaxMoves
	}
	return rm.remapOptions().MaxMoves
}

// crash calls the test hook at a crash point; once it says so, the broker
// acts as if dead: no further step of any move is taken.
func (rm *remapper) crash(point, id string) bool {
	if rm.crashAt(point, id) {
		rm.crashed = true
	}
	return rm.crashed
}

func compsString(cs []Component) string {
	var sb strings.Builder
	for i, c := range cs {
		if i > 0 {
			sb.WriteByte('+')
		}
		sb.WriteString(c.Site)
		if len(cs) > 1 {
			fmt.Fprintf(&sb, ":%d", c.Nodes)
		}
	}
	return sb.String()
}

// clock formats a predicted time for an event: "14:05 UTC", with the
// date when it is not the day of now.
func clock(t, now time.Time) string {
	if t.UTC().Format(time.DateOnly) == now.UTC().Format(time.DateOnly) {
		return t.UTC().Format("15:04 MST")
	}
	return t.UTC().Format("2006-01-02 15:04 MST")
}

// gainString is a gain rounded to the minute ("42m", "1h5m"), or to the
// second below a minute.
func gainString(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	s := d.Round(time.Minute).String()
	return strings.TrimSuffix(s, "0s")
}
