package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"
)

// benchSize is the file size of the SFTP benchmarks.
const benchSize = 200 << 20

// BenchmarkSFTP uploads and downloads a 200 MiB file over loopback with
// pkg/sftp's concurrency off and on, interleaved in every iteration so that
// both see the same machine load, and reports each direction's throughput
// (MB/s, 1 MB = 1e6 bytes) and the on/off ratio. "inprocess" is the test
// server of this package (x/crypto/ssh + pkg/sftp server), "inprocess-rtt2ms"
// the same behind a proxy adding 1ms each way (a WAN-like round trip, where
// concurrency matters most), "sshd" the testbed's OpenSSH (skipped unless
// testbed.env is sourced).
//
//	go test -run '^$' -bench SFTP -benchtime 2x ./backends/transport/
func BenchmarkSFTP(b *testing.B) {
	data := make([]byte, benchSize)
	rand.NewChaCha8([32]byte{1}).Read(data)
	b.Run("inprocess", func(b *testing.B) {
		f := newFixture(b)
		f.cfg.Logger = slog.New(slog.DiscardHandler)
		benchSFTP(b, f.cfg, f.srv.Dir, data)
	})
	b.Run("inprocess-rtt2ms", func(b *testing.B) {
		f := newFixture(b)
		f.cfg.Logger = slog.New(slog.DiscardHandler)
		// known_hosts names the server's port; the proxy's port needs its own line.
		f.cfg.Port = delayProxy(b, fmt.Sprintf("127.0.0.1:%d", f.srv.Port), time.Millisecond)
		f.cfg.KnownHosts = []string{writeKnownHosts(b, knownHostsLineFor(fmt.Sprintf("[127.0.0.1]:%d", f.cfg.Port), f.host.PublicKey()))}
		benchSFTP(b, f.cfg, f.srv.Dir, data)
	})
	b.Run("sshd", func(b *testing.B) {
		cfg := realSSHDConfig(b)
		c, err := Dial(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		benchSFTP(b, cfg, realScratch(b, c), data)
	})
}

func benchSFTP(b *testing.B, cfg Config, root string, data []byte) {
	ctx := context.Background()
	stagers := map[bool]*Stager{}
	for _, seq := range []bool{true, false} {
		cfg := cfg
		cfg.SFTPSequential = seq
		c, err := Dial(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		stagers[seq] = c.Stager(root)
	}
	var put, get [2]time.Duration // [sequential, concurrent]
	b.SetBytes(4 * benchSize)
	b.ResetTimer()
	for b.Loop() {
		for i, seq := range []bool{true, false} {
			st := stagers[seq]
			tr, err := st.Put(ctx, bytes.NewReader(data), "bench.bin", 0)
			if err != nil || tr.Bytes != benchSize {
				b.Fatalf("Put: %+v %v", tr, err)
			}
			put[i] += tr.Duration
			tr, err = st.Get(ctx, "bench.bin", io.Discard)
			if err != nil || tr.Bytes != benchSize {
				b.Fatalf("Get: %+v %v", tr, err)
			}
			get[i] += tr.Duration
		}
	}
	n := float64(b.N)
	mbps := func(d time.Duration) float64 { return n * benchSize / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(put[0]), "put-seq-MB/s")
	b.ReportMetric(mbps(put[1]), "put-conc-MB/s")
	b.ReportMetric(mbps(get[0]), "get-seq-MB/s")
	b.ReportMetric(mbps(get[1]), "get-conc-MB/s")
	b.ReportMetric(put[0].Seconds()/put[1].Seconds(), "put-conc/seq")
	b.ReportMetric(get[0].Seconds()/get[1].Seconds(), "get-conc/seq")
}
