package jobfile

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	ok := map[string]time.Duration{
		"90s": 90 * time.Second, "20m": 20 * time.Minute, "1h30m": 90 * time.Minute, "1.5h": 90 * time.Minute,
		"2d": 48 * time.Hour, "1d12h": 36 * time.Hour, "01:30:00": 90 * time.Minute, "1-12:00:00": 36 * time.Hour,
		"0-00:00:05": 5 * time.Second, "100:00:00": 100 * time.Hour, "-5m": -5 * time.Minute, "+5m": 5 * time.Minute,
	}
	for in, want := range ok {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "90", "1.5", "2 hours", "1:30", "1:60:00", "x-01:00:00", "1-1:2", "d", "2dd", "1e3h", "99999999999h", "100001d", "::", "1-01:00:00:00"} {
		if got, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, got)
		}
	}
}

func TestParseSize(t *testing.T) {
	ok := map[string]int64{
		"0": 0, "512": 512, "800B": 800, "1KB": 1000, "50MB": 50e6, "1.5GB": 1.5e9, "2TB": 2e12,
		"1KiB": 1024, "64MiB": 64 << 20, "1GiB": 1 << 30, "1 mb": 1e6, "1_000": 1000,
	}
	for in, want := range ok {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MB", "-1MB", "1XB", "1.2.3", "50 megabytes", "1e30TB", "--1"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %v, want an error", in, got)
		}
	}
}

func TestParseTime(t *testing.T) {
	ts, err := ParseTime("2026-12-01T12:00:00Z")
	if err != nil || ts.Relative || !ts.Abs.Equal(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("absolute: %+v, %v", ts, err)
	}
	ts, err = ParseTime("+4h")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err != nil || !ts.Relative || !ts.At(now).Equal(now.Add(4*time.Hour)) || ts.String() != "+4h0m0s" {
		t.Errorf("relative: %+v, %v", ts, err)
	}
	for _, in := range []string{"tomorrow", "+-1h", "++1h", "2026-12-01", "2026-12-01 12:00:00", "+"} {
		if _, err := ParseTime(in); err == nil {
			t.Errorf("ParseTime(%q) accepted", in)
		}
	}
	if !(TimeSpec{}).IsZero() || (TimeSpec{}).String() != "" || !(TimeSpec{}).At(now).IsZero() {
		t.Error("zero TimeSpec misbehaves")
	}
}

func TestBenefitValue(t *testing.T) {
	b := Benefit{A: 100, B: 0.5, C: 2}
	d := time.Hour
	for _, tc := range []struct {
		elapsed time.Duration
		want    float64
	}{{0, 100}, {29 * time.Minute, 100}, {30 * time.Minute, 100}, {30*time.Minute + 10*time.Second, 80}, {time.Hour, 100 - 2*1800}} {
		if got := b.Value(tc.elapsed, d); got != tc.want {
			t.Errorf("Value(%v) = %v, want %v", tc.elapsed, got, tc.want)
		}
	}
}
