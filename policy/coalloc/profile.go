package coalloc

import (
	"math"
	"slices"
	"sort"
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

// profile is the availability of one site over time: a step function of free
// nodes. Step i holds from at[i] (an offset from Snapshot.Now) until at[i+1];
// the last step lasts for ever. at[0] is always 0, so free[0] is "free now".
//
// A reservation made in the pass subtracts nodes over its window (take), so
// every later question (minFree, earliest) sees it. Lookups are a binary
// search plus a scan of the steps inside the asked window; take inserts at
// most two steps (a slice insert: O(log n + k) comparisons plus one memmove).
type profile struct {
	at   []time.Duration
	free []int
}

// newProfile builds a site's profile from its free nodes and Busy holds.
func newProfile(s *policy.Site, now time.Time) profile {
	p := profile{at: make([]time.Duration, 1, len(s.Busy)+1), free: make([]int, 1, len(s.Busy)+1)}
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
func (p *profile) find(t time.Duration) int {
	return sort.Search(len(p.at), func(i int) bool { return p.at[i] > t }) - 1
}

// minFree is the fewest free nodes over [t, t+d).
func (p *profile) minFree(t, d time.Duration) int {
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
func (p *profile) eventual() int { return p.free[len(p.free)-1] }

// earliest is the first offset t >= from at which n nodes stay free for d, in
// one forward pass over the steps.
func (p *profile) earliest(from time.Duration, n int, d time.Duration) (time.Duration, bool) {
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

// split makes a step start exactly at t and returns its index.
func (p *profile) split(t time.Duration) int {
	i := p.find(t)
	if p.at[i] == t {
		return i
	}
	p.at = slices.Insert(p.at, i+1, t)
	p.free = slices.Insert(p.free, i+1, p.free[i])
	return i + 1
}

// take holds n nodes over [t, t+d).
func (p *profile) take(t, d time.Duration, n int) {
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

// addDur is t+d, saturating at never.
func addDur(t, d time.Duration) time.Duration {
	if d >= never-t {
		return never
	}
	return t + d
}
