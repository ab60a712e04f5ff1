package plugins_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/plugins"
)

// BenchmarkBackendCall measures one backend call (Status of 10 jobs on a
// simulated site, and Info) in process, through the gRPC shims in process
// (TestPluginGRPCConn) and through a real plugin process (isolated
// `gridsub plugin serve backend sim`, AutoMTLS over go-plugin's unix
// socket), side by side in one run. It reports the median and p99 of the
// per-call latency.
//
//	go test -run '^$' -bench BackendCall -benchtime 2000x ./bridge/plugins/
func BenchmarkBackendCall(b *testing.B) {
	f, err := plugins.BuiltinBackend("sim")
	if err != nil {
		b.Fatal(err)
	}
	cfg := plugins.BackendConfig{Name: "bench", Kind: "sim", Nodes: 64, CoresPerNode: 1}
	ctx := context.Background()
	raw := []byte(`{"name":"bench","kind":"sim","nodes":64,"cores_per_node":1}`)
	inproc, err := f(ctx, raw)
	if err != nil {
		b.Fatal(err)
	}
	shim, _ := plugins.TestBackend(b, f, cfg)
	spec := simSpec(b, "bench")
	spec.Config = cfg
	inst, err := plugins.LoadBackend(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(inst.Kill)
	for _, c := range []struct {
		name string
		be   backends.Backend
	}{{"in-process", inproc}, {"grpc-in-process", shim}, {"plugin-process", inst.Backend}} {
		var ids []backends.JobID
		for i := range 10 {
			id, err := c.be.Submit(ctx, &backends.JobSpec{GridID: fmt.Sprintf("b%d", i), Nodes: 1, Command: []string{"x"},
				Walltime: time.Hour, Sim: backends.SimHints{Runtime: time.Minute}})
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, id)
		}
		for _, call := range []struct {
			name string
			f    func() error
		}{
			{"Status10", func() error { _, err := c.be.Status(ctx, ids); return err }},
			{"Info", func() error { _, err := c.be.Info(ctx); return err }},
		} {
			b.Run(c.name+"/"+call.name, func(b *testing.B) {
				lat := make([]time.Duration, 0, b.N)
				for b.Loop() {
					t0 := time.Now()
					if err := call.f(); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-µs")
			})
		}
	}
}
