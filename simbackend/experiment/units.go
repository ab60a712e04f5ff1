package experiment

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// bandwidthUnits maps a unit to bytes per second. Upper-case B is bytes,
// lower-case b bits; K, M and G are decimal (the paper's "KBps").
var bandwidthUnits = []struct {
	unit string
	mult float64
}{
	{"GB/s", 1e9}, {"MB/s", 1e6}, {"KB/s", 1e3}, {"kB/s", 1e3}, {"B/s", 1},
	{"GBps", 1e9}, {"MBps", 1e6}, {"KBps", 1e3}, {"kBps", 1e3},
	{"Gbps", 1e9 / 8}, {"Mbps", 1e6 / 8}, {"Kbps", 1e3 / 8}, {"kbps", 1e3 / 8}, {"bps", 1.0 / 8},
}

const bandwidthHint = `a rate like "1MB/s", "100KB/s", "50KBps" (bytes) or "10Mbps", "10Kbps" (bits)`

// ParseBandwidth reads a bandwidth and returns it in bytes per second.
func ParseBandwidth(s string) (float64, error) {
	t := strings.TrimSpace(s)
	for _, u := range bandwidthUnits {
		if num, ok := strings.CutSuffix(t, u.unit); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || !(v > 0) || v > 1e15 {
				return 0, fmt.Errorf("bandwidth %q: want a positive number before %s", s, u.unit)
			}
			if b := v * u.mult; !(b >= minBandwidth && b <= 1e15) {
				return 0, fmt.Errorf("bandwidth %q: want from 1KB/s (8Kbps) to 1000TB/s", s)
			}
			return v * u.mult, nil
		}
	}
	return 0, fmt.Errorf("bandwidth %q has no known unit; want %s", s, bandwidthHint)
}

// ParseLatency reads a non-negative Go duration such as "575ms".
func ParseLatency(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < 0 || d > time.Hour {
		return 0, fmt.Errorf("latency %q: want a duration between 0 and 1h such as \"575ms\"", s)
	}
	return d, nil
}
