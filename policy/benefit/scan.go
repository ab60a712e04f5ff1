package benefit

import (
	"math"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Finding each task's best and second-best machine, and keeping them
// fresh cheaply as the rounds commit (the per-task cache and top list).

// scan recomputes task i's best and second-best machines and its sufferage.

func (mp *mapper) scan(i int) {
	if !mp.hasRepo[i] || mp.cfg.Blind {
		mp.scanFixed(i)
		return
	}
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
	var prev [topK]int
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
		full := s.ntop == topK
		// worse: c (exact, or a lower bound when out of date) cannot
		// enter the full list.
		worse := full && (c > s.top[topK-1].comp || c == s.top[topK-1].comp && !better(t, cand{m, 0, c}, s.top[topK-1]))
		if ver[m] != mp.mver[m] {
			if worse {
				s.thr = min(s.thr, c)
				continue
			}
			var k int
			c, k = mp.eval(i, m)
			row[m], src[m], ver[m] = c, int32(k), mp.mver[m]
			worse = full && (c > s.top[topK-1].comp || c == s.top[topK-1].comp && !better(t, cand{m, 0, c}, s.top[topK-1]))
		}
		if c == never {
			continue
		}
		if worse {
			s.thr = min(s.thr, c)
			continue
		}
		x := cand{m, int(src[m]), c}
		if s.ntop == topK {
			s.thr = min(s.thr, s.top[topK-1].comp)
			s.ntop--
		}
		k := s.ntop
		for k > 0 && better(t, x, s.top[k-1]) {
			s.top[k], s.tv[k] = s.top[k-1], s.tv[k-1]
			k--
		}
		s.top[k], s.tv[k] = x, mp.mver[m]
		s.ntop++
	}
	mp.settle(i)
}

// scanFixed is scan for a task whose completion on a machine is START
// plus its fix: computing one is cheaper than the cache, so every machine
// is computed afresh. The list and thr it leaves are the ones scan would
// (exact values, ties by better).
func (mp *mapper) scanFixed(i int) {
	t := &mp.p.Tasks[i]
	s := &mp.ts[i]
	nm := len(mp.nodes)
	fix, fsrc := mp.fix[i*nm:(i+1)*nm], mp.fsrc[i*nm:(i+1)*nm]
	w := t.Width - 1
	s.ntop, s.thr = 0, never
	for m, f := range fix {
		if f == never {
			continue
		}
		x := cand{m, int(fsrc[m]), mp.nodes[m][w] + f}
		if s.ntop == topK {
			if !better(t, x, s.top[topK-1]) {
				s.thr = min(s.thr, x.comp)
				continue
			}
			s.thr = min(s.thr, s.top[topK-1].comp)
			s.ntop--
		}
		k := s.ntop
		for k > 0 && better(t, x, s.top[k-1]) {
			s.top[k], s.tv[k] = s.top[k-1], s.tv[k-1]
			k--
		}
		s.top[k], s.tv[k] = x, mp.mver[m]
		s.ntop++
	}
	mp.settle(i)
}

// settle takes best and second from the top list.
func (mp *mapper) settle(i int) {
	s := &mp.ts[i]
	s.best, s.second = cand{-1, -1, never}, cand{-1, -1, never}
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
func (mp *mapper) sufferageOf(t *Task, best, second cand) float64 {
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
func (mp *mapper) benefitSufferage(t *Task, best, second cand) float64 {
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

// refresh makes a stale task fresh. The values of its top list are lower
// bounds (completions only grow): it re-evaluates only the entries that
// come first and are out of date, until the first (and, if the sufferage
// reads it, the second) entry is exact and ahead of the rest of the list;
// a scan is needed only when those are no longer certainly ahead of every
// machine outside the list (thr). The rest of the list may stay out of
// date: a later refresh or scan reads it as the lower bound it is.
func (mp *mapper) refresh(i int) {
	s := &mp.ts[i]
	t := &mp.p.Tasks[i]
	if !mp.reposFresh(i) {
		mp.scan(i)
		return
	}
	need := 1
	if mp.needSecond(t) {
		need = 2
	}
	nm := len(mp.nodes)
	for k := 0; k < min(need, s.ntop); k++ {
		for {
			b := k
			for j := k + 1; j < s.ntop; j++ {
				if better(t, s.top[j], s.top[b]) {
					b = j
				}
			}
			s.top[k], s.top[b] = s.top[b], s.top[k]
			s.tv[k], s.tv[b] = s.tv[b], s.tv[k]
			m := s.top[k].m
			v := mp.mver[m]
			if s.tv[k] == v {
				break
			}
			if e := i*nm + m; mp.cver[e] == v {
				s.top[k], s.tv[k] = cand{m, int(mp.csrc[e]), mp.comp[e]}, v
				continue
			}
			c, src := mp.eval(i, m)
			mp.comp[i*nm+m], mp.csrc[i*nm+m], mp.cver[i*nm+m] = c, int32(src), v
			s.top[k], s.tv[k] = cand{m, src, c}, v
		}
		if s.thr != never && s.top[k].comp >= s.thr {
			mp.scan(i)
			return
		}
	}
	mp.settle(i)
}

func (mp *mapper) reposFresh(i int) bool {
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
func (mp *mapper) unpressed(i int) bool {
	s := &mp.ts[i]
	t := &mp.p.Tasks[i]
	if s.second.m < 0 || !mp.reposFresh(i) {
		return false
	}
	knee := kneeOf(t)
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

// kneeOf is the completion up to which task t's benefit does not fall:
// two completions both before it (NoWorth: not after it) are worth the
// same.
func kneeOf(t *Task) time.Duration {
	knee := t.Deadline // the default shape: 1 by the deadline, 0 after
	d := t.Deadline - t.Submit
	switch t.Worth.Shape {
	case policy.Linear, policy.Step:
		knee = t.Submit + time.Duration(t.Worth.B*float64(d))
	}
	return knee
}

// needSecond: the task's sufferage reads its second best.
func (mp *mapper) needSecond(t *Task) bool {
	return mp.cfg.Heuristic == Sufferage || mp.cfg.Heuristic == Benefit && t.HasDeadline
}

// fresh reports whether task i's best (and, when its sufferage needs it,
// second best) are still exact: nothing they depend on changed since its
// last scan. Everything else only got later, so they are still the best.
func (mp *mapper) fresh(i int) bool {
	s := &mp.ts[i]
	if mp.mver[s.best.m] != s.bv {
		return false
	}
	if mp.needSecond(&mp.p.Tasks[i]) && s.second.m >= 0 && mp.mver[s.second.m] != s.sv {
		return false
	}
	return mp.reposFresh(i)
}
