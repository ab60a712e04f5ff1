package coalloc

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// never is "no such time": an offset later than any real one.
const never = time.Duration(math.MaxInt64)

// overdueGrace is when a hold whose estimate has already run out (Until <= Now)
// is expected to release its nodes: within the next scheduling interval (the
// paper's Δt is 1 s). The site kills such a job at its estimate, so it is about
// to end; it is not free yet, so it cannot count as free now.
const overdueGrace = time.Second

// blockMax is the most steps a profile block holds before it splits in two.
const blockMax = 64

// blockSlack is the room a built block has to grow in place.
const blockSlack = 8

// profile is the availability of one site over time: a step function of free
// nodes. Each step holds from its start (an offset from Snapshot.Now) until
// the next step's start; the last step lasts for ever; the first starts at 0,
// so its value is "free now".
//
// The steps are kept in blocks of at most blockMax (an unrolled list), each
// block with a pending add and the min and max of its stored values. A
// reservation (take) splits at most two steps and adds to a range: whole
// blocks get the add lazily. Searches (earliest, minFree, windowMin) skip
// whole blocks by their min/max. Every operation is O(S/B + B) for S steps
// and B = blockMax: a few hundred comparisons with thousands of steps, where
// a flat scan would touch them all.
type profile struct {
	b []block
	// pm caches the prefix minimum of the steps, for minFreeFromNow: pmAt[k]
	// is a step start and pmV[k] the fewest free nodes over [0, pmAt[k+1]);
	// valid while pmOK (take clears it).
	pmAt []time.Duration
	pmV  []int
	pmOK bool
	// mono: free nodes never fall over time (a site's own holds only end;
	// a start taken from offset 0 ends too), so the fewest free nodes over
	// any window from now are the free nodes now. build sets it; a take
	// from a later offset (a reservation) clears it.
	mono bool
	// What build saw of the holds: the earliest end still to come (an
	// offset; never without one), and whether some hold had already ended
	// (it then counts as ending overdueGrace from now).
	firstEnd time.Duration
	overdue  bool
	// memory kept for the next build
	rel   []release
	atBuf []time.Duration
	vBuf  []int
}

type block struct {
	at     []time.Duration
	v      []int // stored values; the step's free nodes are v[i]+add
	add    int
	mn, mx int // of v
}

func (b *block) recompute() {
	b.mn, b.mx = b.v[0], b.v[0]
	for _, x := range b.v[1:] {
		b.mn = min(b.mn, x)
		b.mx = max(b.mx, x)
	}
}

// pos is a step: block k, index i.
type pos struct{ k, i int }

// newProfile builds a site's profile from its free nodes and Busy holds.
func newProfile(s *policy.Site, now time.Time) profile {
	var p profile
	p.build(s, now)
	return p
}

// release is a hold's end as an offset, with the nodes it frees.
type release struct {
	at time.Duration
	n  int
}

