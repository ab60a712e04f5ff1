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

// remapState is the broker's bookkeeping for moves. b.mu guards it.
type remapState struct {
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
// component (only while remapping is on). b.mu held.
func (b *Broker) noteEstimate(site int, st backends.JobStatus) {
	if b.opts.Remap == nil {
		return
	}
	k := compKey{site, st.ID}
	if st.State != backends.StatePending || st.Start.IsZero() {
		delete(b.rm.est, k)
		return
	}
	if b.rm.est == nil {
		b.rm.est = map[compKey]time.Time{}
	}
	b.rm.est[k] = st.Start
}

// Crash points of a move, for tests (remapState.hook).
const (
	crashBeforeWithdraw = "before-withdraw" // intent stored, nothing withdrawn
	crashAfterWithdraw  = "after-withdraw"  // withdrawn at the old site, the new intent not stored
	crashBeforeSubmit   = "before-submit"   // new intent stored, nothing submitted
	crashAfterSubmit    = "after-submit"    // submitted at the new site, the outcome not stored
)

func (b *Broker) crashAt(point, id string) bool {
	return b.rm.hook != nil && b.rm.hook(point, id)
}

// remapOptions are Options.Remap with the defaults filled in.
func (b *Broker) remapOptions() RemapOptions {
	o := *b.opts.Remap
	if o.MinGain <= 0 {
		o.MinGain = DefaultRemapMinGain
	}
	if o.MaxMoves <= 0 {
		o.MaxMoves = DefaultRemapMaxMoves
	}
	return o
}

// remapWanted says whether this cycle has moves to carry on or look for.
func (b *Broker) remapWanted(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.rm.moving) > 0 {
		return true
	}
	if b.opts.Remap == nil || b.remapLater(now) {
		return false
	}
	return slices.ContainsFunc(b.live, func(id string) bool { j := b.jobs[id]; return j != nil && j.State == Dispatched })
}

// remapLater: the interval since the last pass has not passed. b.mu held.
func (b *Broker) remapLater(now time.Time) bool {
	iv := b.opts.Remap.Interval
	return iv > 0 && !b.rm.last.IsZero() && now.Before(b.rm.last.Add(iv))
}

