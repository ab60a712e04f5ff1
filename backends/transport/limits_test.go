package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// TestCopyLimits: the readers and writers that bound a copy stop exactly
// at the limit and say so, and a source exactly at the limit passes.
func TestCopyLimits(t *testing.T) {
	var dst bytes.Buffer
	n, err := io.Copy(&dst, &capReader{r: strings.NewReader("0123456789"), left: 10})
	if err != nil || n != 10 {
		t.Errorf("a source of exactly the limit: %d %v", n, err)
	}
	dst.Reset()
	_, err = io.Copy(&dst, &capReader{r: &endless{}, left: 1000})
	if !errors.Is(err, errLimit) || dst.Len() != 1000 {
		t.Errorf("an endless source: %d bytes, %v; want 1000 and errLimit", dst.Len(), err)
	}
	dst.Reset()
	w := &ctxWriter{ctx: context.Background(), w: &dst, left: 10}
	if n, err := w.Write([]byte("0123456789abcde")); !errors.Is(err, errLimit) || n != 10 || !w.over || dst.String() != "0123456789" {
		t.Errorf("a write past the limit: %d %v over=%v %q", n, err, w.over, dst.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w = &ctxWriter{ctx: ctx, w: &dst, left: 10}
	if _, err := w.Write([]byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("a write after cancel: %v", err)
	}
}

// TestDeadlineLimit: a transfer's deadline is MinTransferTime + size /
// MinTransferRate, and a huge size at a tiny rate is clamped, not
// overflowed into a negative duration.
func TestDeadlineLimit(t *testing.T) {
	c := &Client{cfg: Config{Host: "h", Port: 22, MinTransferTime: time.Minute, MinTransferRate: 1 << 20}}
	d := &deadline{c: c}
	if got := d.limit(100 << 20); got != time.Minute+100*time.Second {
		t.Errorf("100 MiB at 1 MiB/s: %s", got)
	}
	if got := d.limit(-1); got != time.Minute {
		t.Errorf("unknown size: %s", got)
	}
	c.cfg.MinTransferRate = 1e-9
	if got := d.limit(1 << 62); got != maxDeadline {
		t.Errorf("2^62 bytes at 1e-9 B/s: %s, want the %s cap", got, maxDeadline)
	}
}
