package daemon_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// BenchmarkSubmitThroughDaemon: submissions over the socket into a running
// daemon (SQLite store, committed before each reply) while it cycles, by
// number of concurrent clients.
func BenchmarkSubmitThroughDaemon(b *testing.B) {
	for _, clients := range []int{1, 50} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			state, sock := dirs(b)
			start(b, state, sock, 600)
			c := api.NewUnixClient(sock)
			ctx := context.Background()
			r := request("bench", 1, time.Minute, 10*time.Minute)
			work := make(chan struct{}, b.N)
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			b.ResetTimer()
			var wg sync.WaitGroup
			errc := make(chan error, clients)
			for range clients {
				wg.Go(func() {
					for range work {
						if _, err := c.Submit(ctx, r); err != nil {
							errc <- err
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
			close(errc)
			for err := range errc {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkListRunning: GET /v1/jobs?state=running through the daemon with
// a few hundred jobs running on the simulated testbed.
func BenchmarkListRunning(b *testing.B) {
	state, sock := dirs(b)
	start(b, state, sock, 1)
	c := api.NewUnixClient(sock)
	ctx := context.Background()
	for range 300 {
		if _, err := c.Submit(ctx, request("run", 1, time.Hour, time.Hour)); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	var n int
	for time.Now().Before(deadline) {
		js, _, err := c.List(ctx, bridge.Filter{States: []bridge.JobState{bridge.Running}})
		if err != nil {
			b.Fatal(err)
		}
		if n = len(js); n >= 200 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.ResetTimer()
	for b.Loop() {
		js, _, err := c.List(ctx, bridge.Filter{States: []bridge.JobState{bridge.Running}})
		if err != nil || len(js) == 0 {
			b.Fatal(len(js), err)
		}
	}
	b.ReportMetric(float64(n), "running")
}
