package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gridsub/gridsub/bridge/jobfile"
)

// Bandwidth is a transfer rate in bytes per second.
type Bandwidth float64

// SecPerByte is the inverse bandwidth b_ij of SPEC.md §1 (0 for an unset or
// infinite bandwidth).
func (b Bandwidth) SecPerByte() float64 {
	if b <= 0 {
		return 0
	}
	return 1 / float64(b)
}

func (b Bandwidth) String() string {
	switch {
	case b >= 1e9:
		return strconv.FormatFloat(float64(b)/1e9, 'g', -1, 64) + "GB/s"
	case b >= 1e6:
		return strconv.FormatFloat(float64(b)/1e6, 'g', -1, 64) + "MB/s"
	case b >= 1e3:
		return strconv.FormatFloat(float64(b)/1e3, 'g', -1, 64) + "KB/s"
	}
	return strconv.FormatFloat(float64(b), 'g', -1, 64) + "B/s"
}

const bandwidthHint = `a rate like "1MB/s", "100KB/s", "64KiB/s" (bytes per second) or "10Mbps", "1Gbps", "10Kbps" (bits per second)`

// bitUnits are the bits-per-second suffixes, lower-cased.
var bitUnits = map[string]float64{"bps": 1, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9, "tbps": 1e12}

// ParseBandwidth reads a transfer rate: a size per second ("1MB/s",
// "100KB/s", "64KiB/s"; units as in jobfile.ParseSize) or bits per second
// ("10Mbps", "1Gbps", "10Kbps"; powers of 1000). It must be > 0.
func ParseBandwidth(s string) (Bandwidth, error) {
	t := strings.TrimSpace(s)
	lower := strings.ToLower(t)
	var bytesPerSec float64
	switch {
	case strings.HasSuffix(lower, "/s"):
		n, err := jobfile.ParseSize(strings.TrimSpace(t[:len(t)-2]))
		if err != nil {
			return 0, fmt.Errorf("cannot read %q; want %s", s, bandwidthHint)
		}
		bytesPerSec = float64(n)
	default:
		i := strings.IndexFunc(lower, func(r rune) bool { return r >= 'a' && r <= 'z' })
		if i <= 0 {
			return 0, fmt.Errorf("cannot read %q (no unit); want %s", s, bandwidthHint)
		}
		mult, ok := bitUnits[strings.TrimSpace(lower[i:])]
		f, err := strconv.ParseFloat(strings.TrimSpace(lower[:i]), 64)
		if !ok || err != nil || f < 0 {
			return 0, fmt.Errorf("cannot read %q; want %s", s, bandwidthHint)
		}
		bytesPerSec = f * mult / 8
	}
	if !(bytesPerSec > 0) || bytesPerSec > 1e15 {
		return 0, fmt.Errorf("%q: must be > 0 and finite; want %s", s, bandwidthHint)
	}
	return Bandwidth(bytesPerSec), nil
}

// Size is a byte count, given like "10GiB" or "512MB" (units as in
// jobfile.ParseSize) or as a plain number of bytes.
type Size int64

func (s Size) String() string { return strconv.FormatInt(int64(s), 10) + "B" }
