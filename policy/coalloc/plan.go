package coalloc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/gridsub/gridsub/policy"
)

// Sentinel errors. Bad configuration is reported by New and ByName; Plan
// itself fails only when a Selector cannot work on the snapshot.
var (
	// ErrBadOption: an Options field (or a planner name) has a value this
	// package does not know; the message lists the valid ones.
	ErrBadOption = errors.New("coalloc: bad option")
	// ErrTooManySites: Optimal selection was asked to enumerate more sites
	// than it is configured for (its cost is 2^N).
	ErrTooManySites = errors.New("coalloc: too many sites for optimal selection")
	// ErrBadSnapshot: the snapshot itself is inconsistent (a site's h is not
	// positive, Links does not match the sites); no job can be planned.
	ErrBadSnapshot = errors.New("coalloc: bad snapshot")
)

// checkSnapshot rejects snapshots the run-time model cannot work with.
func checkSnapshot(s *policy.Snapshot) error {
	for i := range s.Sites {
		if h := s.Sites[i].H; !(h > 0) || math.IsInf(h, 1) {
			return fmt.Errorf("%w: site %d (%s) has h = %v; h must be a positive number (1 = the reference machine)", ErrBadSnapshot, i, s.Sites[i].Name, h)
		}
	}
	if s.Links != nil {
		if len(s.Links) != len(s.Sites) {
			return fmt.Errorf("%w: Links has %d rows for %d sites", ErrBadSnapshot, len(s.Links), len(s.Sites))
		}
		for i, row := range s.Links {
			if len(row) != len(s.Sites) {
				return fmt.Errorf("%w: Links row %d has %d entries for %d sites", ErrBadSnapshot, i, len(row), len(s.Sites))
			}
			for k, l := range row {
				if err := checkLink(l); err != nil {
					return fmt.Errorf("%w: link %s -> %s: %v", ErrBadSnapshot, s.Sites[i].Name, s.Sites[k].Name, err)
				}
			}
		}
	}
	for i, l := range s.Uplinks {
		if err := checkLink(l); err != nil {
			return fmt.Errorf("%w: uplink to site %d: %v", ErrBadSnapshot, i, err)
		}
	}
	for i := range s.Sites {
		if tr := s.Sites[i].Trust; !(tr >= 0 && tr <= 1) {
			return fmt.Errorf("%w: site %d (%s) has trust %v; trust must be in (0,1], or 0 for unset", ErrBadSnapshot, i, s.Sites[i].Name, tr)
		}
	}
	return nil
}

// checkLink: a transfer never takes negative time (mayStartNow relies on
// it: a transfer only lengthens a hold).
func checkLink(l policy.Link) error {
	if !(l.SecPerByte >= 0) || l.Latency < 0 {
		return fmt.Errorf("transfer cost %g s/byte + %s; both must be >= 0", l.SecPerByte, l.Latency)
	}
	return nil
}

// Backfill is a backfilling rule (paper 000 Algorithm 4).
type Backfill string

// Backfilling rules.
const (
	None         Backfill = "none"         // strict FCFS: stop at the first job that cannot start
	EASY         Backfill = "easy"         // a later job starts now if it does not delay the head's reservation
	Conservative Backfill = "conservative" // every waiting job gets a reservation; a later job starts now only if it delays none
)

// Planner is the paper-000 framework (Algorithm 1): FCFS over the global
// queue; the head job goes through admission and resource selection; an
// immediate placement starts, a reserved one is held in the availability
// profiles and the jobs behind it are backfilled by the configured rule.
// It is safe for concurrent use: all pass state lives in a State per call.
type Planner struct {
	name   string
	sel    Selector
	bf     Backfill
	single bool // admission as for single-site placement (width <= largest site)
	beaten int
	pool   sync.Pool // of *State: one pass's memory, reused by the next
	memo   memo      // what the last Quiet pass left, for an arrival-only next one (memo.go)
}

// oneSite reports whether j must run on one site: always under
// single-site placement, else when the job forbids splitting.
func (p *Planner) oneSite(j *policy.Job) bool { return p.single || j.NoSplit }

// state is a State for s, from the pool when one is free.
func (p *Planner) state(s *policy.Snapshot, c *baseCache) *State {
	st, ok := p.pool.Get().(*State)
	if !ok {
		st = &State{}
	}
	if c != nil {
		st.resetCached(s, c)
	} else {
		st.reset(s)
	}
	return st
}

