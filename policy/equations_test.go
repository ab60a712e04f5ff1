package policy

import (
	"testing"
	"time"
)

// TestPaper000Equations checks Runtime + Transfer against paper 000's
// equations (1)-(3), worked by hand on the paper's testbed with the large h
// set (Beijing 1.4, Shanghai 1.0, Harbin 0.6), 100 KB/s and 575 ms between
// sites, p = 1.3: a job with T_origin = 1000 s and 50 MB submitted at
// Beijing. T_i = h_i·T_origin = 1400 s; t_trans = 50e6 B / 1e5 B/s + 0.575 s.
// Equation (3) scales T_i by p·max(h)/h_i: the slowest site sets the pace.
func TestPaper000Equations(t *testing.T) {
	link := Link{SecPerByte: 1 / 100e3, Latency: 575 * time.Millisecond}
	mesh := [][]Link{{{}, link, link}, {link, {}, link}, {link, link, {}}}
	s := &Snapshot{
		Sites:     []Site{{Name: "Beijing", H: 1.4}, {Name: "Shanghai", H: 1.0}, {Name: "Harbin", H: 0.6}},
		Links:     mesh,
		MultiSite: 1.3,
	}
	j := &Job{ID: "j", Width: 32, Estimate: 1000 * time.Second, Origin: 0, DataSize: 50e6}
	trans := 500*time.Second + 575*time.Millisecond
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	for _, tc := range []struct {
		name       string
		parts      []Part
		run, xfer  time.Duration
		totalHuman string
	}{
		{"(1) local Beijing: h_i·T_origin", []Part{{0, 32}}, sec(1400), 0, "1400 s"},
		{"(2) remote Harbin: T_i·h_j/h_i + t_trans", []Part{{2, 32}}, sec(1400 * 0.6 / 1.4), trans, "600 s + 500.575 s"},
		{"(3) Beijing+Harbin: T_i·p·max(h)/h_i + max t_trans", []Part{{0, 16}, {2, 16}}, sec(1400 * 1.3 * 1.4 / 1.4), trans, "1820 s + 500.575 s"},
		{"(3) Shanghai+Harbin", []Part{{1, 16}, {2, 16}}, sec(1400 * 1.3 * 1.0 / 1.4), trans, "1300 s + 500.575 s"},
	} {
		run, xfer := s.Runtime(j, tc.parts), s.Transfer(j, tc.parts)
		if d := run - tc.run; d < -time.Microsecond || d > time.Microsecond || xfer != tc.xfer {
			t.Errorf("%s: run %s + transfer %s, want %s", tc.name, run, xfer, tc.totalHuman)
		}
	}
	// p applies to multi-site runs only, whatever its value.
	s.MultiSite = 1.6
	if run := s.Runtime(j, []Part{{2, 32}}); run != sec(600) {
		t.Errorf("single site with p = 1.6: %s, want 600 s", run)
	}
}
