package trustsim

import (
	"context"
	"testing"
	"time"
)

func seq(t testing.TB, c Config) []RunResult {
	t.Helper()
	rs, err := Sequence(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func migRate(rs []RunResult, tasks int) float64 {
	s := 0
	for _, r := range rs {
		s += r.Migrations
	}
	return float64(s) / float64(len(rs)*tasks)
}

func TestQuickLook(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		for _, mig := range Migrations() {
			c := Default()
			c.Seed, c.Migration = seed, mig
			t0 := time.Now()
			tm := seq(t, c)
			c.Policy = MinMin
			mm := seq(t, c)
			t.Logf("seed %2d %-10s TMM mig %.3f→%.3f  MM %.3f→%.3f  span TMM %.0f MM %.0f  %v", seed, mig,
				migRate(tm[:10], 100), migRate(tm[90:], 100), migRate(mm[:10], 100), migRate(mm[90:], 100),
				tm[50].Makespan, mm[50].Makespan, time.Since(t0))
		}
	}
}
