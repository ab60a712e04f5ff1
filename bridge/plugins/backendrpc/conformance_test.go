package backendrpc_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/backendtest"
	"github.com/gridsub/gridsub/bridge/plugins"
)

// TestConformanceSimThroughShim runs the backend conformance suite against
// the built-in sim backend served through the gRPC shims (in process, real
// gRPC): every call, every error and every status crosses the boundary,
// and the suite's Wait drives the plugin's own virtual clock (Clock RPC).
func TestConformanceSimThroughShim(t *testing.T) {
	f, err := plugins.BuiltinBackend("sim")
	if err != nil {
		t.Fatal(err)
	}
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c, _ := plugins.TestBackend(t, f, plugins.BackendConfig{Name: "simA", Kind: "sim", Nodes: 8, CoresPerNode: 2, H: 1,
		Sim: &plugins.SimConfig{Epoch: epoch, Seed: 7}})
	caps := backends.CapabilitiesOf(c)
	if want := (backends.Capabilities{Find: true, Fetch: true, Reserve: true, Push: true}); caps != want {
		t.Fatalf("capabilities through the shim %+v, want %+v", caps, want)
	}
	ctx := context.Background()
	var n atomic.Int64
	backendtest.Run(t, backendtest.Harness{
		Backend: c,
		GridID:  func() string { return fmt.Sprintf("sim-%d", n.Add(1)) },
		Wait: func(ctx context.Context, d time.Duration) {
			now, err := c.AdvanceTo(ctx, time.Time{})
			if err != nil {
				t.Fatalf("clock: %v", err)
			}
			if _, err := c.AdvanceTo(ctx, now.Add(d)); err != nil {
				t.Fatalf("clock: %v", err)
			}
		},
		Now: func() time.Time {
			now, err := c.AdvanceTo(ctx, time.Time{})
			if err != nil {
				t.Fatalf("clock: %v", err)
			}
			return now
		},
		Poll:         500 * time.Millisecond,
		Walltime:     true,
		TimeoutWall:  time.Minute,
		Reservations: true,
		UnknownID:    "424242",
	})
}