// build makes p the profile of site s, reusing p's memory. Busy is usually
// in order of Until already (the broker keeps it so); then no sort is needed.
func (p *profile) build(s *policy.Site, now time.Time) {
	rs := p.rel[:0]
	sorted := true
	p.firstEnd, p.overdue = never, false
	for _, h := range s.Busy {
		if h.Nodes <= 0 {
			continue
		}
		t := offset(h.Until, now)
		if t <= 0 {
			t, p.overdue = overdueGrace, true
		} else {
			p.firstEnd = min(p.firstEnd, t)
		}
		if len(rs) > 0 && t < rs[len(rs)-1].at {
			sorted = false
		}
		rs = append(rs, release{t, h.Nodes})
	}
	if !sorted {
		slices.SortFunc(rs, func(a, b release) int { return cmp.Compare(a.at, b.at) })
	}
	p.rel = rs
	// Steps: one per distinct release time after now.
	steps := 1
	for i, r := range rs {
		if i == 0 || r.at != rs[i-1].at {
			steps++
		}
	}
	// Blocks are windows of the buffers with blockSlack spare slots each:
	// the few splits of a pass (one per reservation it holds) grow a block
	// in place; a block that outgrows its window is reallocated
	// (slices.Insert), never writing into its neighbour.
	nb := (steps + blockMax/2 - 1) / (blockMax / 2)
	size := steps + nb*blockSlack
	at, v := p.atBuf[:0], p.vBuf[:0]
	if cap(at) < size {
		at, v = make([]time.Duration, 0, size), make([]int, 0, size)
	}
	p.atBuf, p.vBuf = at[:size], v[:size]
	p.b = p.b[:0]
	off, fill := 0, 0 // the current block's start in the buffers, and its steps so far
	put := func(t time.Duration, n int) {
		if fill == blockMax/2 {
			b := block{at: p.atBuf[off : off+fill : off+fill+blockSlack], v: p.vBuf[off : off+fill : off+fill+blockSlack]}
			b.recompute()
			p.b = append(p.b, b)
			off, fill = off+fill+blockSlack, 0
		}
		p.atBuf[off+fill], p.vBuf[off+fill] = t, n
		fill++
	}
	put(0, s.Free)
	cur := s.Free
	for _, r := range rs {
		cur += r.n
		if i := off + fill - 1; p.atBuf[i] == r.at {
			p.vBuf[i] = cur
			continue
		}
		put(r.at, cur)
	}
	b := block{at: p.atBuf[off : off+fill : off+fill+blockSlack], v: p.vBuf[off : off+fill : off+fill+blockSlack]}
	b.recompute()
	p.b = append(p.b, b)
	p.pmOK = false
	p.mono = true
}

// offset is t - now, as time.Time.Sub computes it for times within about
// 290 years of each other, without Sub's overflow check (an Add and an
// Equal, most of the cost of building a profile); further apart, Sub.
func offset(t, now time.Time) time.Duration {
	ds := t.Unix() - now.Unix()
	if ds > 9e9 || ds < -9e9 {
		return t.Sub(now)
	}
	return time.Duration(ds)*time.Second + time.Duration(t.Nanosecond()-now.Nanosecond())
}

// copyShifted makes p a copy of q with every step d earlier (the first
// still at 0), in p's own memory: q seen from an instant d later, when no
// step but the first starts before d.
func (p *profile) copyShifted(q *profile, d time.Duration) {
	size := 0
	for k := range q.b {
		size += len(q.b[k].at) + blockSlack
	}
	if cap(p.atBuf) < size {
		p.atBuf, p.vBuf = make([]time.Duration, size), make([]int, size)
	}
	p.atBuf, p.vBuf = p.atBuf[:size], p.vBuf[:size]
	p.b = p.b[:0]
	off := 0
	for k := range q.b {
		qb := &q.b[k]
		n := len(qb.at)
		at := p.atBuf[off : off+n : off+n+blockSlack]
		v := p.vBuf[off : off+n : off+n+blockSlack]
		copy(at, qb.at)
		copy(v, qb.v)
		p.b = append(p.b, block{at: at, v: v, add: qb.add, mn: qb.mn, mx: qb.mx})
		off += n + blockSlack
	}
	p.pmOK = false
	p.mono = q.mono
	if d != 0 {
		p.shift(d)
	}
}

func (p *profile) val(q pos) int             { b := &p.b[q.k]; return b.v[q.i] + b.add }
func (p *profile) start(q pos) time.Duration { return p.b[q.k].at[q.i] }

// next is the step after q, ok false after the last.
func (p *profile) next(q pos) (pos, bool) {
	if q.i+1 < len(p.b[q.k].at) {
		return pos{q.k, q.i + 1}, true
	}
	if q.k+1 < len(p.b) {
		return pos{q.k + 1, 0}, true
	}
	return q, false
}

// end is when step q ends (never for the last).
func (p *profile) end(q pos) time.Duration {
	if n, ok := p.next(q); ok {
		return p.start(n)
	}
	return never
}

