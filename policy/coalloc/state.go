package coalloc

import (
	"cmp"
	"slices"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// State is the scheduler's view during one Plan pass: the snapshot plus one
// availability profile per site, updated as the pass starts and reserves
// jobs. Selection strategies read it; only the framework changes it.
type State struct {
	Snap    *policy.Snapshot
	prof    []profile
	scr     []policy.Part
	elig    []int
	vals    []int
	caps    []int
	wmins   []int // earliestCommon's window minima where it stopped
	order   []int
	set     []int
	pre     []int
	sitesOf []int           // the eligible sites of the job being selected (Greedy)
	win1    []bool          // by position: a single-site window (Greedy)
	hold1   []time.Duration // by position: single-site hold, 0 = not yet (Greedy)
	parts   []policy.Part
	win     windowScratch
	head    policy.Decision // the head a Quiet pass names (Planner.pass)
	marks   []int           // Planner.quietScan
	cands   []int           // Planner.quietScan
	grid    gridInfo        // Planner.Plan, reused from pass to pass
	coll    Collector       // Planner.Plan, reused from pass to pass
}

// NewState builds the pass state for s. It does not modify s.
func NewState(s *policy.Snapshot) *State {
	st := &State{}
	st.reset(s)
	return st
}

// reset makes st the pass state for s, reusing its memory.
func (st *State) reset(s *policy.Snapshot) {
	st.Snap = s
	st.sizeProfiles(len(s.Sites))
	for i := range s.Sites {
		st.prof[i].build(&s.Sites[i], s.Now)
	}
}

// sizeProfiles gives st one profile per site, reusing its memory.
func (st *State) sizeProfiles(n int) {
	if cap(st.prof) < n {
		st.prof = append(st.prof[:cap(st.prof)], make([]profile, n-cap(st.prof))...)
	}
	st.prof = st.prof[:n]
}

// resetCached is reset with the sites' base profiles from c: a site whose
// holds did not change since its profile was built gets a copy of it,
// shifted to s.Now, instead of a build from its holds.
func (st *State) resetCached(s *policy.Snapshot, c *baseCache) {
	st.Snap = s
	st.sizeProfiles(len(s.Sites))
	c.size(len(s.Sites))
	for i := range s.Sites {
		b := &c.prof[i]
		d := offset(s.Now, c.at[i])
		if !c.ok[i] || d < 0 || (d > 0 && (b.overdue || b.firstEnd <= d)) {
			b.build(&s.Sites[i], s.Now)
			c.ok[i], c.at[i], d = true, s.Now, 0
		}
		st.prof[i].copyShifted(b, d)
	}
}

// baseCache keeps each site's profile as built, with the instant it was
// built for: while the site's holds are the same, a pass at a later Now
// copies and shifts it instead of building it from the holds again (most
// passes of a replay follow a change at one site). A profile with a hold
// past its end is not reused at a later Now (that hold counts as ending
// soon after each Now), nor one whose first hold has ended since.
type baseCache struct {
	prof []profile
	at   []time.Time
	ok   []bool
}

func (c *baseCache) size(n int) {
	if len(c.prof) != n {
		*c = baseCache{prof: make([]profile, n), at: make([]time.Time, n), ok: make([]bool, n)}
	}
}

// changed marks site i's holds as changed: its profile is built again.
func (c *baseCache) changed(i int) {
	if i < len(c.ok) {
		c.ok[i] = false
	}
}

// FreeNow is the nodes of site i free now, after this pass's starts.
func (st *State) FreeNow(i int) int { return st.prof[i].freeNow() }

// MinFree is the fewest free nodes of site i over [t, t+d), t an offset from Now.
func (st *State) MinFree(i int, t, d time.Duration) int { return st.prof[i].minFree(t, d) }

// Eventual is the free nodes of site i once all known holds have ended.
func (st *State) Eventual(i int) int { return st.prof[i].eventual() }

// Take holds parts over [t, t+d) in the profiles.
func (st *State) Take(parts []policy.Part, t, d time.Duration) {
	for _, p := range parts {
		st.prof[p.Site].take(t, d, p.Nodes)
	}
}

// model is the run and transfer time of j on the given sites (equations 1–3).
func (st *State) model(j *policy.Job, sites []int) (run, xfer time.Duration) {
	st.scr = st.scr[:0]
	for _, s := range sites {
		st.scr = append(st.scr, policy.Part{Site: s, Nodes: 1})
	}
	run = st.Snap.Runtime(j, st.scr)
	xfer = st.Snap.Transfer(j, st.scr)
	return run, xfer
}

// hold is how long a placement holds its nodes: transfer, then run, at least 1ns.
func hold(run, xfer time.Duration) time.Duration {
	if d := addDur(run, xfer); d > 0 {
		return d
	}
	return 1
}

// earliestCommon is the first offset t at which the sites together keep w
// nodes free for d (each site counting its fewest free nodes over the
// window), or false when that happens no earlier than limit-d.
//
// A start t is abandoned once t+lb > limit: lb must be a lower bound of the
// hold of whatever placement the caller makes at t (see reserveAt).
//
// On success st.wmins holds, by position in sites, each site's fewest free
// nodes over [t, t+d) (at least 0; for a single site, w: what it gives).
func (st *State) earliestCommon(sites []int, w int, d, lb, limit time.Duration) (time.Duration, bool) {
	if lb > limit {
		return never, false
	}
	if len(sites) == 1 {
		t, ok := st.prof[sites[0]].earliest(0, w, d)
		if !ok || addDur(t, lb) > limit {
			return never, false
		}
		st.wmins = append(st.wmins[:0], w)
		return t, true
	}
	// Sweep candidate starts in time order. At a failed candidate t every
	// site's window minimum sits on some step; no start before the earliest
	// end of those steps can do better, so the sweep jumps there, and then on
	// to the first time some site can hold its even share of the width.
	t := time.Duration(0)
	for {
		if addDur(t, lb) > limit {
			return never, false
		}
		end := addDur(t, d)
		sum, next := 0, never
		st.wmins = st.wmins[:0]
		for _, s := range sites {
			m, j := st.prof[s].windowMin(t, end)
			st.wmins = append(st.wmins, max(m, 0))
			sum += max(m, 0)
			next = min(next, j)
		}
		if sum >= w {
			return t, true
		}
		if next == never {
			return never, false
		}
		// Some site must give at least its share ⌈w/len(sites)⌉ for the
		// whole hold, so no start is feasible before the first time one can.
		share, lb := (w+len(sites)-1)/len(sites), never
		for _, s := range sites {
			if x, ok := st.prof[s].earliest(next, share, d); ok && x < lb {
				lb = x
			}
		}
		if lb == never {
			return never, false
		}
		t = lb
	}
}

// Candidate is one evaluated placement (offsets relative to Snapshot.Now).
type Candidate struct {
	Parts     []policy.Part
	Start     time.Duration
	Run, Xfer time.Duration
	Immediate bool
	Preferred bool    // uses a preferred site
	Trust     float64 // the product of its sites' trust, in (0,1]; 0 means 1
}

// End is the completion offset.
func (c *Candidate) End() time.Duration { return addDur(addDur(c.Start, c.Xfer), c.Run) }

// Weighted is the end divided by the placement's trust (SPEC §3: trust is a
// divisor on predicted completion time): a placement on sites that failed
// work before must end that much earlier to win. A co-allocated job ends
// well only if every part does, so a placement's trust is the product of
// its sites'. Exactly End when every site is trusted (1, or unset).
func (c *Candidate) Weighted() time.Duration {
	e := c.End()
	if c.Trust <= 0 || c.Trust >= 1 || e == never {
		return e
	}
	if w := float64(e) / c.Trust; w < float64(never) {
		return time.Duration(w)
	}
	return never
}

// Hold is how long the placement holds its nodes.
func (c *Candidate) Hold() time.Duration { return hold(c.Run, c.Xfer) }

// better is the total order of candidates: earlier trust-weighted end;
// then earlier end; then immediate; then fewer sites; then a preferred
// site; then lower site indices.
func better(a, b *Candidate) bool {
	if aw, bw := a.Weighted(), b.Weighted(); aw != bw {
		return aw < bw
	}
	if ae, be := a.End(), b.End(); ae != be {
		return ae < be
	}
	if a.Immediate != b.Immediate {
		return a.Immediate
	}
	if len(a.Parts) != len(b.Parts) {
		return len(a.Parts) < len(b.Parts)
	}
	if a.Preferred != b.Preferred {
		return a.Preferred
	}
	return cmpSites(a.Parts, b.Parts) < 0
}

// cmpSites compares the site sets of two placements as sorted index lists.
func cmpSites(a, b []policy.Part) int {
	if len(a) == 1 && len(b) == 1 { // most placements are on one site
		return cmp.Compare(a[0].Site, b[0].Site)
	}
	var xa, xb [16]int
	sa, sb := sortedSites(xa[:0], a), sortedSites(xb[:0], b)
	return slices.Compare(sa, sb)
}

func sortedSites(out []int, p []policy.Part) []int {
	for _, x := range p {
		out = append(out, x.Site)
	}
	slices.Sort(out)
	return out
}

func sameSites(a, b []policy.Part) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y policy.Part) bool { return y.Site == x.Site }) {
			return false
		}
	}
	return true
}

