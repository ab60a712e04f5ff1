package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
)

// measured is a backend that has measured its link (others are not called).
type measured struct {
	backends.Backend
	spb float64
	ok  bool
}

func (m measured) LinkEstimate() (float64, time.Duration, bool) {
	return m.spb, 40 * time.Millisecond, m.ok
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var d dto.Metric
	if err := g.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetGauge().GetValue()
}

func TestLinkMetrics(t *testing.T) {
	m := newMetrics(func(context.Context, ...bridge.JobState) (int, error) { return 0, nil })
	m.link("A", measured{spb: 1e-8, ok: true}) // 100 MB/s
	m.link("B", measured{ok: false})           // nothing measured yet
	if got := gaugeValue(t, m.siteRate.WithLabelValues("A")); got != 1e8 {
		t.Fatalf("rate of A = %g, want 1e8", got)
	}
	if got := gaugeValue(t, m.siteLatency.WithLabelValues("A")); got != 0.04 {
		t.Fatalf("latency of A = %g, want 0.04", got)
	}
	ch := make(chan prometheus.Metric, 8)
	m.siteRate.Collect(ch)
	close(ch)
	if n := len(ch); n != 1 {
		t.Fatalf("%d rate series, want only A's", n)
	}
}