// quietScan looks ahead over the queue of a Quiet snapshot, where nobody
// reads the reservations and explanations a full pass adds. It returns the
// index of the last job that may start now (mayStartNow on the profiles
// before any reservation of this pass, which only take nodes away), -1 when
// none may, and the admission rejections with their queue indices. No job
// after that index can start in this pass, so the pass can stop there and
// add the later rejections: under load most passes start nothing at all
// (every node busy, or the waiting jobs too wide or too long for the gaps),
// and a Conservative pass would otherwise reserve every waiting job just to
// start none. ok is false when ctx ends (the full pass reports it).
//
// marks are the indices of the jobs a pass must still look at once its head
// waits, for EASY and none: the rejected and those that may start now (in
// st's memory, valid until the next pass).
//
// cands are the indices of the jobs that may start now, in order (in st's
// memory too).
//
// The scan starts at job first (0, or the first job the memo's pass did not
// see), with fcfsBlocked as strict FCFS left it before that job; it returns
// fcfsBlocked as it leaves it after the last.
func (p *Planner) quietScan(ctx context.Context, st *State, s *policy.Snapshot, g *gridInfo, first int, fcfsBlocked bool) (last int, rejects []indexed, marks, cands []int, blocked, ok bool) {
	last = -1
	marks, cands = st.marks[:0], st.cands[:0]
	defer func() { st.marks, st.cands = marks, cands }()
	// No job wider than every site's free nodes together may start now
	// (mayStartNow never finds more): under load most are, and this spares
	// them its per-site run times.
	freeAll := 0
	for i := range st.prof {
		freeAll += max(st.FreeNow(i), 0)
	}
	for qi := first; qi < len(s.Queue); qi++ {
		if qi%256 == 0 && ctx.Err() != nil {
			return 0, nil, nil, nil, false, false
		}
		j := &s.Queue[qi]
		if j.Width > freeAll && g.plain(s, j, p.single) {
			// admit's common case without the call: too wide to start now.
			fcfsBlocked = fcfsBlocked || p.bf == None
			continue
		}
		sites, d, pn := admit(s, j, p.single, p.name, g)
		switch {
		case d != nil:
			rejects = append(rejects, indexed{qi, *d})
			marks = append(marks, qi)
		case pn != nil, fcfsBlocked:
		case j.Width <= freeAll && p.mayStartNow(st, j, sites):
			last = qi
			marks = append(marks, qi)
			cands = append(cands, qi)
		default:
			// Strict FCFS starts nothing behind a job that cannot start.
			fcfsBlocked = p.bf == None
		}
	}
	return last, rejects, marks, cands, fcfsBlocked, true
}

// indexed is a decision with the queue index of its job.
type indexed struct {
	qi int
	d  policy.Decision
}

// mayStartNow is a necessary condition for j to start now on some of sites
// without delaying what the profiles already hold: a placement that uses
// site i holds its nodes at least as long as j alone on i (a larger h or the
// multi-site factor p only lengthens the run, a transfer only adds), and the
// free nodes over a window only shrink as it grows, so no immediate placement
// gets more from i than its fewest free nodes over that shortest hold. It
// costs a few profile reads where a Select costs a search; an EASY pass with
// thousands of waiting jobs asks it of each one.
func (p *Planner) mayStartNow(st *State, j *policy.Job, sites []int) bool {
	oneSite := p.oneSite(j)
	sum := 0
	for _, i := range sites {
		f := st.FreeNow(i)
		if f <= 0 || (oneSite && f < j.Width) {
			continue
		}
		c := f // a profile that never falls keeps f free over any hold
		if !st.prof[i].mono {
			one := [1]policy.Part{{Site: i, Nodes: 1}}
			c = st.prof[i].minFreeFromNow(hold(st.Snap.Runtime(j, one[:]), 0))
		}
		if oneSite && c >= j.Width {
			return true
		}
		sum += max(c, 0)
	}
	return !oneSite && sum >= j.Width
}

var _ policy.Planner = (*Planner)(nil)

// Name implements policy.Planner.
func (p *Planner) Name() string { return p.name }

// Plan implements policy.Planner.
func (p *Planner) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	if err := checkSnapshot(s); err != nil {
		return nil, err
	}
	return p.pass(ctx, s, &p.memo, false, nil)
}

