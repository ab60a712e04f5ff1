package benefit

import (
	"cmp"
	"container/heap"
	"slices"
	"time"
)

// The waiting tasks of minFirst, ordered by minimum completion then index
// (issue 17's speed bar).
//
// A lazy heap of tasks (taskHeap) refreshes a stale task whenever it comes
// to the top; when many tasks share their best machines, every commit
// makes them all stale, and a pass refreshes each of them again and again
// (the growth was about n² refreshes). Most tasks, though, read from no
// contended repository (every task, data-blind): their completion on
// machine m is START(m, w) + fix, with fix fixed for the whole event. For
// them fixQueue keeps, per machine and task width, the tasks ordered by
// fix: the head of such a list is the list's best task, and its key moves
// only when the machine takes a commit. The least task overall is the
// least head, found in an indexed heap over the lists. Tasks reading from
// a contended repository stay in the lazy heap; queue merges the two.

// queue is the set of waiting tasks.
type queue struct {
	mp *mapper
	h  *taskHeap
	f  *fixQueue // nil: no task is in it
}

func newQueue(mp *mapper) *queue {
	q := &queue{mp: mp, h: &taskHeap{mp: mp}}
	var fixed []int
	for i := range mp.p.Tasks {
		mp.ts[i].pos = -1
		if mp.ts[i].best.m < 0 {
			mp.ts[i].done = true // no machine can ever take it: Machine -1
			continue
		}
		if mp.isFixed(i) {
			fixed = append(fixed, i)
			continue
		}
		q.h.ids = append(q.h.ids, i)
		mp.ts[i].pos = len(q.h.ids) - 1
	}
	heap.Init(q.h)
	if len(fixed) > 0 {
		q.f = newFixQueue(mp, fixed)
	}
	return q
}

// isFixed: task i's completion on a machine is START plus its fix.
func (mp *mapper) isFixed(i int) bool { return !mp.hasRepo[i] || mp.cfg.Blind }

func (q *queue) Len() int {
	n := q.h.Len()
	if q.f != nil {
		n += q.f.n
	}
	return n
}

// in reports whether task i is waiting in the queue.
func (q *queue) in(i int) bool {
	return q.mp.ts[i].pos >= 0 || q.f != nil && q.f.in[i]
}

// popFresh takes out the task of least minimum completion (then least
// index) and leaves its state (best, second, sufferage) exact. The lazy
// heap's stale keys are lower bounds (completions only grow), so its top
// is refreshed until it is fresh, and then it is its true least.
func (q *queue) popFresh() int {
	mp := q.mp
	for {
		a := -1
		if q.h.Len() > 0 {
			a = q.h.ids[0]
			if !mp.fresh(a) {
				mp.refresh(a)
				heap.Fix(q.h, 0)
				continue
			}
		}
		b, kb := -1, never
		if q.f != nil {
			b, kb = q.f.least()
		}
		if a >= 0 && (b < 0 || mp.ts[a].best.comp < kb || mp.ts[a].best.comp == kb && a < b) {
			heap.Pop(q.h)
			return a
		}
		q.f.take(b)
		if !mp.fresh(b) {
			mp.refresh(b)
		}
		return b
	}
}

// fix restores task i's place after its key changed (a refresh).
func (q *queue) fix(i int) {
	if p := q.mp.ts[i].pos; p >= 0 {
		heap.Fix(q.h, p)
	}
}

// remove takes waiting task i out.
func (q *queue) remove(i int) {
	if p := q.mp.ts[i].pos; p >= 0 {
		heap.Remove(q.h, p)
		return
	}
	q.f.take(i)
}

// push puts task i (taken out this round, not mapped) back.
func (q *queue) push(i int) {
	if q.mp.isFixed(i) {
		q.f.put(i)
		return
	}
	heap.Push(q.h, i)
}

// committed updates the queue after machine m took a commit.
func (q *queue) committed(m int) {
	if q.f != nil {
		q.f.committed(m)
	}
}

// fent is a task in one list of fixQueue (its fix on the list's machine),
// or one parked in pressWatch.timed.
type fent struct {
	fix  time.Duration
	task int32
}

func (a fent) less(b fent) bool { return a.fix < b.fix || a.fix == b.fix && a.task < b.task }

