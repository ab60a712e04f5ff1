package coalloc

// The flat (one slice, linear scan) profile the blocked one replaced, kept as
// the reference the blocked profile is checked against.

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"pgregory.net/rapid"
)

// profile is the availability of one site over time: a step function of free
// nodes. Step i holds from at[i] (an offset from Snapshot.Now) until at[i+1];
// the last step lasts for ever. at[0] is always 0, so free[0] is "free now".
//
// A reservation made in the pass subtracts nodes over its window (take), so
// every later question (minFree, earliest) sees it. Lookups are a binary
// search plus a scan of the steps inside the asked window; take inserts at
// most two steps (a slice insert: O(log n + k) comparisons plus one memmove).
type flatProfile struct {
	at   []time.Duration
	free []int
}

// newProfile builds a site's profile from its free nodes and Busy holds.
func newFlatProfile(s *policy.Site, now time.Time) flatProfile {
	p := flatProfile{at: make([]time.Duration, 1, len(s.Busy)+1), free: make([]int, 1, len(s.Busy)+1)}
	p.free[0] = s.Free
	if len(s.Busy) == 0 {
		return p
	}
	type rel struct {
		at time.Duration
		n  int
	}
	rs := make([]rel, 0, len(s.Busy))
	for _, h := range s.Busy {
		if h.Nodes <= 0 {
			continue
		}
		at := h.Until.Sub(now)
		if at <= 0 {
			at = overdueGrace
		}
		rs = append(rs, rel{at, h.Nodes})
	}
	slices.SortFunc(rs, func(a, b rel) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	cur := s.Free
	for _, r := range rs {
		cur += r.n
		if last := len(p.at) - 1; p.at[last] == r.at {
			p.free[last] = cur
			continue
		}
		p.at = append(p.at, r.at)
		p.free = append(p.free, cur)
	}
	return p
}

// find is the index of the step that holds at offset t >= 0.
func (p *flatProfile) find(t time.Duration) int {
	return sort.Search(len(p.at), func(i int) bool { return p.at[i] > t }) - 1
}

// minFree is the fewest free nodes over [t, t+d).
func (p *flatProfile) minFree(t, d time.Duration) int {
	i := p.find(t)
	m := p.free[i]
	end := addDur(t, d)
	for j := i + 1; j < len(p.at) && p.at[j] < end; j++ {
		if p.free[j] < m {
			m = p.free[j]
		}
	}
	return m
}

// eventual is the free nodes once everything known has ended.
func (p *flatProfile) eventual() int { return p.free[len(p.free)-1] }

// earliest is the first offset t >= from at which n nodes stay free for d, in
// one forward pass over the steps.
func (p *flatProfile) earliest(from time.Duration, n int, d time.Duration) (time.Duration, bool) {
	cand := from
	for j := p.find(from); j < len(p.at); j++ {
		if p.free[j] < n {
			if j+1 == len(p.at) {
				return never, false
			}
			cand = p.at[j+1]
			continue
		}
		if j+1 == len(p.at) || p.at[j+1] >= addDur(cand, d) {
			return cand, true
		}
	}
	return never, false
}

// windowMin is the fewest free nodes over [t, end) and the start of the
// step after the last step with that many (never after the last step).
func (p *flatProfile) windowMin(t, end time.Duration) (int, time.Duration) {
	i := p.find(t)
	m, last := p.free[i], i
	for k := i + 1; k < len(p.at) && p.at[k] < end; k++ {
		if p.free[k] <= m {
			m, last = p.free[k], k
		}
	}
	if last+1 < len(p.at) {
		return m, p.at[last+1]
	}
	return m, never
}

// split makes a step start exactly at t and returns its index.
func (p *flatProfile) split(t time.Duration) int {
	i := p.find(t)
	if p.at[i] == t {
		return i
	}
	p.at = slices.Insert(p.at, i+1, t)
	p.free = slices.Insert(p.free, i+1, p.free[i])
	return i + 1
}

// take holds n nodes over [t, t+d).
func (p *flatProfile) take(t, d time.Duration, n int) {
	if d <= 0 {
		d = 1
	}
	i := p.split(t)
	end := addDur(t, d)
	k := len(p.at)
	if end != never {
		k = p.split(end)
	}
	for ; i < k; i++ {
		p.free[i] -= n
	}
}

// TestPropertyProfileMatchesFlat runs random holds and reservations on the
// blocked profile and the flat reference and compares every answer.
func TestPropertyProfileMatchesFlat(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes := rapid.IntRange(1, 200).Draw(t, "nodes")
		site := policy.Site{Nodes: nodes, Free: nodes}
		for k := rapid.IntRange(0, 150).Draw(t, "holds"); k > 0 && site.Free > 0; k-- {
			n := rapid.IntRange(1, site.Free).Draw(t, "n")
			site.Free -= n
			site.Busy = append(site.Busy, policy.Hold{Nodes: n, Until: t0.Add(time.Duration(rapid.IntRange(-5, 500).Draw(t, "until")) * time.Second)})
		}
		fp := newFlatProfile(&site, t0)
		// bp reuses the memory of a profile built for another site and
		// changed by reservations, as a pooled State does.
		other := policy.Site{Nodes: 50, Free: 10, Busy: []policy.Hold{{Nodes: 40, Until: t0.Add(time.Hour)}}}
		bp := newProfile(&other, t0)
		for k := rapid.IntRange(0, 100).Draw(t, "junk"); k > 0; k-- {
			bp.take(time.Duration(k)*time.Second, time.Duration(k)*time.Minute, 1)
		}
		bp.build(&site, t0)
		dur := func(label string) time.Duration {
			return time.Duration(rapid.IntRange(1, 300).Draw(t, label)) * time.Second
		}
		for op := rapid.IntRange(1, 300).Draw(t, "ops"); op > 0; op-- {
			at, d := dur("at")-time.Second, dur("d")
			n := rapid.IntRange(1, nodes).Draw(t, "width")
			if got, want := bp.minFree(at, d), fp.minFree(at, d); got != want {
				t.Fatalf("minFree(%v,%v) = %d, flat %d", at, d, got, want)
			}
			gm, gn := bp.windowMin(at, addDur(at, d))
			wm, wn := fp.windowMin(at, addDur(at, d))
			if gm != wm || gn != wn {
				t.Fatalf("windowMin(%v,%v) = %d %v, flat %d %v (%d blocks)", at, addDur(at, d), gm, gn, wm, wn, len(bp.b))
			}
			if bp.mono {
				for i := 1; i < len(fp.free); i++ {
					if fp.free[i] < fp.free[i-1] {
						t.Fatalf("a profile marked never falling falls at %v: %v", fp.at[i], fp.free)
					}
				}
			}
			if got, want := bp.minFreeFromNow(d), fp.minFree(0, d); got != want {
				t.Fatalf("minFreeFromNow(%v) = %d, flat minFree(0, %v) %d", d, got, d, want)
			}
			gt, gok := bp.earliest(at, n, d)
			wt, wok := fp.earliest(at, n, d)
			if gt != wt || gok != wok {
				t.Fatalf("earliest(%v,%d,%v) = %v %v, flat %v %v", at, n, d, gt, gok, wt, wok)
			}
			if gok && rapid.Bool().Draw(t, "take") {
				bp.take(gt, d, n)
				fp.take(gt, d, n)
			}
			var got []string
			bp.steps(func(at time.Duration, f int) { got = append(got, fmt.Sprint(at, f)) })
			var want []string
			for i := range fp.at {
				want = append(want, fmt.Sprint(fp.at[i], fp.free[i]))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("steps differ:\n%v\n%v", got, want)
			}
			if bp.freeNow() != fp.free[0] || bp.eventual() != fp.eventual() {
				t.Fatal("freeNow/eventual differ")
			}
		}
	})
}