// reuse is what a caller that plans pass after pass (a Session) lends a
// pass: a Plan whose memory the pass reuses (the caller reads it before the
// next pass), and where the queue indices of the jobs the plan starts or
// rejects go, in the order of the decisions.
type reuse struct {
	plan policy.Plan
	dec  []policy.Decision // the memory of plan.Decisions
	gone []int
	// bases are the sites' profiles as last built, for a caller that says
	// which sites' holds changed (baseCache.changed).
	bases baseCache
}

// pass is one pass over a checked snapshot. A Quiet pass starts from m when
// s follows the pass m remembers (memo.go) and remembers its own end there.
// vouched: the caller knows s follows m's pass (a Session, told every
// change), so m does not check it, and keeps no copy of s to check with.
// r, when not nil, lends the plan's memory and takes the indices of the
// jobs that leave the queue.
func (p *Planner) pass(ctx context.Context, s *policy.Snapshot, m *memo, vouched bool, r *reuse) (*policy.Plan, error) {
	var st *State
	var memoHead *policy.Decision  // the head the remembered pass left waiting
	first, fcfsBlocked := 0, false // the first job the look-ahead scans (memo: the first appended)
	resume := 0                    // memo, Conservative: the first job the remembered pass did not reserve
	if s.Quiet {
		st, memoHead, first, resume, fcfsBlocked = m.take(p, s, vouched)
	}
	if st == nil {
		var c *baseCache
		if r != nil {
			c = &r.bases
		}
		st = p.state(s, c)
	}
	kept := false // by the memo, for the next pass
	defer func() {
		if !kept {
			p.pool.Put(st)
		}
	}()
	g := &st.grid
	g.fill(s)
	var plan *policy.Plan
	if r != nil {
		clear(r.dec[:len(r.plan.Decisions)]) // what the last plan decided
		r.plan, r.gone = policy.Plan{}, r.gone[:0]
		plan = &r.plan
	} else {
		plan = &policy.Plan{}
	}
	stop := len(s.Queue)  // the pass plans the jobs before stop
	var rejects []indexed // with Quiet: every admission rejection
	var marks []int       // with Quiet: the jobs worth a look once the head waits
	var cands []int       // with Quiet: the jobs that may still start now
	quiet := false
	if s.Quiet {
		var last int
		if last, rejects, marks, cands, fcfsBlocked, quiet = p.quietScan(ctx, st, s, g, first, fcfsBlocked); quiet {
			stop = last + 1
		}
	}
	// shrink moves stop back after the pass took nodes at job qi: a later
	// candidate that cannot start now on what is left never will in this
	// pass (the pass only takes nodes), so the pass can end before it.
	// Each candidate fails at most once: O(queue) checks per pass.
	shrink := func(qi int) {
		for len(cands) > 0 && cands[len(cands)-1] > qi {
			c := cands[len(cands)-1]
			j := &s.Queue[c]
			sites, _, _ := admit(s, j, p.single, p.name, g)
			if p.mayStartNow(st, j, sites) {
				stop = c + 1
				return
			}
			cands = cands[:len(cands)-1]
		}
		stop = qi + 1
	}
	// The first entry sizes each list for the rest of the queue: one
	// allocation instead of a doubling series.
	pend := func(x policy.Pending) {
		if s.Quiet {
			return
		}
		if plan.Pending == nil {
			plan.Pending = make([]policy.Pending, 0, len(s.Queue))
		}
		plan.Pending = append(plan.Pending, x)
	}
	decide := func(qi int, x policy.Decision) {
		if !s.Quiet && x.Action != policy.Reject {
			x.Status.Reasons = append(x.Status.Reasons, misfitReasons(s, &s.Queue[qi])...)
		}
		if r != nil && x.Action != policy.Reserve {
			r.gone = append(r.gone, qi)
		}
		if plan.Decisions == nil {
			if r != nil {
				plan.Decisions = r.dec[:0]
			} else {
				// Most passes decide one or two jobs; a Decision is ~200 bytes.
				plan.Decisions = make([]policy.Decision, 0, min(len(s.Queue), 4))
			}
		}
		plan.Decisions = append(plan.Decisions, x)
		if r != nil {
			r.dec = plan.Decisions[:cap(plan.Decisions)]
		}
	}
	k := &st.coll
	*k = Collector{keep: p.beaten, c: k.c[:0]}
	if s.Quiet {
		k.keep = 0 // a Quiet plan carries no runner-ups: keep only the best
	}
	var head *policy.Decision // the first job of this pass left waiting (reserved)
	var headID, headFrom string
	var blocked []string // the reason of the jobs the head blocks
	// from names the head for reasons ("g42 (reserved from 10:04:05)"),
	// built when first needed: a Quiet pass that starts nothing never does.
	from := func() string {
		if headFrom == "" {
			headFrom = fromText(s, head)
		}
		return headFrom
	}
	setHead := func(d *policy.Decision) {
		head, headID = d, d.Job
		if s.Quiet {
			return // nobody reads the reasons of the jobs left waiting
		}
		// One reason for every job this head blocks: the slice is shared
		// (full, so an append by a reader copies it).
		if p.bf == None {
			blocked = []string{"strict FCFS: waits behind job " + from()}
		} else {
			blocked = []string{"backfill: cannot start now without delaying job " + from()}
		}
	}
	// next is the job after qi to look at: every one, except that once the
	// head waits under EASY or none a Quiet pass skips to the marked jobs
	// (the others can neither start nor be rejected).
	mi := 0
	next := func(qi int) int {
		if !quiet || head == nil || p.bf == Conservative {
			return qi + 1
		}
		for mi < len(marks) && marks[mi] <= qi {
			mi++
		}
		if mi == len(marks) {
			return stop
		}
		return marks[mi]
	}
	// With the memo the earlier jobs were planned by the remembered pass
	// and cannot start (memo.go): an EASY or strict-FCFS pass whose head
	// waits goes on at the first appended job, a Conservative one at the
	// first job it did not reserve.
	qi0 := resume
	if memoHead != nil {
		setHead(memoHead)
		if p.bf != Conservative {
			qi0 = next(first - 1)
		}
	}
	for qi := qi0; qi < stop; qi = next(qi) {
		if qi%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("coalloc: plan interrupted at job %d of %d: %w", qi, len(s.Queue), err)
			}
		}
		j := &s.Queue[qi]
		sites, d, pn := admit(s, j, p.single, p.name, g)
		if d != nil {
			decide(qi, *d)
			continue
		}
		if pn != nil {
			pend(*pn)
			continue
		}
		if head != nil && p.bf == None {
			pend(policy.Pending{Job: j.ID, Status: policy.Status{Code: policy.Unschedulable, Plugin: string(None), Reasons: blocked}})
			continue
		}
		k.c = k.c[:0]
		k.immediateOnly = head != nil && p.bf == EASY
		if k.immediateOnly && !p.mayStartNow(st, j, sites) {
			pend(policy.Pending{Job: j.ID, Status: policy.Status{Code: policy.Unschedulable, Plugin: string(EASY), Reasons: blocked}})
			continue
		}
		if err := p.sel.Select(st, j, sites, k); err != nil {
			return nil, err
		}
		best := k.Best()
		if k.immediateOnly && (best == nil || !best.Immediate) {
			if s.Quiet {
				continue
			}
			r := "backfill: cannot start now without delaying job " + from()
			if best != nil {
				r = fmt.Sprintf("backfill: waits for a better placement, %s from %s (end %s), rather than start now; it holds no reservation (EASY reserves only the head, job %s)",
					partList(s, best.Parts), clock(s, s.Now.Add(best.Start)), clock(s, s.Now.Add(best.End())), headID)
			}
			pend(policy.Pending{Job: j.ID, Status: policy.NewStatus(policy.Unschedulable, string(EASY), r)})
			continue
		}
		if best == nil {
			pend(policy.Pending{Job: j.ID, Status: policy.NewStatus(policy.Unschedulable, p.sel.Name(),
				fmt.Sprintf("needs %d nodes; the known holds never leave that many free at the eligible sites (%s)", j.Width, siteList(s, sites, st.Eventual)))})
			continue
		}
		if !best.Immediate && s.Quiet && (head == nil || p.bf == Conservative) {
			// A reservation nobody reads: hold it, decide nothing.
			st.Take(best.Parts, best.Start, best.Hold())
			if head == nil {
				// The head of a Quiet pass is only named (in st's memory).
				st.head = policy.Decision{Job: j.ID, Chosen: policy.Option{Start: s.Now.Add(best.Start)}}
				setHead(&st.head)
			}
			if quiet {
				shrink(qi)
			}
			continue
		}
		if best.Immediate && s.Quiet {
			// A start nobody reads the reasons of (Snapshot.Quiet).
			st.Take(best.Parts, 0, best.Hold())
			if quiet {
				shrink(qi)
			}
			decide(qi, policy.Decision{Job: j.ID, Action: policy.Start, Chosen: option(s, best), Backfilled: head != nil,
				Status: policy.Status{Code: policy.Success, Plugin: p.plugin(head != nil)}})
			continue
		}
		dec := policy.Decision{Job: j.ID, Chosen: option(s, best), Beaten: options(s, k.Beaten())}
		switch {
		case best.Immediate:
			st.Take(best.Parts, 0, best.Hold())
			if quiet {
				shrink(qi)
			}
			hf := ""
			if head != nil {
				hf = from()
			}
			p.startStatus(s, &dec, best, head, hf)
		case head == nil || p.bf == Conservative:
			st.Take(best.Parts, best.Start, best.Hold())
			dec.Action = policy.Reserve
			var a [160]byte
			b := appendClock(a[:0], "reserved: earliest start ", s, dec.Chosen.Start)
			r := []string{str(appendClock(appendParts(append(b, " at "...), s, best.Parts), ", end ", s, dec.Chosen.End()))}
			r = append(r, whyNotNow(st, j, sites, dec.Chosen, dec.Beaten, p.oneSite(j))...)
			dec.Status = policy.NewStatus(policy.Wait, p.plugin(head != nil), r...)
			if head == nil {
				setHead(&dec)
			}
		default:
			return nil, fmt.Errorf("coalloc: internal: EASY backfill candidate %s reached the reserve branch", j.ID)
		}
		decide(qi, dec)
	}
	// The rejections the pass did not reach (with Quiet it ends early).
	i, _ := slices.BinarySearchFunc(rejects, stop, func(x indexed, qi int) int { return cmp.Compare(x.qi, qi) })
	for _, x := range rejects[i:] {
		decide(x.qi, x.d)
	}
	if quiet { // a Quiet pass that ran to its end
		kept = m.remember(p, s, st, len(plan.Decisions) > 0, head, fcfsBlocked, max(qi0, stop), vouched)
	}
	return plan, nil
}

