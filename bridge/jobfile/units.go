package jobfile

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// durationHint is what ParseDuration accepts, for error messages.
const durationHint = `a duration like "90s", "20m", "1h30m", "2d", "01:30:00" (HH:MM:SS) or "1-12:00:00" (D-HH:MM:SS)`

// ParseDuration reads a duration in any of the forms a job file accepts:
//
//   - a Go duration: "90s", "20m", "1h30m", "1.5h"
//   - with a leading whole number of days: "2d", "1d12h"
//   - HH:MM:SS or D-HH:MM:SS as SLURM writes them: "01:30:00", "1-12:00:00"
//
// A bare number is refused: batch systems disagree on whether it means
// seconds or minutes. The result may be zero or negative ("-5m"); callers
// check the range they need.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration; want %s", durationHint)
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return 0, fmt.Errorf("%q has no unit; want %s", s, durationHint)
	}
	if strings.Contains(s, ":") {
		return parseClock(s)
	}
	neg := false
	rest := s
	if strings.HasPrefix(rest, "-") {
		neg, rest = true, rest[1:]
	} else if strings.HasPrefix(rest, "+") {
		rest = rest[1:]
	}
	var days int64
	if i := strings.IndexByte(rest, 'd'); i >= 0 {
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil || n < 0 || n > 100000 {
			return 0, fmt.Errorf("cannot read %q; want %s", s, durationHint)
		}
		days, rest = n, rest[i+1:]
	}
	var d time.Duration
	if rest != "" {
		var err error
		if d, err = time.ParseDuration(rest); err != nil || d < 0 {
			return 0, fmt.Errorf("cannot read %q; want %s", s, durationHint)
		}
	}
	total := time.Duration(days)*24*time.Hour + d
	if total < d { // overflow
		return 0, fmt.Errorf("%q is too long", s)
	}
	if neg {
		total = -total
	}
	return total, nil
}

// parseClock reads HH:MM:SS or D-HH:MM:SS.
func parseClock(s string) (time.Duration, error) {
	bad := fmt.Errorf("cannot read %q; want %s", s, durationHint)
	var days int64
	rest := s
	if i := strings.IndexByte(rest, '-'); i >= 0 {
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil || n < 0 || n > 100000 {
			return 0, bad
		}
		days, rest = n, rest[i+1:]
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 3 {
		return 0, bad
	}
	var v [3]int64
	for i, p := range parts {
		if p == "" || len(p) > 6 {
			return 0, bad
		}
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return 0, bad
		}
		v[i] = n
	}
	if v[1] > 59 || v[2] > 59 {
		return 0, fmt.Errorf("%q: minutes and seconds must be 0..59; want %s", s, durationHint)
	}
	secs := days*86400 + v[0]*3600 + v[1]*60 + v[2]
	if secs > math.MaxInt64/int64(time.Second) {
		return 0, fmt.Errorf("%q is too long", s)
	}
	return time.Duration(secs) * time.Second, nil
}

// sizeUnits maps a lower-case unit to its number of bytes. KB, MB, GB, TB are
// decimal (SI), KiB, MiB, GiB, TiB binary.
var sizeUnits = map[string]float64{
	"":    1,
	"b":   1,
	"kb":  1e3,
	"mb":  1e6,
	"gb":  1e9,
	"tb":  1e12,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"tib": 1 << 40,
}

// sizeHint is what ParseSize accepts, for error messages.
const sizeHint = `a size like "512", "800B", "50MB", "1.5GB" or "64MiB" (units B, KB, MB, GB, TB = powers of 1000; KiB, MiB, GiB, TiB = powers of 1024)`

// ParseSize reads a byte count: a non-negative number with an optional unit
// (B, KB, MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB powers of 1024;
// units are case-insensitive; no unit means bytes). Fractions are rounded to
// the nearest byte.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.' || t[i] == '-' || t[i] == '+' || t[i] == '_') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("cannot read %q; want %s", s, sizeHint)
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(num, "_", ""), 64)
	if err != nil {
		return 0, fmt.Errorf("cannot read %q; want %s", s, sizeHint)
	}
	if f < 0 {
		return 0, fmt.Errorf("%q is negative; want %s", s, sizeHint)
	}
	b := math.Round(f * mult)
	if b >= math.MaxInt64 || math.IsNaN(b) {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(b), nil
}

// TimeSpec is a point in time as a job file gives it: absolute (RFC 3339) or
// relative to the submission ("+4h"). The zero value means "not given".
// The parser never reads the clock; At resolves a relative time against the
// submission time the caller passes.
type TimeSpec struct {
	Abs time.Time     // set when the file gives an absolute time
	Rel time.Duration // offset from submission when Relative is true
	// Relative is true for "+<duration>" forms.
	Relative bool
}

// IsZero reports whether no time was given.
func (t TimeSpec) IsZero() bool { return !t.Relative && t.Abs.IsZero() }

// At is the absolute time, given the submission time. It returns the zero
// time for a zero TimeSpec.
func (t TimeSpec) At(submit time.Time) time.Time {
	if t.Relative {
		return submit.Add(t.Rel)
	}
	return t.Abs
}

func (t TimeSpec) String() string {
	switch {
	case t.Relative:
		return "+" + t.Rel.String()
	case t.Abs.IsZero():
		return ""
	default:
		return t.Abs.Format(time.RFC3339)
	}
}

// timeHint is what ParseTime accepts, for error messages.
const timeHint = `an RFC 3339 time like "2026-12-01T12:00:00Z" or "2026-12-01T20:00:00+08:00", or a time relative to submission like "+4h", "+90m", "+1d"`

// ParseTime reads an absolute RFC 3339 time or a relative "+<duration>"
// (see ParseDuration for the duration forms). A relative offset must not be
// negative.
func ParseTime(s string) (TimeSpec, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "+") {
		d, err := ParseDuration(s[1:])
		if err != nil || d < 0 || strings.HasPrefix(s[1:], "-") || strings.HasPrefix(s[1:], "+") {
			return TimeSpec{}, fmt.Errorf("cannot read %q; want %s", s, timeHint)
		}
		return TimeSpec{Rel: d, Relative: true}, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return TimeSpec{}, fmt.Errorf("cannot read %q; want %s", s, timeHint)
	}
	return TimeSpec{Abs: t}, nil
}
