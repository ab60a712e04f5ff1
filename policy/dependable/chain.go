package dependable

import (
	"math"
	"slices"
	"time"
)

// Chain is one site's Markov chain over time-to-failure states (paper 004
// §1). The zero value is not usable: build it with NewChain. A Chain is not
// safe for concurrent use.
type Chain struct {
	threshold float64 // ns
	maxStates int
	states    []float64 // S_k: running mean TTF in ns
	visits    []int64   // how many TTFs were merged into S_k
	trans     [][]int64 // n_qk
	cur       int       // state of the last failure, -1 before the first
}

// NewChain returns an empty chain. threshold is the merge distance (a new
// TTF closer than it to a state joins that state); maxStates bounds the
// state space (>= 1).
func NewChain(threshold time.Duration, maxStates int) *Chain {
	return &Chain{threshold: float64(threshold), maxStates: max(1, maxStates), cur: -1}
}

// Len is the number of states.
func (c *Chain) Len() int { return len(c.states) }

// Failures is the number of TTFs the chain has learned.
func (c *Chain) Failures() int64 {
	var n int64
	for _, v := range c.visits {
		n += v
	}
	return n
}

// Current is the index of the last failure's state, -1 before the first.
func (c *Chain) Current() int { return c.cur }

// State returns S_k and the number of TTFs merged into it.
func (c *Chain) State(k int) (time.Duration, int64) {
	return time.Duration(c.states[k]), c.visits[k]
}

// Transitions returns n_qk.
func (c *Chain) Transitions(q, k int) int64 { return c.trans[q][k] }

// Add learns one failure after ttf of uptime: the TTF joins the nearest
// state within the threshold (its running mean) or becomes a new state, and
// the transition from the previous failure's state is counted. It returns
// the state's index. A negative ttf counts as 0.
func (c *Chain) Add(ttf time.Duration) int {
	x := float64(max(ttf, 0))
	k, best := -1, math.Inf(1)
	for i, s := range c.states {
		if d := math.Abs(s - x); d < best {
			k, best = i, d
		}
	}
	if k < 0 || (best >= c.threshold && len(c.states) < c.maxStates) {
		k = len(c.states)
		c.states = append(c.states, x)
		c.visits = append(c.visits, 1)
		for i := range c.trans {
			c.trans[i] = append(c.trans[i], 0)
		}
		c.trans = append(c.trans, make([]int64, k+1))
	} else {
		c.visits[k]++
		c.states[k] += (x - c.states[k]) / float64(c.visits[k])
	}
	if c.cur >= 0 {
		c.trans[c.cur][k]++
	}
	c.cur = k
	return k
}

// Curve is a chain's reliability as a function of the time a job needs,
// for one site age: r(d) = Σ_{k: S_k > age+d} S_k·Q_qk / Σ_h S_h·Q_qh. It is
// a snapshot: later Adds do not change it. The zero Curve (no failure ever
// seen) is 1 everywhere.
type Curve struct {
	age    float64   // ns the site has been up
	ttf    []float64 // S_k with non-zero weight, ascending
	suffix []float64 // suffix[i] = Σ_{k >= i} S_k·w_k
	down   bool
	cond   bool // Conditional: given the site's age
}

// Curve builds the reliability curve of a site that has been up for age.
// The weights are row q of the transition counts (q the last failure's
// state), or the visit counts when that row is still empty.
func (c *Chain) Curve(age time.Duration) Curve {
	cv := Curve{age: float64(max(age, 0))}
	if c.cur < 0 {
		return cv
	}
	w := c.trans[c.cur]
	var sum int64
	for _, n := range w {
		sum += n
	}
	if sum == 0 {
		w = c.visits
	}
	type sw struct{ s, w float64 }
	pts := make([]sw, 0, len(c.states))
	for k, s := range c.states {
		if w[k] > 0 {
			pts = append(pts, sw{s, s * float64(w[k])})
		}
	}
	slices.SortStableFunc(pts, func(a, b sw) int {
		switch {
		case a.s < b.s:
			return -1
		case a.s > b.s:
			return 1
		}
		return 0
	})
	cv.ttf = make([]float64, len(pts))
	cv.suffix = make([]float64, len(pts)+1)
	for i := len(pts) - 1; i >= 0; i-- {
		cv.ttf[i] = pts[i].s
		cv.suffix[i] = cv.suffix[i+1] + pts[i].w
	}
	return cv
}

// R is the probability that the site stays up for d more: 1 when no
// failure was ever seen, 0 while the site is down, else equation (12). It
// is non-increasing in d and lies in [0, 1].
func (cv Curve) R(d time.Duration) float64 {
	if cv.down {
		return 0
	}
	if cv.suffix == nil {
		return 1
	}
	total := cv.suffix[0]
	if total <= 0 {
		// Every weighted state is a TTF of 0: the site fails at once.
		return 0
	}
	if cv.cond {
		// Given that the site has been up for age: only the states longer
		// than age are still possible.
		if total = cv.suffix[cv.above(cv.age)]; total <= 0 {
			return 1 // it has outlived every uptime seen: no evidence
		}
	}
	return cv.suffix[cv.above(cv.age+float64(max(d, 0)))] / total
}

// above is the index of the first state longer than t.
func (cv Curve) above(t float64) int {
	i, _ := slices.BinarySearchFunc(cv.ttf, t, func(s, t float64) int {
		if s <= t {
			return -1
		}
		return 1
	})
	return i
}