// plugin names the stage a decision comes from: the selection for the
// jobs up to the head, the backfilling rule once a head waits.
func (p *Planner) plugin(behindHead bool) string {
	if behindHead {
		return string(p.bf)
	}
	return p.sel.Name()
}

// startStatus makes dec (Chosen and Beaten filled) the decision to start
// now, with its reasons; head is the job this pass left waiting in its
// reservation (nil: none), named headFrom in the reasons.
func (p *Planner) startStatus(s *policy.Snapshot, dec *policy.Decision, best *Candidate, head *policy.Decision, headFrom string) {
	dec.Action = policy.Start
	dec.Backfilled = head != nil
	var a [160]byte
	r := []string{str(appendClock(appendParts(append(a[:0], "start now at "...), s, best.Parts), ", end ", s, dec.Chosen.End()))}
	plug := p.plugin(head != nil)
	if head != nil {
		r = append(r, "backfilled ahead of job "+headFrom+" without delaying it")
	}
	dec.Status = policy.NewStatus(policy.Success, plug, append(r, beatenReasons(s, dec.Chosen, dec.Beaten)...)...)
}

// admit checks a job against the sites. It returns the eligible sites
// (slowness ascending: h, divided by trust below 1), or a Reject decision
// (never runnable), or a Pending (not runnable while some sites are down).
func admit(s *policy.Snapshot, j *policy.Job, single bool, name string, g *gridInfo) ([]int, *policy.Decision, *policy.Pending) {
	if g != nil && g.plain(s, j, single) {
		return g.upByH, nil, nil // fits the up sites: nothing to explain
	}
	reject := func(format string, a ...any) ([]int, *policy.Decision, *policy.Pending) {
		return nil, &policy.Decision{Job: j.ID, Action: policy.Reject, Status: policy.NewStatus(policy.Unresolvable, "admit", fmt.Sprintf(format, a...))}, nil
	}
	wait := func(format string, a ...any) ([]int, *policy.Decision, *policy.Pending) {
		return nil, nil, &policy.Pending{Job: j.ID, Status: policy.NewStatus(policy.Unschedulable, "admit", fmt.Sprintf(format, a...))}
	}
	if j.Width < 1 {
		return reject("width %d: a job needs at least 1 node", j.Width)
	}
	if j.Origin < -1 || j.Origin >= len(s.Sites) {
		return reject("origin site %d does not exist (valid: -1 for none, 0..%d)", j.Origin, len(s.Sites)-1)
	}
	all := make([]int, 0, len(s.Sites))
	if j.Allowed == nil {
		for i := range s.Sites {
			all = append(all, i)
		}
	} else {
		for _, i := range j.Allowed {
			if i < 0 || i >= len(s.Sites) {
				return reject("allowed site %d does not exist (valid: 0..%d)", i, len(s.Sites)-1)
			}
			all = append(all, i)
		}
	}
	if mis := s.Misfits(j); len(mis) > 0 {
		// Sites whose nodes cannot hold what the job asks per node are
		// never chosen (misfitReasons explains them in the decision).
		all = slices.DeleteFunc(all, func(i int) bool {
			return slices.ContainsFunc(mis, func(m policy.Misfit) bool { return m.Site == i })
		})
		if len(all) == 0 {
			return reject("no allowed site has nodes with %s: %s", j.PerNode, misfitText(s, mis))
		}
	}
	nodes := func(i int) int { return s.Sites[i].Nodes }
	total, largest := 0, -1
	for _, i := range all {
		total += s.Sites[i].Nodes
		if largest < 0 || s.Sites[i].Nodes > s.Sites[largest].Nodes {
			largest = i
		}
	}
	if len(all) == 0 {
		return reject("no site is allowed")
	}
	oneSite := single || j.NoSplit
	if oneSite && j.Width > s.Sites[largest].Nodes {
		why := "the job may not be split"
		if single {
			why = name + " runs a job on one site only"
		}
		return reject("needs %d nodes on one site (%s); the largest allowed site is %s with %d (%s)",
			j.Width, why, s.Sites[largest].Name, s.Sites[largest].Nodes, siteList(s, all, nodes))
	}
	if j.Width > total {
		return reject("needs %d nodes; the %d allowed sites have %d in all: %s", j.Width, len(all), total, siteList(s, all, nodes))
	}
	var up, down []int
	upTotal, upLargest := 0, 0
	for _, i := range all {
		if s.Sites[i].Down {
			down = append(down, i)
			continue
		}
		up = append(up, i)
		upTotal += s.Sites[i].Nodes
		upLargest = max(upLargest, s.Sites[i].Nodes)
	}
	if len(up) == 0 {
		return wait("all %d allowed sites are down: %s", len(all), siteList(s, down, nil))
	}
	if (oneSite && j.Width > upLargest) || j.Width > upTotal {
		return wait("needs %d nodes; the allowed sites that are up have %d (%s), down: %s", j.Width, upTotal, siteList(s, up, nodes), siteList(s, down, nil))
	}
	st := make([]int, 0, len(up))
	// eligible sites by slowness ascending, index ascending
	for _, i := range up {
		k := len(st)
		for k > 0 && (slowness(&s.Sites[st[k-1]]) > slowness(&s.Sites[i]) || (slowness(&s.Sites[st[k-1]]) == slowness(&s.Sites[i]) && st[k-1] > i)) {
			k--
		}
		st = append(st, 0)
		copy(st[k+1:], st[k:])
		st[k] = i
	}
	return st, nil, nil
}

