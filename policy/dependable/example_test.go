package dependable_test

import (
	"fmt"
	"time"

	"github.com/gridsub/gridsub/policy/dependable"
)

func ExampleTier() {
	arrival := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	q, why := dependable.Tier(arrival, arrival.Add(20*time.Minute), 10*time.Minute, dependable.DefaultLambda)
	fmt.Println(q)
	fmt.Println(why)
	q, _ = dependable.Tier(arrival, arrival.Add(2*time.Hour), 10*time.Minute, dependable.DefaultLambda)
	fmt.Println(q)
	// Output:
	// high
	// deadline 20m0s after arrival ≤ (1+1.5)·CT_min = 2.5×10m0s = 25m0s: a tight deadline, tier high (replication)
	// low
}

func ExamplePredictor() {
	p, _ := dependable.NewPredictor(dependable.Config{Threshold: 5 * time.Minute})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p.Observe("siteA", dependable.Up, t0)
	// siteA fails after 2 h, 2 h and 4 h of uptime.
	p.Observe("siteA", dependable.Fail, t0.Add(2*time.Hour))
	p.Observe("siteA", dependable.Fail, t0.Add(4*time.Hour))
	p.Observe("siteA", dependable.Fail, t0.Add(8*time.Hour))
	now := t0.Add(8*time.Hour + 30*time.Minute) // up for 30 min
	// States: 2 h (seen twice) and 4 h (once, the last); 4 h has no
	// successor yet, so the visit counts weigh the states: 2h·2 and 4h·1.
	// A 1-hour job needs 1h30m of uptime: both states allow it (r = 1); a
	// 3-hour job needs 3h30m: only the 4-hour state, r = 4/(4+4) = 0.5.
	for _, d := range []time.Duration{time.Hour, 3 * time.Hour} {
		fmt.Printf("r(%v) = %.3f, RC = %v\n", d, p.Reliability("siteA", now, d), p.RC("siteA", now, d))
	}
	fmt.Printf("never seen failing: r = %.0f\n", p.Reliability("siteB", now, time.Hour))
	// Output:
	// r(1h0m0s) = 1.000, RC = 0s
	// r(3h0m0s) = 0.500, RC = 1h30m0s
	// never seen failing: r = 1
}
