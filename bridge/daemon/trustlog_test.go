package daemon

import "testing"

// The daemon's INFO log carries "trust recomputed" only when a score moved
// by a hundredth or a site came or went, not at every run of the task.
func TestTrustMoved(t *testing.T) {
	a := map[string]float64{"A": 0.5, "B": 0.9}
	for _, tc := range []struct {
		last, now map[string]float64
		want      bool
	}{
		{nil, a, true},
		{a, map[string]float64{"A": 0.5, "B": 0.9}, false},
		{a, map[string]float64{"A": 0.505, "B": 0.9}, false},
		{a, map[string]float64{"A": 0.52, "B": 0.9}, true},
		{a, map[string]float64{"A": 0.5}, true},
		{a, map[string]float64{"A": 0.5, "C": 0.9}, true},
	} {
		if got := trustMoved(tc.last, tc.now); got != tc.want {
			t.Errorf("trustMoved(%v, %v) = %v, want %v", tc.last, tc.now, got, tc.want)
		}
	}
}