// freeNow is the nodes free now at the sites.
func freeNow(st *State, sites []int) int {
	n := 0
	for _, i := range sites {
		n += max(st.FreeNow(i), 0)
	}
	return n
}

// gridInfo is what admission needs about the whole grid, computed once per
// pass for the common job that may use every site.
type gridInfo struct {
	upByH              []int // sites not down, slowness (h/trust) ascending, index ascending
	upTotal, upLargest int
}

// plain reports admission's common case: j may use every site, comes from
// a real origin (or none), and the sites that are up can hold it as it may
// be placed (on one site, or split), so admission passes it to every up site
// with nothing to explain.
func (g *gridInfo) plain(s *policy.Snapshot, j *policy.Job, single bool) bool {
	if j.Allowed != nil || !j.PerNode.Zero() || j.Width < 1 || j.Origin < -1 || j.Origin >= len(s.Sites) {
		return false
	}
	if single || j.NoSplit {
		return j.Width <= g.upLargest
	}
	return j.Width <= g.upTotal
}

func newGridInfo(s *policy.Snapshot) *gridInfo {
	g := &gridInfo{}
	g.fill(s)
	return g
}

// fill computes g for s, reusing g's memory.
func (g *gridInfo) fill(s *policy.Snapshot) {
	*g = gridInfo{upByH: g.upByH[:0]}
	for i := range s.Sites {
		if s.Sites[i].Down {
			continue
		}
		g.upByH = append(g.upByH, i)
		g.upTotal += s.Sites[i].Nodes
		g.upLargest = max(g.upLargest, s.Sites[i].Nodes)
	}
	slices.SortStableFunc(g.upByH, func(a, b int) int { return cmp.Compare(slowness(&s.Sites[a]), slowness(&s.Sites[b])) })
}