// remap runs one pass, after the cycle's plan was dispatched: it carries
// on the moves a restart or an unanswered withdrawal left, then moves the
// waiting jobs worth moving, oldest dispatch first, into the nodes the
// plan left free.
func (b *Broker) remap(ctx context.Context, now time.Time, plan *policy.Plan, rep *CycleReport) {
	free := make([]int, len(b.sites))
	for s := range free {
		if s < len(b.snap.Sites) && !b.snap.Sites[s].Down {
			free[s] = b.snap.Sites[s].Free
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
	b.mu.Lock()
	resume := b.rm.moving
	b.rm.moving = nil
	b.mu.Unlock()
	for _, id := range resume {
		b.carryMove(ctx, now, id, free, false, rep)
	}
	b.mu.Lock()
	if b.opts.Remap == nil || b.remapLater(now) {
		b.mu.Unlock()
		return
	}
	b.rm.last = now
	moves := b.planMoves(now, free)
	b.mu.Unlock()
	for _, mv := range moves {
		b.startMove(ctx, now, mv, rep)
		if b.rm.crashed {
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
// b.mu held.
func (b *Broker) movable(j *Job, now time.Time, o RemapOptions) bool {
	if j.State != Dispatched || j.Moving != nil || j.Moves >= o.MaxMoves || j.Resv != nil || j.Group != nil ||
		len(j.Req.Sites) == 1 || b.hasCopies(j) || !j.Intent.Before(now) || len(j.Comps) == 0 {
		return false
	}
	for _, c := range j.Comps {
		if c.Replica || c.State != backends.StatePending || c.RemoteID == "" {
			return false
		}
		if _, ok := backends.AsWithdrawer(b.sites[b.siteIdx[c.Site]].Backend); !ok {
			return false
		}
	}
	return true
}

// planMoves picks the moves of this pass and takes their nodes from free.
// b.mu held, inside a cycle (b.snap is this cycle's).
func (b *Broker) planMoves(now time.Time, free []int) []plannedMove {
	o := b.remapOptions()
	in := &policy.RemapInput{Now: now, Snapshot: &b.snap, Free: free, MinGain: o.MinGain}
	for _, id := range b.live {
		j := b.jobs[id]
		if j == nil || !b.movable(j, now, o) {
			continue
		}
		w := policy.Waiting{Job: b.policyJob(j), Parts: make([]policy.Part, len(j.Comps)), Estimates: make([]time.Time, len(j.Comps))}
		for k, c := range j.Comps {
			s := b.siteIdx[c.Site]
			w.Parts[k] = policy.Part{Site: s, Nodes: c.Nodes}
			w.Estimates[k] = b.rm.est[compKey{s, c.RemoteID}]
		}
		in.Waiting = append(in.Waiting, w)
	}
	if len(in.Waiting) == 0 {
		return nil
	}
	rp := b.remapPolicy()
	moves, err := rp.Moves(in)
	if err != nil {
		b.log.Warn("remapping pass failed", "policy", rp.Name(), "err", err)
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
func (b *Broker) startMove(ctx context.Context, now time.Time, mv plannedMove, rep *CycleReport) {
	b.mu.Lock()
	j := b.jobs[mv.id]
	if j == nil || j.State != Dispatched || j.Moving != nil {
		b.mu.Unlock()
		return
	}
	to := make([]Component, len(mv.to.Parts))
	for k, p := range mv.to.Parts {
		to[k] = Component{Site: b.names[p.Site], Nodes: p.Nodes, State: backends.StateUnknown, ExitCode: -1}
	}
	j.Moving = &Move{Phase: MoveWithdraw, FromAttempt: j.Attempts, From: slices.Clone(j.Comps), To: to, Since: now,
		FromStart: mv.fromStart, Gain: mv.gain}
	b.addEvent(j, now, EventMoving, "", fmt.Sprintf("attempt %d waits at %s (predicted start %s); %s can start it now: gain %s; withdrawing it from %s first",
		j.Attempts, compsString(j.Comps), clock(mv.fromStart, now), compsString(to), gainString(mv.gain), compsString(j.Comps)))
	if err := b.persist(ctx, j); err != nil {
		j.Moving = nil // not recorded, so not acted on
		b.mu.Unlock()
		rep.Errors = append(rep.Errors, fmt.Errorf("job %s: recording the move intent: %w", j.ID, err))
		return
	}
	// Its components may read as cancelled from now on: no poll may take
	// that for a failure.
	b.unindex(j)
	for _, c := range j.Comps {
		delete(b.rm.est, compKey{b.siteIdx[c.Site], c.RemoteID})
	}
	b.mu.Unlock()
	if b.crash(crashBeforeWithdraw, mv.id) {
		return
	}
	b.carryMove(ctx, now, mv.id, nil, true, rep)
}

// carryMove withdraws a moving job's old attempt and, once its site
// confirms it gone, submits the new one (see the top of this file). fresh:
// the move was decided in this pass and its target's nodes are taken;
// otherwise (resumed) the target must still have them in free, or the job
// is queued again for the planner.
func (b *Broker) carryMove(ctx context.Context, now time.Time, id string, free []int, fresh bool, rep *CycleReport) {
	b.mu.Lock()
	j := b.jobs[id]
	if j == nil || j.Moving == nil || j.Moving.Phase != MoveWithdraw || j.State != Dispatched {
		b.mu.Unlock()
		return
	}
	mv := j.Moving
	from := slices.Clone(mv.From)
	b.mu.Unlock()

	errs := make([]error, len(from))
	for k, c := range from {
		s := b.siteIdx[c.Site]
		w, ok := backends.AsWithdrawer(b.sites[s].Backend)
		if !ok {
			errs[k] = fmt.Errorf("%w: site %s cannot withdraw a waiting job", backends.ErrUnsupported, c.Site)
			continue
		}
		errs[k] = w.Withdraw(ctx, c.RemoteID)
		b.markStale(s)
	}
	if b.crash(crashAfterWithdraw, id) {
		return
	}

	b.mu.Lock()
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
			b.where[compKey{b.siteIdx[c.Site], c.RemoteID}] = id
		}
		b.addEvent(j, now, EventMoveAbandoned, "", fmt.Sprintf("the move to %s was abandoned: the job started at %s before it could be withdrawn (%s); it stays there",
			compsString(mv.To), compsString(j.Comps), strings.Join(started, "; ")))
		_ = b.persist(ctx, j)
		b.mu.Unlock()
		b.giveBack(free, fresh, mv.To)
		return
	case len(unknown) > 0:
		b.addEvent(j, now, EventMoveWait, "", fmt.Sprintf("withdrawing attempt %d not confirmed (%s); tried again next cycle before anything is submitted elsewhere",
			mv.FromAttempt, strings.Join(unknown, "; ")))
		_ = b.persist(ctx, j)
		b.rm.moving = append(b.rm.moving, id)
		b.mu.Unlock()
		b.giveBack(free, fresh, mv.To)
		return
	}
	// Gone everywhere (a started share of a co-allocated job is cancelled
	// below: its siblings are gone, so it can never run as the job).
	ts := b.siteIdx[mv.To[0].Site]
	nodes := mv.To[0].Nodes
	if !fresh && (free == nil || free[ts] < nodes) {
		j.Moving = nil
		j.Moves++
		j.Comps = from
		b.requeueAs(j, now, "requeued", fmt.Sprintf("attempt %d was withdrawn from %s to move the job to %s, which has no room any more; queued again",
			mv.FromAttempt, compsString(from), compsString(mv.To)))
		b.compactLive()
		_ = b.persist(ctx, j)
		b.mu.Unlock()
		b.doCancels(ctx, now, cancels)
		return
	}
	if !fresh {
		free[ts] -= nodes
	}
	pj := b.policyJob(j)
	parts := []policy.Part{{Site: ts, Nodes: nodes}}
	opt := policy.Option{Parts: parts, Start: now, Runtime: b.snapRuntime(&pj, parts), Transfer: b.snapTransfer(&pj, parts), Immediate: true}
	oldSites := compsString(from)
	j.Moves++
	mv.Phase, mv.From = MoveSubmit, from
	j.Attempts++
	j.Predicted, j.Beaten, j.SiteNames = opt, nil, b.names
	j.Comps = []Component{{Site: b.names[ts], Nodes: nodes, State: backends.StateUnknown, ExitCode: -1}}
	j.State, j.Intent = Submitting, now
	delete(b.restarted, id) // an intent of this process (recover.go: inFlight)
	msg := fmt.Sprintf("moved from %s (predicted start %s) to %s (start now): gain %s (move %d of %d)",
		oldSites, clock(mv.FromStart, now), b.names[ts], gainString(mv.Gain), j.Moves, b.maxMoves())
	if len(started) > 0 {
		msg += "; the share that had started is cancelled: " + strings.Join(started, "; ")
	}
	b.addEvent(j, now, EventMoved, "", msg)
	if err := b.persist(ctx, j); err != nil {
		// Not recorded: nothing is submitted. The old attempt is gone,
		// so the job waits in the queue for the planner.
		j.Attempts--
		j.Moves--
		j.Moving = nil
		b.requeueAs(j, now, "requeued", fmt.Sprintf("attempt %d was withdrawn from %s, but the move could not be recorded (%v); queued again", mv.FromAttempt, oldSites, err))
		b.compactLive()
		b.mu.Unlock()
		rep.Errors = append(rep.Errors, fmt.Errorf("job %s: recording the move: %w", id, err))
		b.doCancels(ctx, now, cancels)
		return
	}
	b.compactLive() // a Submitting job is not live; finishParts makes it live again
	spec := b.spec(j, 0, 1, b.names[ts], nodes, opt)
	b.mu.Unlock()
	b.doCancels(ctx, now, cancels)
	if b.crash(crashBeforeSubmit, id) {
		return
	}
	d := policy.Decision{Job: id, Action: policy.Start, Chosen: opt}
	rid, err := b.sites[ts].Backend.Submit(ctx, spec)
	b.markStale(ts)
	if b.crash(crashAfterSubmit, id) {
		return
	}
	b.finishParts(ctx, now, id, d, []backends.JobID{rid}, []error{err}, rep)
	b.mu.Lock()
	if j.Moving != nil {
		// Settled like any dispatch: dispatched, unresolved (reconciled
		// by the new tag), queued again, or failed.
		j.Moving = nil
		if j.State == Queued && !slices.Contains(b.queue, id) {
			b.enqueue(j)
		}
		_ = b.persist(ctx, j)
	}
	b.mu.Unlock()
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
func (b *Broker) giveBack(free []int, fresh bool, to []Component) {
	if !fresh || free == nil {
		return
	}
	for _, c := range to {
		free[b.siteIdx[c.Site]] += c.Nodes
	}
}

// enqueue puts a queued job at its FCFS place in the queue. b.mu held.
func (b *Broker) enqueue(j *Job) {
	pos, _ := slices.BinarySearchFunc(b.queue, j, func(id string, t *Job) int {
		q := b.jobs[id]
		if c := q.Submit.Compare(t.Submit); c != 0 {
			return c
		}
		return strings.Compare(q.ID, t.ID)
	})
	b.queue = slices.Insert(b.queue, pos, j.ID)
	b.pq = slices.Insert(b.pq, pos, b.policyJob(j))
}

// snapRuntime and snapTransfer use this cycle's snapshot, or the
// estimate alone when the cycle has none.
func (b *Broker) snapRuntime(pj *policy.Job, parts []policy.Part) time.Duration {
	if len(b.snap.Sites) != len(b.sites) {
		return pj.Estimate
	}
	return b.snap.Runtime(pj, parts)
}

func (b *Broker) snapTransfer(pj *policy.Job, parts []policy.Part) time.Duration {
	if len(b.snap.Sites) != len(b.sites) {
		return 0
	}
	return b.snap.Transfer(pj, parts)
}

func (b *Broker) maxMoves() int {
	if b.opts.Remap == nil {
		return DefaultRemapMaxMoves
	}
	return b.remapOptions().MaxMoves
}

// crash calls the test hook at a crash point; once it says so, the broker
// acts as if dead: no further step of any move is taken.
func (b *Broker) crash(point, id string) bool {
	if b.crashAt(point, id) {
		b.rm.crashed = true
	}
	return b.rm.crashed
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
