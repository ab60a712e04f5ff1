package policy

import (
	"testing"
	"time"
)

func TestTransferTime(t *testing.T) {
	s := &Snapshot{
		Sites:   []Site{{Name: "A", H: 1}, {Name: "B", H: 1}},
		Links:   [][]Link{{{}, {SecPerByte: 1e-6, Latency: 500 * time.Millisecond}}, {{SecPerByte: 2e-6}, {}}},
		Uplinks: []Link{{SecPerByte: 1e-7, Latency: 20 * time.Millisecond}, {}},
	}
	for _, tc := range []struct {
		from, to int
		size     int64
		want     time.Duration
	}{
		{0, 1, 50e6, 50*time.Second + 500*time.Millisecond}, // s·b + l (SPEC §1)
		{1, 0, 1e6, 2 * time.Second},
		{0, 0, 50e6, 0},                                    // same site: free
		{-1, 0, 50e6, 5*time.Second + 20*time.Millisecond}, // from this machine: the measured uplink
		{-1, 1, 50e6, 0},                                   // not measured yet
	} {
		if got := s.TransferTime(tc.from, tc.to, tc.size); got != tc.want {
			t.Errorf("TransferTime(%d, %d, %d) = %s, want %s", tc.from, tc.to, tc.size, got, tc.want)
		}
	}
	s.Uplinks = nil
	if got := s.TransferTime(-1, 0, 50e6); got != 0 {
		t.Errorf("no uplinks: %s, want 0", got)
	}
}
