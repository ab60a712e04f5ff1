package benefit

import "github.com/gridsub/gridsub/policy"

// Finding the deadline-pressed tasks of a round without looking at every
// waiting task (issue 17's speed bar).
//
// After a round's first loser, minFirst lets the tasks with a positive
// benefit sufferage still claim. Whether a waiting task is one of them
// depends only on its best and second machines at its last evaluation and
// on its repositories: it was shown unpressed either from the current
// completions on those two machines (unpressed) or from its exact, fresh
// sufferage, and both proofs hold until one of those two machines or one
// of its repositories takes a commit (every other machine only got later,
// which moves neither the best nor an upper bound of the second). So a
// task shown unpressed is parked on the watch lists of those machines and
// repositories, and comes back for another look only when one of them
// commits; a pass looks at the tasks that came back, not at the whole
// queue. The set it finds is the one the full look found (the oracle test
// compares the two engines).

// pressWatch holds the deadline tasks a pressed pass must look at (dirty)
// and the ones parked until a machine or repository they depend on
// commits. A task may sit on a list it no longer depends on: waking it
// only costs a look.
type pressWatch struct {
	dirty     []int
	isDirty   []bool
	byMachine [][]int
	byRepo    [][]int
	// For a task of the fixQueue (completion START + fix) shown unpressed
	// because its completions on its best and second machines are both
	// before its knee, the proof holds until one of them reaches the knee:
	// the task waits in timed[m*nc+c] (a min-heap by the START at which
	// the proof fails) and a commit on m wakes only the ones it passes.
	f     *fixQueue
	timed [][]fent
}

func newPressWatch(mp *mapper, q *queue) *pressWatch {
	w := &pressWatch{isDirty: make([]bool, len(mp.p.Tasks)), byMachine: make([][]int, len(mp.nodes)), byRepo: make([][]int, len(mp.repos)), f: q.f}
	if w.f != nil {
		w.timed = make([][]fent, len(w.f.lists))
	}
	for i := range mp.p.Tasks {
		if mp.p.Tasks[i].HasDeadline && !mp.ts[i].done {
			w.mark(i)
		}
	}
	return w
}

// mark asks for a look at task i in the next pass.
func (w *pressWatch) mark(i int) {
	if !w.isDirty[i] {
		w.isDirty[i] = true
		w.dirty = append(w.dirty, i)
	}
}

// committed wakes the tasks parked on machine m and repository r (-1: none).
func (w *pressWatch) committed(mp *mapper, m, r int) {
	for _, i := range w.byMachine[m] {
		w.mark(i)
	}
	if w.f != nil {
		for c := 0; c < w.f.nc; c++ {
			l := m*w.f.nc + c
			if len(w.timed[l]) == 0 {
				continue // also when the machine is too narrow for the class
			}
			st := mp.nodes[m][w.f.widths[c]-1]
			for len(w.timed[l]) > 0 && w.timed[l][0].fix <= st {
				w.mark(int(w.timed[l][0].task))
				w.timed[l] = popHeap(w.timed[l])
			}
		}
	}
	w.byMachine[m] = w.byMachine[m][:0]
	if r >= 0 {
		for _, i := range w.byRepo[r] {
			w.mark(i)
		}
		w.byRepo[r] = w.byRepo[r][:0]
	}
}

// park takes task i off the dirty set until its best or second machine or
// one of its repositories commits.
func (w *pressWatch) park(mp *mapper, i int) {
	s := &mp.ts[i]
	if w.parkTimed(mp, i) {
		return
	}
	w.byMachine[s.best.m] = append(w.byMachine[s.best.m], i)
	if s.second.m >= 0 {
		w.byMachine[s.second.m] = append(w.byMachine[s.second.m], i)
	}
	if !mp.cfg.Blind && mp.hasRepo[i] {
		for _, src := range mp.p.Tasks[i].Sources {
			if src.Repo >= 0 {
				w.byRepo[src.Repo] = append(w.byRepo[src.Repo], i)
			}
		}
	}
}

// pressed appends to out the waiting tasks (in the heap) with a positive
// benefit sufferage, each fresh, in no particular order: the tasks of the
// dirty set, where a stale one is refreshed (and its queue place fixed)
// unless unpressed proves it out cheaply (its queue place is fixed). The ones found unpressed are
// parked; the pressed ones stay dirty for the next pass, and so do the
// ones out of the heap (popped this round: they may come back).
func (w *pressWatch) pressed(mp *mapper, q *queue, out []int) []int {
	keep := w.dirty[:0]
	for _, i := range w.dirty {
		if mp.ts[i].done {
			w.isDirty[i] = false
			continue
		}
		if !q.in(i) {
			keep = append(keep, i)
			continue
		}
		if !mp.fresh(i) {
			if mp.unpressed(i) {
				w.isDirty[i] = false
				w.park(mp, i)
				continue
			}
			mp.refresh(i)
			q.fix(i)
		}
		if mp.ts[i].suff <= 0 {
			w.isDirty[i] = false
			w.park(mp, i)
			continue
		}
		keep = append(keep, i)
		out = append(out, i)
	}
	w.dirty = keep
	return out
}

// parkTimed parks task i of the fixQueue on the START of its best and
// second machines, if its completions there are both before its knee (the
// proof of unpressed); false: it is not such a task, or they are not.
func (w *pressWatch) parkTimed(mp *mapper, i int) bool {
	s := &mp.ts[i]
	if w.f == nil || !mp.isFixed(i) || s.second.m < 0 {
		return false
	}
	t := &mp.p.Tasks[i]
	knee := kneeOf(t)
	if t.Worth.Shape == policy.NoWorth {
		knee++ // not after the knee: before knee+1ns
	}
	nm := len(mp.nodes)
	ms := [2]int{s.best.m, s.second.m}
	for _, m := range ms {
		if f := mp.fix[i*nm+m]; f == never || mp.nodes[m][t.Width-1]+f >= knee {
			return false
		}
	}
	c := int(w.f.class[i])
	for _, m := range ms {
		l := m*w.f.nc + c
		w.timed[l] = pushHeap(w.timed[l], fent{fix: knee - mp.fix[i*nm+m], task: int32(i)})
	}
	return true
}