// fixQueue holds the waiting tasks whose completion is START plus a fix.
// (A list's key is START plus the fix of ktask, its first waiting task
// when the key was computed.)
// List l = m*nc + c holds the tasks of width class c that machine m can
// take, sorted by (fix, task); the tasks before head[l] are all mapped.
// A task taken out of the queue keeps its entries (it is skipped while
// out; few are out at once: the round's claims and losers), so putting it
// back costs no insertion. key[l] is START(m, width of c) plus the fix of
// the list's first waiting task ktask[l]: exact while that task waits (it
// is recomputed when START changes or a task that comes back is ahead),
// and a lower bound once it is taken. ord is an indexed min-heap of the
// lists by (key, ktask).
type fixQueue struct {
	mp     *mapper
	nc     int
	class  []int32 // per task: its width class
	widths []int   // per class
	lists  [][]fent
	head   []int
	in     []bool
	n      int
	key    []time.Duration
	kfix   []time.Duration // the fix of ktask's entry
	ktask  []int32
	ord    []int32
	opos   []int32
}

func newFixQueue(mp *mapper, tasks []int) *fixQueue {
	nm := len(mp.nodes)
	f := &fixQueue{mp: mp, class: make([]int32, len(mp.p.Tasks)), in: make([]bool, len(mp.p.Tasks)), n: len(tasks)}
	byWidth := map[int]int32{}
	for _, i := range tasks {
		w := mp.p.Tasks[i].Width
		c, ok := byWidth[w]
		if !ok {
			c = int32(len(f.widths))
			byWidth[w] = c
			f.widths = append(f.widths, w)
		}
		f.class[i] = c
		f.in[i] = true
	}
	f.nc = len(f.widths)
	nl := nm * f.nc
	// One backing array, cut into the lists.
	size := make([]int, nl)
	for _, i := range tasks {
		for m, fx := range mp.fix[i*nm : (i+1)*nm] {
			if fx != never {
				size[m*f.nc+int(f.class[i])]++
			}
		}
	}
	total := 0
	for _, s := range size {
		total += s
	}
	back := make([]fent, total)
	f.lists = make([][]fent, nl)
	at := 0
	for l, s := range size {
		f.lists[l] = back[at : at : at+s]
		at += s
	}
	for _, i := range tasks {
		for m, fx := range mp.fix[i*nm : (i+1)*nm] {
			if fx != never {
				l := m*f.nc + int(f.class[i])
				f.lists[l] = append(f.lists[l], fent{fix: fx, task: int32(i)})
			}
		}
	}
	f.head = make([]int, nl)
	f.key, f.kfix, f.ktask, f.ord, f.opos = make([]time.Duration, nl), make([]time.Duration, nl), make([]int32, nl), make([]int32, nl), make([]int32, nl)
	sortLists(f.lists, len(mp.p.Tasks))
	for l := range f.lists {
		f.setKey(l)
		f.ord[l], f.opos[l] = int32(l), int32(l)
	}
	for k := nl/2 - 1; k >= 0; k-- {
		f.down(k)
	}
	return f
}

// sortLists sorts each list by (fix, task). The entries were appended in
// task order, and when every fix leaves room for a task index in the low
// bits of an int64 the pairs are packed and sorted as plain integers
// (several times faster than a comparison function); otherwise by the
// comparison.
func sortLists(lists [][]fent, ntasks int) {
	bits := 1
	for 1<<bits < ntasks {
		bits++
	}
	limit := time.Duration(1) << (62 - bits)
	var keys []int64
	for _, es := range lists {
		packed := true
		for _, e := range es {
			if e.fix < 0 || e.fix >= limit {
				packed = false
				break
			}
		}
		if !packed {
			slices.SortFunc(es, func(a, b fent) int {
				if a.fix != b.fix {
					return cmp.Compare(a.fix, b.fix)
				}
				return cmp.Compare(a.task, b.task)
			})
			continue
		}
		keys = keys[:0]
		for _, e := range es {
			keys = append(keys, int64(e.fix)<<bits|int64(e.task))
		}
		slices.Sort(keys)
		for k, x := range keys {
			es[k] = fent{fix: time.Duration(x >> bits), task: int32(x & (1<<bits - 1))}
		}
	}
}

