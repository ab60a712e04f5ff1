package transport

import (
	"math"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

func obs(bytes int64, sec float64) backends.Transfer {
	return backends.Transfer{Bytes: bytes, Duration: time.Duration(sec * float64(time.Second))}
}

func near(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

func TestEstimatorRecoversLine(t *testing.T) {
	e := NewEstimator(0)
	if e.SecPerByte() != 0 || e.Latency() != 0 || e.BytesPerSec() != 0 {
		t.Fatal("an empty estimator must estimate 0")
	}
	const lat, spb = 0.05, 1.0 / 100e6 // 50 ms, 100 MB/s
	for _, n := range []int64{1 << 10, 1 << 20, 10 << 20, 100 << 20, 5 << 20, 200 << 20} {
		e.Observe(obs(n, lat+spb*float64(n)))
	}
	if !near(e.SecPerByte(), spb, 1e-6) || !near(e.Latency().Seconds(), lat, 1e-6) {
		t.Errorf("got %g s/B, %v; want %g, %v", e.SecPerByte(), e.Latency(), spb, time.Duration(lat*1e9))
	}
	if got := e.Estimate(50 << 20).Seconds(); !near(got, lat+spb*(50<<20), 1e-6) {
		t.Errorf("Estimate(50MiB) = %g s", got)
	}
	if e.Count() != 6 {
		t.Errorf("count %d", e.Count())
	}
}

func TestEstimatorEqualSizesFallsBackThroughOrigin(t *testing.T) {
	e := NewEstimator(0)
	for range 5 {
		e.Observe(obs(1e6, 0.02))
	}
	if e.Latency() != 0 || !near(e.SecPerByte(), 0.02/1e6, 1e-9) {
		t.Errorf("got latency %v, %g s/B; want 0 and 2e-8", e.Latency(), e.SecPerByte())
	}
	z := NewEstimator(0)
	z.Observe(obs(0, 0.01))
	if z.SecPerByte() != 0 || !near(z.Latency().Seconds(), 0.01, 1e-6) {
		t.Errorf("empty transfers: %g s/B, %v", z.SecPerByte(), z.Latency())
	}
}

func TestEstimatorFollowsChange(t *testing.T) {
	e := NewEstimator(4)
	sizes := []int64{1 << 20, 8 << 20, 64 << 20}
	for i := range 30 {
		n := sizes[i%3]
		e.Observe(obs(n, 0.01+float64(n)/100e6)) // 100 MB/s
	}
	for i := range 30 {
		n := sizes[i%3]
		e.Observe(obs(n, 0.01+float64(n)/10e6)) // the link drops to 10 MB/s
	}
	if !near(e.BytesPerSec(), 10e6, 0.01) {
		t.Errorf("after the drop: %.3g B/s, want 1e7", e.BytesPerSec())
	}
}

func TestEstimatorIgnoresNegative(t *testing.T) {
	e := NewEstimator(0)
	e.Observe(obs(-1, 1))
	e.Observe(obs(1, -1))
	if e.Count() != 0 {
		t.Errorf("count %d after invalid observations", e.Count())
	}
}