// Collector keeps the best candidate and the next few, one per site set.
type Collector struct {
	keep int
	c    []Candidate // sorted best first, len <= keep+1
	// immediateOnly: the caller acts only on an immediate best (an EASY
	// backfill candidate), so with no immediate candidate yet nothing is
	// worth searching, and after one only what would beat it.
	immediateOnly bool
}

func newCollector(beaten int) *Collector { return &Collector{keep: beaten} }

// Limit is the end a new candidate must not exceed to be worth evaluating:
// the best trust-weighted end so far, else never. Strategies prune with it
// (a placement that cannot start early enough is not searched for), so
// Beaten holds the runner-ups met on the way, not an exhaustive ranking.
// Comparing a placement's plain end (or a lower bound of it) with Limit is
// sound: trust is at most 1, so a weighted end is never below the plain one.
func (k *Collector) Limit() time.Duration {
	if k.nothingNow() {
		return 0
	}
	return k.bestEnd()
}

// bestEnd is the best candidate's trust-weighted end, or never when there
// is none.
func (k *Collector) bestEnd() time.Duration {
	if len(k.c) == 0 {
		return never
	}
	return k.c[0].Weighted()
}

// Add offers a candidate (its Parts are copied if it is kept).
func (k *Collector) Add(c Candidate) {
	for i := range k.c {
		if sameSites(k.c[i].Parts, c.Parts) {
			if !better(&c, &k.c[i]) {
				return
			}
			k.c = slices.Delete(k.c, i, i+1)
			break
		}
	}
	if len(k.c) > k.keep && !better(&c, &k.c[len(k.c)-1]) {
		return
	}
	if k.keep == 0 && len(k.c) == 1 {
		// Only the best is kept, and c beats it: c takes its place and
		// the memory of its parts.
		c.Parts = append(k.c[0].Parts[:0], c.Parts...)
		k.c[0] = c
		return
	}
	c.Parts = slices.Clone(c.Parts)
	i, _ := slices.BinarySearchFunc(k.c, c, func(x, y Candidate) int {
		if better(&x, &y) {
			return -1
		}
		return 1
	})
	k.c = slices.Insert(k.c, i, c)
	if len(k.c) > k.keep+1 {
		k.c = k.c[:k.keep+1]
	}
}

