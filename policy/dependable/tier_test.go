package dependable

import (
	"errors"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestTierTable(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ct := 10 * time.Minute
	cases := []struct {
		name     string
		deadline time.Time
		lambda   float64
		want     QoS
		reason   string
	}{
		{"no deadline", time.Time{}, 1.5, None, "no deadline"},
		{"exactly at the limit is high", t0.Add(25 * time.Minute), 1.5, High, "tight deadline"},
		{"a nanosecond looser is low", t0.Add(25*time.Minute + 1), 1.5, Low, "loose deadline"},
		{"tighter than CT_min is high", t0.Add(5 * time.Minute), 1.5, High, "= 25m0s"},
		{"far deadline is low", t0.Add(24 * time.Hour), 1.5, Low, "(1+1.5)·CT_min"},
		{"λ 0: the limit is CT_min", t0.Add(10*time.Minute + 1), 0, Low, "(1+0)"},
		{"bad λ falls back to 1.5", t0.Add(20 * time.Minute), -1, High, "default 1.5 applies"},
	}
	for _, c := range cases {
		q, why := Tier(t0, c.deadline, ct, c.lambda)
		if q != c.want || !strings.Contains(why, c.reason) {
			t.Errorf("%s: Tier = %s, %q; want %s with %q", c.name, q, why, c.want, c.reason)
		}
	}
}

func TestParseQoS(t *testing.T) {
	for in, want := range map[string]QoS{"": Auto, "auto": Auto, " High ": High, "low": Low, "NONE": None} {
		if q, err := ParseQoS(in); err != nil || q != want {
			t.Errorf("ParseQoS(%q) = %s, %v; want %s", in, q, err, want)
		}
	}
	if _, err := ParseQoS("urgent"); !errors.Is(err, ErrBadQoS) || !strings.Contains(err.Error(), "auto, high, low or none") {
		t.Errorf("ParseQoS(urgent) = %v", err)
	}
	if High.Rank() >= Low.Rank() || Low.Rank() >= None.Rank() {
		t.Error("ranks must order high < low < none")
	}
}

// TestPropertyTier: the tier is a function of the deadline's slack alone,
// a later deadline never gives a tighter tier, and the rule holds exactly.
func TestPropertyTier(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rapid.Check(t, func(t *rapid.T) {
		ct := time.Duration(rapid.Int64Range(0, int64(48*time.Hour)).Draw(t, "ct"))
		lambda := rapid.Float64Range(0, 5).Draw(t, "lambda")
		s1 := time.Duration(rapid.Int64Range(-int64(time.Hour), int64(200*time.Hour)).Draw(t, "slack1"))
		s2 := s1 + time.Duration(rapid.Int64Range(0, int64(100*time.Hour)).Draw(t, "more"))
		q1, _ := Tier(t0, t0.Add(s1), ct, lambda)
		q2, _ := Tier(t0, t0.Add(s2), ct, lambda)
		if q2.Rank() < q1.Rank() {
			t.Fatalf("later deadline gave a tighter tier: %s then %s", q1, q2)
		}
		limit := time.Duration((1 + lambda) * float64(ct))
		if want := s1 <= limit; (q1 == High) != want {
			t.Fatalf("slack %v limit %v: tier %s", s1, limit, q1)
		}
		// Shifting arrival and deadline together changes nothing.
		sh := time.Duration(rapid.Int64Range(0, int64(1000*time.Hour)).Draw(t, "shift"))
		if q3, r3 := Tier(t0.Add(sh), t0.Add(sh+s1), ct, lambda); q3 != q1 {
			t.Fatalf("shifted: %s (%s), want %s", q3, r3, q1)
		}
	})
}
