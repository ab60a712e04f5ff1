package dependable

import (
	"math"
	"testing"
	"time"
)

// TestChainMergeAndReliability works a small chain by hand.
func TestChainMergeAndReliability(t *testing.T) {
	c := NewChain(10*time.Minute, 8)
	// TTFs (min): 60, 65 (merges: mean 62.5), 200, 61 (merges: mean 62),
	// 400, 198 (merges into 200: 199).
	for _, m := range []int{60, 65, 200, 61, 400, 198} {
		c.Add(time.Duration(m) * time.Minute)
	}
	if c.Len() != 3 || c.Failures() != 6 {
		t.Fatalf("states %d failures %d, want 3 and 6", c.Len(), c.Failures())
	}
	for k, want := range []float64{62, 199, 400} {
		s, _ := c.State(k)
		if math.Abs(s.Minutes()-want) > 1e-9 {
			t.Errorf("S_%d = %v min, want %v", k, s.Minutes(), want)
		}
	}
	// Sequence of states: 0 0 1 0 2 1 -> transitions 0→0, 0→1, 1→0, 0→2, 2→1.
	want := [3][3]int64{{1, 1, 1}, {1, 0, 0}, {0, 1, 0}}
	for q := range 3 {
		for k := range 3 {
			if got := c.Transitions(q, k); got != want[q][k] {
				t.Errorf("n_%d%d = %d, want %d", q, k, got, want[q][k])
			}
		}
	}
	if c.Current() != 1 {
		t.Fatalf("current %d, want 1", c.Current())
	}
	// From state 1 the only successor seen is state 0 (S=62 min): a job
	// that must stay up past 62 min has r = 0, one that ends before, r = 1.
	cv := c.Curve(30 * time.Minute)
	if r := cv.R(31 * time.Minute); r != 1 {
		t.Errorf("r(age 30 + 31 < 62) = %v, want 1", r)
	}
	if r := cv.R(33 * time.Minute); r != 0 {
		t.Errorf("r(age 30 + 33 > 62) = %v, want 0", r)
	}
	// Add one more failure in state 0 (62): from 0 the row is {1,1,1}
	// → r(need) = Σ_{S_k > need} S_k / (62+199+400).
	c.Add(62 * time.Minute)
	cv = c.Curve(0)
	total := 62.0 + 199 + 400
	for _, tc := range []struct {
		need float64
		want float64
	}{{10, 1}, {100, (199 + 400) / total}, {300, 400 / total}, {500, 0}} {
		if r := cv.R(time.Duration(tc.need * float64(time.Minute))); math.Abs(r-tc.want) > 1e-12 {
			t.Errorf("r(%v min) = %v, want %v", tc.need, r, tc.want)
		}
	}
}

// TestChainEmptyRowUsesVisits: after a failure in a fresh state the row is
// empty and the visit counts stand in.
func TestChainEmptyRowUsesVisits(t *testing.T) {
	c := NewChain(time.Minute, 8)
	c.Add(100 * time.Minute)
	cv := c.Curve(0)
	if r := cv.R(99 * time.Minute); r != 1 {
		t.Errorf("one TTF of 100 min, need 99: r = %v, want 1", r)
	}
	if r := cv.R(101 * time.Minute); r != 0 {
		t.Errorf("one TTF of 100 min, need 101: r = %v, want 0", r)
	}
	if r := (Curve{}).R(time.Hour); r != 1 {
		t.Errorf("no history: r = %v, want 1", r)
	}
}

func TestChainBounded(t *testing.T) {
	c := NewChain(time.Second, 4)
	for i := range 100 {
		c.Add(time.Duration(i) * time.Hour)
	}
	if c.Len() != 4 || c.Failures() != 100 {
		t.Fatalf("len %d failures %d, want 4 and 100", c.Len(), c.Failures())
	}
}

// TestConditionalReading compares the two readings of equation (12) on a
// chain whose every transition leads to states of 60, 120 and 240 min.
func TestConditionalReading(t *testing.T) {
	at := func(m int) time.Time { return epoch.Add(time.Duration(m) * time.Minute) }
	for _, cond := range []bool{false, true} {
		p, _ := NewPredictor(Config{Threshold: time.Minute, Conditional: cond})
		p.Observe("A", Up, at(0))
		now := 0
		for _, ttf := range []int{60, 120, 240, 60, 120, 240, 60} {
			now += ttf
			p.Observe("A", Fail, at(now))
		}
		// Last failure in state 60; its row: 60→120 twice → only 120.
		// Use the visit-free case: from 60 the successors seen are 120 (2).
		// Up for 100 min: a 10-min job needs 110 < 120.
		lit := map[bool][]float64{false: {1, 0, 0}, true: {1, 0, 1}}[cond]
		for i, c := range []struct{ age, d int }{{100, 10}, {100, 30}, {500, 10}} {
			if r := p.Reliability("A", at(now+c.age), time.Duration(c.d)*time.Minute); r != lit[i] {
				t.Errorf("conditional=%v age %d d %d: r = %v, want %v", cond, c.age, c.d, r, lit[i])
			}
		}
	}
	// With several successors the conditional reading renormalises: states
	// 60, 120, 240 all reachable (visit counts stand in for an empty row).
	c := NewChain(time.Minute, 8)
	for _, m := range []int{60, 120, 240} {
		c.Add(time.Duration(m) * time.Minute)
	}
	cv := c.Curve(90 * time.Minute) // row of 240 is empty: visits 1,1,1
	cv.cond = true
	// Given age 90, only 120 and 240 remain (weights 120, 240); needing
	// 90+60 = 150 leaves 240: r = 240/360.
	if r := cv.R(60 * time.Minute); math.Abs(r-240.0/360) > 1e-12 {
		t.Errorf("conditional r = %v, want 2/3", r)
	}
	cv.cond = false
	if r := cv.R(60 * time.Minute); math.Abs(r-240.0/420) > 1e-12 {
		t.Errorf("literal r = %v, want 240/420", r)
	}
}