// nothingNow reports an EASY backfill candidate (immediateOnly) with no
// immediate placement: it can only wait, so no reservation is worth
// searching for it (Limit is 0).
func (k *Collector) nothingNow() bool { return k.immediateOnly && len(k.c) == 0 }

// Best is the best candidate, or nil.
func (k *Collector) Best() *Candidate {
	if len(k.c) == 0 {
		return nil
	}
	return &k.c[0]
}

// Beaten is the kept candidates after the best.
func (k *Collector) Beaten() []Candidate {
	if len(k.c) < 2 {
		return nil
	}
	return k.c[1:]
}

// place evaluates j on sites (in fill order) starting at offset t: each site
// offers its fewest free nodes over the hold window, the width is filled in
// order, and sites left with nothing drop out (the model is then recomputed
// for the sites actually used, which can only shorten the hold). It adds the
// candidate to k and reports whether the sites could hold j at t.
func (st *State) place(j *policy.Job, sites []int, t time.Duration, k *Collector) bool {
	run, xfer := st.model(j, sites)
	d := hold(run, xfer)
	st.caps = st.caps[:0]
	for _, s := range sites {
		st.caps = append(st.caps, max(st.prof[s].minFree(t, d), 0))
	}
	return st.placeWith(j, sites, t, run, xfer, st.caps, k)
}

// placeWith is place once the model of the sites (run, xfer) and each
// site's fewest free nodes over the hold from t (caps, by position; at least
// the width for one site that holds it all) are known.
func (st *State) placeWith(j *policy.Job, sites []int, t, run, xfer time.Duration, caps []int, k *Collector) bool {
	sum := 0
	for _, c := range caps {
		sum += c
	}
	if sum < j.Width {
		return false
	}
	parts := st.parts[:0]
	left := j.Width
	for i, s := range sites {
		if left == 0 {
			break
		}
		n := min(caps[i], left)
		if n == 0 {
			continue
		}
		parts = append(parts, policy.Part{Site: s, Nodes: n})
		left -= n
	}
	st.parts = parts
	used := st.order[:0]
	for _, p := range parts {
		used = append(used, p.Site)
	}
	st.order = used
	if len(used) != len(sites) {
		run, xfer = st.model(j, used)
	}
	c := Candidate{Parts: parts, Start: t, Run: run, Xfer: xfer, Immediate: t == 0, Trust: 1}
	for _, p := range parts {
		if slices.Contains(j.Preferred, p.Site) {
			c.Preferred = true
		}
		if tr := st.Snap.Sites[p.Site].Trust; tr > 0 {
			c.Trust *= tr
		}
	}
	k.Add(c)
	return true
}

// reserveAt evaluates j on sites at their earliest common start. lb bounds
// from below the hold of the placements worth finding (the search stops
// once a start plus lb cannot beat the collector's best); 0 means the
// sites' own hold.
//
// Why the sites' own hold is a valid bound for Optimal although a placement
// may drop sites (and then hold shorter): the sites kept could hold the job
// at that start by themselves, so their own evaluation (Optimal evaluates
// every subset) finds a start no later and the shortened placement never
// beats it. Greedy evaluates only its windows and passes windowBound.
func (st *State) reserveAt(j *policy.Job, sites []int, k *Collector, lb time.Duration) bool {
	run, xfer := st.model(j, sites)
	d := hold(run, xfer)
	if lb <= 0 || lb > d {
		lb = d
	}
	t, ok := st.earliestCommon(sites, j.Width, d, lb, k.Limit())
	if !ok {
		return false
	}
	// The search ended on the window minima place would read again.
	return st.placeWith(j, sites, t, run, xfer, st.wmins, k)
}
