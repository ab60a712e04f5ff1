package dependable

import (
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// The tier rule reads Site.H as the run-time multiplier it is: CT_min is
// the estimate on the fastest allowed site, the same number Tier is given
// by paper 004's simulator.
func TestTieringCTMinIsTheFastestAllowedSite(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sites := []policy.Site{{Name: "slow", H: 2}, {Name: "fast", H: 0.5}, {Name: "mid", H: 1}}
	cases := []struct {
		allowed  []string
		deadline time.Duration
		want     policy.Tier
	}{
		{nil, 12*time.Minute + 30*time.Second, policy.TierHigh}, // (1+1.5)·(10m·0.5)
		{nil, 12*time.Minute + 31*time.Second, policy.TierLow},
		{[]string{"slow", "mid"}, 25 * time.Minute, policy.TierHigh}, // (1+1.5)·(10m·1)
		{[]string{"slow", "mid"}, 26 * time.Minute, policy.TierLow},
		{[]string{"elsewhere"}, 25 * time.Minute, policy.TierHigh}, // no allowed site known: h = 1
	}
	for _, c := range cases {
		d := &policy.TierDemand{Deadline: t0.Add(c.deadline), Estimate: 10 * time.Minute, Sites: c.allowed, Submit: t0, Lambda: 1.5}
		got, why := Tiering{}.Tier(d, sites)
		if got != c.want {
			t.Errorf("sites %v deadline %v: tier %s (%s), want %s", c.allowed, c.deadline, got, why, c.want)
		}
		ctMin := time.Duration(float64(d.Estimate) * map[bool]float64{true: 0.5, false: 1}[c.allowed == nil])
		if q, _ := Tier(d.Submit, d.Deadline, ctMin, d.Lambda); string(q) != string(got) {
			t.Errorf("sites %v deadline %v: Tiering says %s, Tier %s", c.allowed, c.deadline, got, q)
		}
	}
}
