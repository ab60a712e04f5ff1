package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"
)

// BenchmarkSmallFile puts and gets a 1 KiB file three directories below
// the root over a 2 ms round trip: the per-file cost of staging, where the
// Lstat walk of every component (confinement) shows as extra round trips.
//
//	go test -run '^$' -bench SmallFile -benchtime 50x ./backends/transport/
func BenchmarkSmallFile(b *testing.B) {
	f := newFixture(b)
	f.cfg.Logger = slog.New(slog.DiscardHandler)
	f.cfg.Port = delayProxy(b, fmt.Sprintf("127.0.0.1:%d", f.srv.Port), time.Millisecond)
	f.cfg.KnownHosts = []string{writeKnownHosts(b, knownHostsLineFor(fmt.Sprintf("[127.0.0.1]:%d", f.cfg.Port), f.host.PublicKey()))}
	ctx := context.Background()
	c, err := Dial(ctx, f.cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	st := c.Stager(f.srv.Dir)
	data := bytes.Repeat([]byte("x"), 1024)
	if _, err := st.Put(ctx, bytes.NewReader(data), "warm", 0); err != nil {
		b.Fatal(err)
	}
	var put, get time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := fmt.Sprintf("job%d/a/b/in.dat", i%4)
		t0 := time.Now()
		if _, err := st.Put(ctx, bytes.NewReader(data), p, 0); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := st.Get(ctx, p, io.Discard); err != nil {
			b.Fatal(err)
		}
		put += t1.Sub(t0)
		get += time.Since(t1)
	}
	b.ReportMetric(float64(put.Microseconds())/float64(b.N)/1000, "put-ms")
	b.ReportMetric(float64(get.Microseconds())/float64(b.N)/1000, "get-ms")
}
