package backendtest_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends/backendtest"
	"github.com/gridsub/gridsub/simbackend"
)

// TestSimulatedSite runs the suite against a simulated site on virtual
// time: Wait advances the engine's clock, so the timeout case costs no
// real minute.
func TestSimulatedSite(t *testing.T) {
	e := simbackend.NewEngine(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 7)
	site, err := simbackend.NewSite(e, simbackend.SiteConfig{Name: "simA", Nodes: 8, CoresPerNode: 2, H: 1})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	backendtest.Run(t, backendtest.Harness{
		Backend:      site,
		GridID:       func() string { return fmt.Sprintf("sim-%d", n.Add(1)) },
		Wait:         func(_ context.Context, d time.Duration) { e.RunUntil(e.Now().Add(d)) },
		Now:          e.Now,
		Poll:         500 * time.Millisecond,
		Walltime:     true,
		TimeoutWall:  time.Minute,
		Reservations: true,
		UnknownID:    "424242",
	})
}