// find is the step that holds at offset t >= 0.
func (p *profile) find(t time.Duration) pos {
	if t <= 0 {
		return pos{} // the first step starts at 0: most searches begin now
	}
	lo, hi := 0, len(p.b) // first block starting after t
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if p.b[m].at[0] > t {
			hi = m
		} else {
			lo = m + 1
		}
	}
	k := lo - 1
	at := p.b[k].at
	lo, hi = 0, len(at)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if at[m] > t {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return pos{k, lo - 1}
}

func (p *profile) freeNow() int  { return p.val(pos{0, 0}) }
func (p *profile) eventual() int { k := len(p.b) - 1; return p.val(pos{k, len(p.b[k].v) - 1}) }

// firstBelow is the first step at or after q with fewer than n free nodes
// that starts before stop, skipping whole blocks whose min is at least n.
func (p *profile) firstBelow(q pos, stop time.Duration, n int) (pos, bool) {
	for k := q.k; k < len(p.b); k++ {
		b := &p.b[k]
		i := 0
		if k == q.k {
			i = q.i
		}
		if b.at[i] >= stop {
			return q, false
		}
		if i == 0 && b.mn+b.add >= n {
			continue
		}
		lim := n - b.add
		for ; i < len(b.at); i++ {
			if b.at[i] >= stop {
				return q, false
			}
			if b.v[i] < lim {
				return pos{k, i}, true
			}
		}
	}
	return q, false
}

// firstAtLeast is the first step at or after q with at least n free nodes,
// skipping whole blocks whose max is below n.
func (p *profile) firstAtLeast(q pos, n int) (pos, bool) {
	for k := q.k; k < len(p.b); k++ {
		b := &p.b[k]
		i := 0
		if k == q.k {
			i = q.i
		}
		if i == 0 && b.mx+b.add < n {
			continue
		}
		lim := n - b.add
		for ; i < len(b.at); i++ {
			if b.v[i] >= lim {
				return pos{k, i}, true
			}
		}
	}
	return q, false
}

// minFree is the fewest free nodes over [t, t+d).
func (p *profile) minFree(t, d time.Duration) int {
	m, _ := p.windowMin(t, addDur(t, d))
	return m
}

// windowMin is the fewest free nodes over [t, end) and the start of the step
// after the last step that has that minimum: no window starting before then
// (and ending no earlier) can have more. Whole blocks inside the window are
// read by their min, so the cost is O(blocks + B), not O(steps).
func (p *profile) windowMin(t, end time.Duration) (int, time.Duration) {
	if len(p.b) == 1 {
		return p.windowMin1(t, end)
	}
	q := p.find(t)
	e := q // the last step starting before end
	if end == never {
		k := len(p.b) - 1
		e = pos{k, len(p.b[k].at) - 1}
	} else if end > t+1 {
		e = p.find(end - 1)
	}
	scanMin := func(k, from, to int, m int) int { // steps from..to of block k
		b := &p.b[k]
		for i := from; i <= to; i++ {
			m = min(m, b.v[i]+b.add)
		}
		return m
	}
	m := p.val(q)
	if q.k == e.k {
		m = scanMin(q.k, q.i, e.i, m)
	} else {
		m = scanMin(q.k, q.i, len(p.b[q.k].at)-1, m)
		for k := q.k + 1; k < e.k; k++ {
			m = min(m, p.b[k].mn+p.b[k].add)
		}
		m = scanMin(e.k, 0, e.i, m)
	}
	// The last step with value m, from the right.
	for k := e.k; k >= q.k; k-- {
		b := &p.b[k]
		hi, lo := len(b.at)-1, 0
		if k == e.k {
			hi = e.i
		}
		if k == q.k {
			lo = q.i
		}
		if k != e.k && k != q.k && b.mn+b.add != m {
			continue
		}
		for i := hi; i >= lo; i-- {
			if b.v[i]+b.add == m {
				return m, p.end(pos{k, i})
			}
		}
	}
	return m, p.end(q) // unreachable: the minimum is some step's value
}

