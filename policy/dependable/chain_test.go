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