// slowness orders the sites for selection and filling: h, the time a site
// takes per unit of work, divided by its trust (as predicted ends are), so
// that Greedy's windows and every fill try the trusted fast sites first.
// It is h itself when trust is unset or 1.
func slowness(s *policy.Site) float64 {
	if s.Trust > 0 && s.Trust < 1 {
		return s.H / s.Trust
	}
	return s.H
}

// whyNotNow says why a reserved job does not start now: per site when the
// job must run on one site ("Harbin: 16 free < 48 needed"), else in sum.
func whyNotNow(st *State, j *policy.Job, sites []int, chosen policy.Option, beaten []policy.Option, oneSite bool) []string {
	for _, o := range beaten {
		if !o.Immediate {
			continue
		}
		if o.End().Before(chosen.End()) { // it lost on trust
			return []string{fmt.Sprintf("starting now at %s would end at %s, but its sites' trust (%s) weighs that end later",
				partList(st.Snap, o.Parts), clock(st.Snap, o.End()), trustList(st.Snap, o.Parts))}
		}
		return []string{fmt.Sprintf("starting now at %s would end later, %s", partList(st.Snap, o.Parts), clock(st.Snap, o.End()))}
	}
	free := freeNow(st, sites)
	if oneSite {
		var r []string
		for k, i := range sites {
			if k == 4 {
				r = append(r, fmt.Sprintf("and %d more sites", len(sites)-k))
				break
			}
			if f := st.FreeNow(i); f < j.Width {
				r = append(r, fmt.Sprintf("%s: %d free < %d needed", siteName(st.Snap, i), max(f, 0), j.Width))
			} else {
				r = append(r, fmt.Sprintf("%s: %d free, but not for the whole run", siteName(st.Snap, i), f))
			}
		}
		return r
	}
	if free >= j.Width {
		return []string{fmt.Sprintf("%d nodes are free now, but not at sites that can hold the job for its whole run", free)}
	}
	var a [160]byte
	b := strconv.AppendInt(append(a[:0], "no immediate start: "...), int64(free), 10)
	b = appendSites(append(b, " nodes free at the eligible sites ("...), st.Snap, sites, st.FreeNow)
	b = strconv.AppendInt(append(b, "), "...), int64(j.Width), 10)
	return []string{str(append(b, " needed"...))}
}

