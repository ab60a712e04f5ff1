package benefit

// This file is the mapping engine as it was before the remap speed work
// (issue 17), kept verbatim but renamed (old*) as the oracle the fast
// engine is compared with: TestFastEqualsOldEngine and
// BenchmarkRemapOldVsNew. Do not optimise it.

import (
	"container/heap"
	"math"
	"slices"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// oldCand is a task's best or second-best machine as the heuristic sees it.
type oldCand struct {
	m, src int
	comp   time.Duration
}

// oldTopK is how many of a task's best machines are kept between scans.
const oldTopK = 8

type oldTstate struct {
	best, second oldCand
	suff         float64
	pos          int    // index in the heap; -1 when out of it
	bv, sv       uint32 // versions of the best and second machines when they were last evaluated
	done         bool
	// The oldTopK best machines at the last scan with their versions, and
	// thr: the least completion of every other machine then. A machine
	// of the list re-evaluated below thr is still ahead of all others
	// (theirs only grew), so refresh needs no scan while the best two
	// stay below it.
	top  [oldTopK]oldCand
	tv   [oldTopK]uint32
	ntop int
	thr  time.Duration
}

type oldMapper struct {
	p     *Problem
	cfg   Config
	nodes [][]time.Duration
	repos []time.Duration
	ts    []oldTstate
	out   []Mapping

	// A cache of eval per task and machine, row-major: an entry is valid
	// while its machine's version (mver) and the versions of the task's
	// repositories (rver, summed into tver) are those it was computed at.
	// Completions only grow, and a commit changes one machine (and
	// repository), so most of a rescan is read from here.
	comp []time.Duration
	csrc []int32
	cver []uint32
	mver []uint32
	rver []uint32
	tver []uint32
	// hasRepo: the task reads from a contended repository.
	hasRepo []bool
	// seen marks the machines a scan has visited (== stamp).
	seen  []uint32
	stamp uint32
}

// oldMap runs one mapping event and returns a Mapping per task, in task order.
// It is pure and deterministic. The problem is not modified.
func oldMap(p *Problem, cfg Config) []Mapping {
	mp := &oldMapper{p: p, cfg: cfg, repos: slices.Clone(p.Repos), ts: make([]oldTstate, len(p.Tasks)), out: make([]Mapping, len(p.Tasks))}
	mp.nodes = make([][]time.Duration, len(p.Machines))
	for i, m := range p.Machines {
		mp.nodes[i] = slices.Clone(m.Nodes)
		slices.Sort(mp.nodes[i])
	}
	nm := len(p.Machines)
	mp.comp = make([]time.Duration, len(p.Tasks)*nm)
	mp.csrc = make([]int32, len(p.Tasks)*nm)
	mp.cver = make([]uint32, len(p.Tasks)*nm)
	mp.mver = make([]uint32, nm)
	mp.rver = make([]uint32, len(p.Repos))
	mp.tver = make([]uint32, len(p.Tasks))
	for m := range mp.mver {
		mp.mver[m] = 1
	}
	mp.seen = make([]uint32, nm)
	mp.hasRepo = make([]bool, len(p.Tasks))
	for i, t := range p.Tasks {
		for _, s := range t.Sources {
			mp.hasRepo[i] = mp.hasRepo[i] || s.Repo >= 0
		}
	}
	for i := range mp.out {
		mp.out[i] = Mapping{Machine: -1, Source: -1, BestAt: -1}
		mp.scan(i)
	}
	if cfg.Heuristic == Sufferage {
		mp.sufferage()
	} else {
		mp.minFirst(cfg.Heuristic == Benefit)
	}
	return mp.out
}

// start is START(c, w): when the w earliest nodes of machine m are free.
func (mp *oldMapper) start(m, w int) (time.Duration, bool) {
	n := mp.nodes[m]
	if w < 1 || w > len(n) {
		return 0, false
	}
	return n[w-1], true
}

// eval is the completion of task i on machine m as the heuristic sees it,
// with the source it would read from.
func (mp *oldMapper) eval(i, m int) (time.Duration, int) {
	t := &mp.p.Tasks[i]
	etc := t.ETC[m]
	if etc < 0 {
		return never, -1
	}
	st, ok := mp.start(m, t.Width)
	if !ok {
		return never, -1
	}
	if len(t.Sources) == 0 {
		return st + etc, -1
	}
	if mp.cfg.Blind {
		return st + etc, 0
	}
	best, src := never, -1
	for k, s := range t.Sources {
		b := st
		if s.Repo >= 0 && s.Tran[m] > 0 && mp.repos[s.Repo] > b {
			b = mp.repos[s.Repo]
		}
		if c := b + s.Tran[m] + etc; c < best {
			best, src = c, k
		}
	}
	return best, src
}

// oldBetter orders candidates: earlier completion, then a preferred machine,
// then the lower index.
func oldBetter(t *Task, a, b oldCand) bool {
	if a.comp != b.comp {
		return a.comp < b.comp
	}
	pa, pb := t.Prefer != nil && t.Prefer[a.m], t.Prefer != nil && t.Prefer[b.m]
	if pa != pb {
		return pa
	}
	return a.m < b.m
}

// missed reports whether task i cannot meet its deadline anywhere.
func (mp *oldMapper) missed(i int) bool {
	t := &mp.p.Tasks[i]
	return t.HasDeadline && !t.Keep && mp.ts[i].best.m >= 0 && mp.ts[i].best.comp > t.Deadline
}

// commit maps task i to its best machine at the real times. It returns the
// machine and the repository it used (-1: none).
func (mp *oldMapper) commit(i, round int) (int, int) {
	t := &mp.p.Tasks[i]
	c := mp.ts[i].best
	st, _ := mp.start(c.m, t.Width)
	begin, tran, repo := st, time.Duration(0), -1
	if c.src >= 0 {
		s := t.Sources[c.src]
		if s.Repo >= 0 && s.Tran[c.m] > 0 { // nothing to move: the repository is not used
			repo = s.Repo
			if mp.repos[repo] > begin {
				begin = mp.repos[repo]
			}
		}
		tran = s.Tran[c.m]
	}
	end := max(begin+tran+t.ETC[c.m], begin+1) // a task holds its nodes for a while, however short
	if repo >= 0 {
		mp.repos[repo] = begin + tran
		mp.rver[repo]++
	}
	mp.mver[c.m]++
	n := mp.nodes[c.m]
	for k := 0; k < t.Width; k++ {
		n[k] = end
	}
	slices.Sort(n)
	mp.out[i] = Mapping{Machine: c.m, Source: c.src, Start: begin, End: end, Best: c.comp, BestAt: c.m, Round: round}
	mp.ts[i].done = true
	return c.m, repo
}

func (mp *oldMapper) drop(i, round int) {
	mp.out[i] = Mapping{Dropped: true, Machine: -1, Source: -1, Best: mp.ts[i].best.comp, BestAt: mp.ts[i].best.m, Round: round}
	mp.ts[i].done = true
}

// repoOf is the repository candidate c of task i reads from (-1: none, or
// data-blind).
func (mp *oldMapper) repoOf(i int, c oldCand) int {
	if c.m < 0 || c.src < 0 || mp.cfg.Blind {
		return -1
	}
	return mp.p.Tasks[i].Sources[c.src].Repo
}

// oldTaskHeap orders pending tasks by minimum completion, then index.
type oldTaskHeap struct {
	ids []int
	mp  *oldMapper
}

func (h *oldTaskHeap) Len() int { return len(h.ids) }
func (h *oldTaskHeap) Less(a, b int) bool {
	x, y := h.ids[a], h.ids[b]
	cx, cy := h.mp.ts[x].best.comp, h.mp.ts[y].best.comp
	if cx != cy {
		return cx < cy
	}
	return x < y
}
func (h *oldTaskHeap) Swap(a, b int) {
	h.ids[a], h.ids[b] = h.ids[b], h.ids[a]
	h.mp.ts[h.ids[a]].pos = a
	h.mp.ts[h.ids[b]].pos = b
}
func (h *oldTaskHeap) Push(x any) {
	i := x.(int)
	h.mp.ts[i].pos = len(h.ids)
	h.ids = append(h.ids, i)
}
func (h *oldTaskHeap) Pop() any {
	i := h.ids[len(h.ids)-1]
	h.ids = h.ids[:len(h.ids)-1]
	h.mp.ts[i].pos = -1
	return i
}

// minFirst is the benefit heuristic (withSufferage) and Min-min (without).
//
// Each round takes the tasks in ascending minimum completion. A task
// claims its best machine (and, data-aware, its repository) for the round;
// if the machine or repository is claimed already, it displaces the
// holders when its benefit sufferage is higher than each of theirs (they
// wait for the next round, Sufferage-style), and otherwise it loses. After
// the first loser only tasks with a positive benefit sufferage may still
// claim: the ones the deadline presses. The round's claims are then
// committed in claim order, START and Data-START updated, and the next
// round begins. A task whose minimum completion is after its deadline is
// dropped (reported, not mapped) when its turn comes.
//
// With every benefit sufferage zero (no deadline pressure) a round stops at
// its first loser, and every claim before it is exactly Min-min's next pick:
// its machine and repository were untouched by the claims before it, so its
// minimum completion is unchanged and still the least (completions only
// grow). Hence the equality with Min-min, which the property test checks.
func (mp *oldMapper) minFirst(withSufferage bool) {
	h := &oldTaskHeap{mp: mp}
	for i := range mp.p.Tasks {
		mp.ts[i].pos = -1
		if mp.ts[i].best.m < 0 {
			mp.ts[i].done = true // no machine can ever take it: Machine -1
			continue
		}
		h.ids = append(h.ids, i)
		mp.ts[i].pos = len(h.ids) - 1
	}
	heap.Init(h)
	machineHolder := make([]int, len(mp.nodes))
	repoHolder := make([]int, len(mp.repos))
	for k := range machineHolder {
		machineHolder[k] = -1
	}
	for k := range repoHolder {
		repoHolder[k] = -1
	}
	// popFresh pops the task of least minimum completion. The heap is
	// lazy: completions only grow, so a stale key is a lower bound of the
	// true one, and a fresh task on top is the true least.
	popFresh := func() int {
		for {
			i := h.ids[0]
			if mp.fresh(i) {
				heap.Pop(h)
				return i
			}
			mp.refresh(i)
			heap.Fix(h, 0)
		}
	}
	nclaim := make([]int, len(mp.nodes)) // claims on each machine this round
	wclaim := make([]int, len(mp.nodes)) // and their nodes
	claimed := make([]bool, len(mp.p.Tasks))
	var claims, deferred, pressed []int
	for round := 0; h.Len() > 0; round++ {
		claims, deferred = claims[:0], deferred[:0]
		lost := false
		// unclaim takes back task o's claim (it waits for the next round).
		unclaim := func(o int) {
			if !claimed[o] {
				return
			}
			claimed[o] = false
			c := mp.ts[o].best
			nclaim[c.m]--
			wclaim[c.m] -= mp.p.Tasks[o].Width
			claims = slices.DeleteFunc(claims, func(x int) bool { return x == o })
			if machineHolder[c.m] == o {
				machineHolder[c.m] = -1
				for _, x := range claims {
					if mp.ts[x].best.m == c.m {
						machineHolder[c.m] = x
					}
				}
			}
			if r := mp.repoOf(o, c); r >= 0 && repoHolder[r] == o {
				repoHolder[r] = -1
			}
			deferred = append(deferred, o)
		}
		try := func(i int) bool { // claim for task i; false: it lost
			c := mp.ts[i].best
			w := mp.p.Tasks[i].Width
			r := mp.repoOf(i, c)
			// A machine may take several claims in a round while each
			// starts when it would alone (mp.fits): nothing they change
			// matters to it, as for claims on different machines.
			hm := -1
			if nclaim[c.m] > 0 && !mp.fits(c.m, wclaim[c.m], w) {
				if nclaim[c.m] > 1 {
					return false // shared by several: no displacement
				}
				hm = machineHolder[c.m]
			}
			hr := -1
			if r >= 0 {
				hr = repoHolder[r]
			}
			if hm >= 0 || hr >= 0 {
				s := mp.ts[i].suff
				if !withSufferage || (hm >= 0 && mp.ts[hm].suff >= s) || (hr >= 0 && mp.ts[hr].suff >= s) {
					return false
				}
				for _, o := range []int{hm, hr} {
					if o >= 0 {
						unclaim(o)
					}
				}
				if nclaim[c.m] > 0 && !mp.fits(c.m, wclaim[c.m], w) {
					return false // the repository's holder was not the machine's
				}
			}
			claimed[i] = true
			nclaim[c.m]++
			wclaim[c.m] += w
			machineHolder[c.m] = i
			if r >= 0 {
				repoHolder[r] = i
			}
			claims = append(claims, i)
			return true
		}
		for h.Len() > 0 {
			i := popFresh()
			if mp.missed(i) {
				mp.drop(i, round)
				continue
			}
			if !try(i) {
				deferred = append(deferred, i)
				lost = true
				break
			}
		}
		if lost && withSufferage {
			// The tasks the deadline presses may still claim or displace.
			pressed = pressed[:0]
			for _, i := range h.ids {
				if mp.p.Tasks[i].HasDeadline {
					pressed = append(pressed, i)
				}
			}
			pressed = slices.DeleteFunc(pressed, func(i int) bool {
				if !mp.fresh(i) {
					if mp.unpressed(i) {
						return true
					}
					mp.refresh(i)
					heap.Fix(h, mp.ts[i].pos)
				}
				return mp.ts[i].suff <= 0
			})
			slices.SortFunc(pressed, func(a, b int) int {
				if c := mp.ts[a].best.comp - mp.ts[b].best.comp; c != 0 {
					return sign(c)
				}
				return a - b
			})
			for _, i := range pressed {
				if mp.missed(i) {
					heap.Remove(h, mp.ts[i].pos)
					mp.drop(i, round)
					continue
				}
				if try(i) {
					heap.Remove(h, mp.ts[i].pos)
				}
			}
		}
		for _, i := range claims {
			m, _ := mp.commit(i, round)
			machineHolder[m], nclaim[m], wclaim[m], claimed[i] = -1, 0, 0, false
		}
		for k := range repoHolder {
			repoHolder[k] = -1
		}
		for _, i := range deferred {
			heap.Push(h, i)
		}
	}
}

// fits reports whether a task of width w claiming machine m after claims
// of `taken` nodes in the same round starts when it would alone: the
// machine has at least taken + w nodes free by then (nodes[w-1]); the
// claims before it only ever take nodes, and make them free later.
func (mp *oldMapper) fits(m, taken, w int) bool {
	n := mp.nodes[m]
	return taken+w <= len(n) && n[taken+w-1] == n[w-1]
}

// Finding each task's best and second-best machine, and keeping them
// fresh cheaply as the rounds commit (the per-task cache and top list).

// scan recomputes task i's best and second-best machines and its sufferage.
func (mp *oldMapper) scan(i int) {
	t := &mp.p.Tasks[i]
	nm := len(mp.nodes)
	row, src, ver := mp.comp[i*nm:(i+1)*nm], mp.csrc[i*nm:(i+1)*nm], mp.cver[i*nm:(i+1)*nm]
	if !mp.cfg.Blind {
		var rv uint32
		for _, s := range t.Sources {
			if s.Repo >= 0 {
				rv += mp.rver[s.Repo]
			}
		}
		if rv != mp.tver[i] {
			mp.tver[i] = rv
			clear(ver) // a repository it reads from changed: every machine
		}
	}
	s := &mp.ts[i]
	// The previous list first: it holds the likely best, so the machines
	// after it are mostly settled by their cached value alone. A cached
	// value that is out of date is a lower bound (completions only grow):
	// if even it cannot enter the list, the machine is not evaluated.
	var prev [oldTopK]int
	np := s.ntop
	for k := 0; k < np; k++ {
		prev[k] = s.top[k].m
	}
	s.ntop, s.thr = 0, never
	mp.stamp++
	for q := -np; q < len(mp.nodes); q++ {
		var m int
		if q < 0 {
			m = prev[q+np]
			mp.seen[m] = mp.stamp
		} else {
			m = q
			if mp.seen[m] == mp.stamp {
				continue
			}
		}
		c := row[m]
		full := s.ntop == oldTopK
		// worse: c (exact, or a lower bound when out of date) cannot
		// enter the full list.
		worse := full && (c > s.top[oldTopK-1].comp || c == s.top[oldTopK-1].comp && !oldBetter(t, oldCand{m, 0, c}, s.top[oldTopK-1]))
		if ver[m] != mp.mver[m] {
			if worse {
				s.thr = min(s.thr, c)
				continue
			}
			var k int
			c, k = mp.eval(i, m)
			row[m], src[m], ver[m] = c, int32(k), mp.mver[m]
			worse = full && (c > s.top[oldTopK-1].comp || c == s.top[oldTopK-1].comp && !oldBetter(t, oldCand{m, 0, c}, s.top[oldTopK-1]))
		}
		if c == never {
			continue
		}
		if worse {
			s.thr = min(s.thr, c)
			continue
		}
		x := oldCand{m, int(src[m]), c}
		if s.ntop == oldTopK {
			s.thr = min(s.thr, s.top[oldTopK-1].comp)
			s.ntop--
		}
		k := s.ntop
		for k > 0 && oldBetter(t, x, s.top[k-1]) {
			s.top[k], s.tv[k] = s.top[k-1], s.tv[k-1]
			k--
		}
		s.top[k], s.tv[k] = x, mp.mver[m]
		s.ntop++
	}
	mp.settle(i)
}

// settle takes best and second from the top list.
func (mp *oldMapper) settle(i int) {
	s := &mp.ts[i]
	s.best, s.second = oldCand{-1, -1, never}, oldCand{-1, -1, never}
	if s.ntop > 0 {
		s.best, s.bv = s.top[0], s.tv[0]
	}
	if s.ntop > 1 {
		s.second, s.sv = s.top[1], s.tv[1]
	}
	s.suff = mp.sufferageOf(&mp.p.Tasks[i], s.best, s.second)
}

// sufferageOf is the heuristic's sufferage of a task with these best and
// second-best candidates.
func (mp *oldMapper) sufferageOf(t *Task, best, second oldCand) float64 {
	switch {
	case best.m < 0:
		return 0
	case mp.cfg.Heuristic == Sufferage:
		// Classic sufferage: the time lost by taking the second best.
		if second.m < 0 {
			return math.Inf(1)
		}
		return (second.comp - best.comp).Seconds()
	case mp.cfg.Heuristic == Benefit:
		return mp.benefitSufferage(t, best, second)
	}
	return 0
}

// benefitSufferage is β(best) − β(second): what the task loses by being
// pushed to its second-best machine. A task without a deadline has none.
func (mp *oldMapper) benefitSufferage(t *Task, best, second oldCand) float64 {
	if !t.HasDeadline {
		return 0
	}
	d := t.Deadline - t.Submit
	vb := t.Worth.Value(best.comp-t.Submit, d)
	if second.m < 0 {
		return math.Inf(1) // nowhere else to go
	}
	return vb - t.Worth.Value(second.comp-t.Submit, d)
}

// refresh makes a stale task fresh: it re-evaluates the machines of its
// top list that changed; a scan is needed only when the best (and, if the
// sufferage reads it, the second) are no longer certainly ahead of every
// machine outside the list.
func (mp *oldMapper) refresh(i int) {
	s := &mp.ts[i]
	t := &mp.p.Tasks[i]
	if !mp.reposFresh(i) {
		mp.scan(i)
		return
	}
	nm := len(mp.nodes)
	for k := 0; k < s.ntop; k++ {
		m := s.top[k].m
		if v := mp.mver[m]; s.tv[k] != v {
			c, src := mp.eval(i, m)
			mp.comp[i*nm+m], mp.csrc[i*nm+m], mp.cver[i*nm+m] = c, int32(src), v
			s.top[k], s.tv[k] = oldCand{m, src, c}, v
		}
	}
	for k := 1; k < s.ntop; k++ {
		for j := k; j > 0 && oldBetter(t, s.top[j], s.top[j-1]); j-- {
			s.top[j], s.top[j-1] = s.top[j-1], s.top[j]
			s.tv[j], s.tv[j-1] = s.tv[j-1], s.tv[j]
		}
	}
	need := 1
	if mp.needSecond(t) {
		need = 2
	}
	for k := 0; k < min(need, s.ntop); k++ {
		if s.thr != never && s.top[k].comp >= s.thr {
			mp.scan(i)
			return
		}
	}
	mp.settle(i)
}

func (mp *oldMapper) reposFresh(i int) bool {
	if mp.cfg.Blind || !mp.hasRepo[i] {
		return true
	}
	var rv uint32
	for _, src := range mp.p.Tasks[i].Sources {
		if src.Repo >= 0 {
			rv += mp.rver[src.Repo]
		}
	}
	return rv == mp.tver[i]
}

// unpressed proves cheaply, without a refresh, that stale task i's benefit
// sufferage is 0: its true second-best completion is at most the larger of
// the current completions on its last best and second machines (two
// distinct machines), and if even that is before the point where its
// benefit starts to fall, best and second are worth the same.
func (mp *oldMapper) unpressed(i int) bool {
	s := &mp.ts[i]
	t := &mp.p.Tasks[i]
	if s.second.m < 0 || !mp.reposFresh(i) {
		return false
	}
	knee := t.Deadline // the default shape: 1 by the deadline, 0 after
	d := t.Deadline - t.Submit
	switch t.Worth.Shape {
	case policy.Linear, policy.Step:
		knee = t.Submit + time.Duration(t.Worth.B*float64(d))
	}
	nm := len(mp.nodes)
	var u time.Duration
	for _, m := range [2]int{s.best.m, s.second.m} {
		k := i*nm + m
		if mp.cver[k] != mp.mver[m] {
			c, src := mp.eval(i, m)
			mp.comp[k], mp.csrc[k], mp.cver[k] = c, int32(src), mp.mver[m]
		}
		u = max(u, mp.comp[k])
	}
	if t.Worth.Shape == policy.NoWorth {
		return u <= knee
	}
	return u < knee
}

// needSecond: the task's sufferage reads its second best.
func (mp *oldMapper) needSecond(t *Task) bool {
	return mp.cfg.Heuristic == Sufferage || mp.cfg.Heuristic == Benefit && t.HasDeadline
}

// fresh reports whether task i's best (and, when its sufferage needs it,
// second best) are still exact: nothing they depend on changed since its
// last scan. Everything else only got later, so they are still the best.
func (mp *oldMapper) fresh(i int) bool {
	s := &mp.ts[i]
	if mp.mver[s.best.m] != s.bv {
		return false
	}
	if mp.needSecond(&mp.p.Tasks[i]) && s.second.m >= 0 && mp.mver[s.second.m] != s.sv {
		return false
	}
	return mp.reposFresh(i)
}

// unclaim takes back task o's claim; it reports whether o held one.
func (mp *oldMapper) unclaim(o int, machineHolder, repoHolder []int) bool {
	c := mp.ts[o].best
	held := false
	if machineHolder[c.m] == o {
		machineHolder[c.m] = -1
		held = true
	}
	if r := mp.repoOf(o, c); r >= 0 && repoHolder[r] == o {
		repoHolder[r] = -1
		held = true
	}
	return held
}

// sufferage is the classic Sufferage heuristic: every round, each task in
// order claims its best machine; a claimed machine goes to the task with
// the higher sufferage (second-best minus best completion), the other waits
// for the next round. Deadline drops as in minFirst.
func (mp *oldMapper) sufferage() {
	pool := make([]int, 0, len(mp.p.Tasks))
	for i := range mp.p.Tasks {
		if mp.ts[i].best.m >= 0 {
			pool = append(pool, i)
		}
	}
	machineHolder := make([]int, len(mp.nodes))
	repoHolder := make([]int, len(mp.repos))
	var claims []int
	for round := 0; len(pool) > 0; round++ {
		for k := range machineHolder {
			machineHolder[k] = -1
		}
		for k := range repoHolder {
			repoHolder[k] = -1
		}
		claims = claims[:0]
		for _, i := range pool {
			if mp.missed(i) {
				mp.drop(i, round)
				continue
			}
			c := mp.ts[i].best
			r := mp.repoOf(i, c)
			hm, hr := machineHolder[c.m], -1
			if r >= 0 {
				hr = repoHolder[r]
			}
			s := mp.ts[i].suff
			if (hm >= 0 && mp.ts[hm].suff >= s) || (hr >= 0 && mp.ts[hr].suff >= s) {
				continue
			}
			for _, o := range []int{hm, hr} {
				if o >= 0 && mp.unclaim(o, machineHolder, repoHolder) {
					claims = slices.DeleteFunc(claims, func(x int) bool { return x == o })
				}
			}
			machineHolder[c.m] = i
			if r >= 0 {
				repoHolder[r] = i
			}
			claims = append(claims, i)
		}
		for _, i := range claims {
			mp.commit(i, round)
		}
		pool = slices.DeleteFunc(pool, func(i int) bool { return mp.ts[i].done })
		for _, i := range pool {
			if !mp.fresh(i) {
				mp.scan(i)
			}
		}
	}
}