// windowMin1 is windowMin for a profile of one block (every profile of a
// few dozen steps, the usual case): one forward scan, no search.
func (p *profile) windowMin1(t, end time.Duration) (int, time.Duration) {
	b := &p.b[0]
	at, v := b.at, b.v
	i := 0
	if t > 0 {
		i = p.find(t).i
	}
	m, last := v[i], i
	for k := i + 1; k < len(at) && at[k] < end; k++ {
		if x := v[k]; x <= m {
			m, last = x, k
		}
	}
	if last+1 < len(at) {
		return m + b.add, at[last+1]
	}
	return m + b.add, never
}

// earliest is the first offset t >= from at which n nodes stay free for d.
func (p *profile) earliest(from time.Duration, n int, d time.Duration) (time.Duration, bool) {
	cand := from
	q := p.find(from)
	for {
		s, ok := p.firstBelow(q, addDur(cand, d), n)
		if !ok {
			return cand, true
		}
		nx, more := p.next(s)
		if !more {
			return never, false
		}
		f, ok := p.firstAtLeast(nx, n)
		if !ok {
			return never, false
		}
		cand, q = p.start(f), f
	}
}

// split makes a step start exactly at t.
func (p *profile) split(t time.Duration) {
	q := p.find(t)
	b := &p.b[q.k]
	if b.at[q.i] == t {
		return
	}
	b.at = slices.Insert(b.at, q.i+1, t)
	b.v = slices.Insert(b.v, q.i+1, b.v[q.i])
	if len(b.at) > blockMax {
		h := len(b.at) / 2
		nb := block{at: slices.Clone(b.at[h:]), v: slices.Clone(b.v[h:]), add: b.add}
		b.at, b.v = b.at[:h:h], b.v[:h:h]
		b.recompute()
		nb.recompute()
		p.b = slices.Insert(p.b, q.k+1, nb)
	}
}

// minFreeFromNow is minFree(0, d): the fewest free nodes over [0, d), from
// the prefix minima (O(log S) once computed, recomputed after a take).
func (p *profile) minFreeFromNow(d time.Duration) int {
	if !p.pmOK {
		p.pmAt, p.pmV = p.pmAt[:0], p.pmV[:0]
		for k := range p.b {
			b := &p.b[k]
			if len(p.pmV) > 0 && b.mn+b.add >= p.pmV[len(p.pmV)-1] {
				continue // no new minimum in this block
			}
			for i := range b.at {
				if v := b.v[i] + b.add; len(p.pmV) == 0 || v < p.pmV[len(p.pmV)-1] {
					p.pmAt, p.pmV = append(p.pmAt, b.at[i]), append(p.pmV, v)
				}
			}
		}
		p.pmOK = true
	}
	// The steps starting before d: the last prefix minimum starting before d.
	lo, hi := 1, len(p.pmAt)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if p.pmAt[m] < d {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return p.pmV[lo-1]
}

// take holds n nodes over [t, t+d).
func (p *profile) take(t, d time.Duration, n int) {
	p.pmOK = false
	if t > 0 {
		p.mono = false
	}
	if d <= 0 {
		d = 1
	}
	end := addDur(t, d)
	p.split(t)
	if end != never {
		p.split(end)
	}
	q := p.find(t)
	for k := q.k; k < len(p.b); k++ {
		b := &p.b[k]
		i := 0
		if k == q.k {
			i = q.i
		}
		if b.at[i] >= end {
			break
		}
		if i == 0 && b.at[len(b.at)-1] < end {
			b.add -= n
			continue
		}
		for ; i < len(b.at) && b.at[i] < end; i++ {
			b.v[i] -= n
		}
		b.recompute()
	}
}

// steps calls fn with every step in time order (for tests and debugging).
func (p *profile) steps(fn func(at time.Duration, free int)) {
	for k := range p.b {
		for i := range p.b[k].at {
			fn(p.b[k].at[i], p.b[k].v[i]+p.b[k].add)
		}
	}
}

// addDur is t+d, saturating at never.
func addDur(t, d time.Duration) time.Duration {
	if d >= never-t {
		return never
	}
	return t + d
}