func beatenReasons(s *policy.Snapshot, chosen policy.Option, b []policy.Option) []string {
	if len(b) == 0 {
		return nil
	}
	o := b[0]
	if o.End().Before(chosen.End()) { // ended earlier: it lost on trust
		return []string{fmt.Sprintf("over %s (end %s), whose sites' trust (%s) weighs that end later",
			partList(s, o.Parts), clock(s, o.End()), trustList(s, o.Parts))}
	}
	var a [160]byte
	buf := appendParts(append(a[:0], "over "...), s, o.Parts)
	if o.Immediate {
		buf = append(buf, " now"...)
	} else {
		buf = appendClock(buf, " from ", s, o.Start)
	}
	buf = appendClock(buf, " (end ", s, o.End())
	return []string{str(append(buf, ')'))}
}

func option(s *policy.Snapshot, c *Candidate) policy.Option {
	return policy.Option{Parts: c.Parts, Start: s.Now.Add(c.Start), Runtime: c.Run, Transfer: c.Xfer, Immediate: c.Immediate}
}

func options(s *policy.Snapshot, cs []Candidate) []policy.Option {
	if len(cs) == 0 {
		return nil
	}
	out := make([]policy.Option, len(cs))
	for i := range cs {
		out[i] = option(s, &cs[i])
	}
	return out
}