// setKey recomputes list l's key from its first waiting task, and moves
// its head past the mapped tasks.
func (f *fixQueue) setKey(l int) {
	es, k := f.lists[l], f.head[l]
	for k < len(es) && f.mp.ts[es[k].task].done {
		k++
	}
	f.head[l] = k
	for k < len(es) && !f.in[es[k].task] {
		k++
	}
	if k == len(es) {
		f.key[l], f.ktask[l] = never, -1
		return
	}
	m, c := l/f.nc, l%f.nc
	f.key[l], f.kfix[l], f.ktask[l] = f.mp.nodes[m][f.widths[c]-1]+es[k].fix, es[k].fix, es[k].task
}

// least returns the waiting task of least completion (then index) and that
// completion; -1 when none waits. It leaves the task in.
func (f *fixQueue) least() (int, time.Duration) {
	for {
		l := int(f.ord[0])
		if f.key[l] == never {
			return -1, never
		}
		if i := f.ktask[l]; f.in[i] {
			return int(i), f.key[l]
		}
		f.later(l)
	}
}

// take takes waiting task i out.
func (f *fixQueue) take(i int) {
	f.in[i] = false
	f.n--
}

// put puts task i back; the lists where it is now the first waiting task
// get their key back down.
func (f *fixQueue) put(i int) {
	f.in[i] = true
	f.n++
	nm := len(f.mp.nodes)
	c := int(f.class[i])
	for m, fx := range f.mp.fix[i*nm : (i+1)*nm] {
		if fx == never {
			continue
		}
		l := m*f.nc + c
		if k := f.mp.nodes[m][f.widths[c]-1] + fx; k < f.key[l] || k == f.key[l] && int32(i) < f.ktask[l] {
			f.key[l], f.kfix[l], f.ktask[l] = k, fx, int32(i)
			f.up(int(f.opos[l]))
		}
	}
}

// committed moves the keys of machine m's lists to its new START (later):
// the key of a list whose first task has left stays a lower bound, made
// exact when the list comes to the top (least).
func (f *fixQueue) committed(m int) {
	for c := 0; c < f.nc; c++ {
		l := m*f.nc + c
		if f.key[l] == never {
			continue
		}
		f.key[l] = f.mp.nodes[m][f.widths[c]-1] + f.kfix[l]
		f.down(int(f.opos[l]))
	}
}

// later recomputes list l's key after it grew (its first waiting task
// left, or START moved later) and restores its place.
func (f *fixQueue) later(l int) {
	f.setKey(l)
	f.down(int(f.opos[l]))
}

func (f *fixQueue) lessList(a, b int32) bool {
	if f.key[a] != f.key[b] {
		return f.key[a] < f.key[b]
	}
	return f.ktask[a] < f.ktask[b]
}

func (f *fixQueue) swap(x, y int) {
	f.ord[x], f.ord[y] = f.ord[y], f.ord[x]
	f.opos[f.ord[x]], f.opos[f.ord[y]] = int32(x), int32(y)
}

func (f *fixQueue) up(k int) {
	for k > 0 {
		p := (k - 1) / 2
		if !f.lessList(f.ord[k], f.ord[p]) {
			return
		}
		f.swap(k, p)
		k = p
	}
}

func (f *fixQueue) down(k int) {
	n := len(f.ord)
	for {
		c := 2*k + 1
		if c >= n {
			return
		}
		if c+1 < n && f.lessList(f.ord[c+1], f.ord[c]) {
			c++
		}
		if !f.lessList(f.ord[c], f.ord[k]) {
			return
		}
		f.swap(k, c)
		k = c
	}
}

// pushHeap and popHeap keep a list a binary min-heap by fent.less.
func pushHeap(h []fent, e fent) []fent {
	h = append(h, e)
	for k := len(h) - 1; k > 0; {
		p := (k - 1) / 2
		if !h[k].less(h[p]) {
			break
		}
		h[k], h[p] = h[p], h[k]
		k = p
	}
	return h
}

func popHeap(h []fent) []fent {
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	siftDown(h, 0)
	return h
}

func siftDown(h []fent, k int) {
	n := len(h)
	for {
		c := 2*k + 1
		if c >= n {
			return
		}
		if c+1 < n && h[c+1].less(h[c]) {
			c++
		}
		if !h[c].less(h[k]) {
			return
		}
		h[k], h[c] = h[c], h[k]
		k = c
	}
}
