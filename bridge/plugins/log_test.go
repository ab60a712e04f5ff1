package plugins

import (
	"bytes"
	"context"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// countHandler counts the records and bytes that reach the daemon's log.
type countHandler struct {
	mu      sync.Mutex
	records int
	bytes   int
	last    []slog.Record
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records++
	h.bytes += len(r.Message)
	h.last = append(h.last, r)
	if len(h.last) > 8 {
		h.last = h.last[1:]
	}
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }

func attr(r slog.Record, key string) (slog.Value, bool) {
	var v slog.Value
	ok := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, ok = a.Value, true
			return false
		}
		return true
	})
	return v, ok
}

// TestPluginLogBounded: a real process writing without end (50 MB of
// lines in well under a second, then one 16 MB line without a newline)
// puts a bounded number of records of bounded size into the daemon's log,
// holds at most one line in memory, and the log says how much was dropped.
func TestPluginLogBounded(t *testing.T) {
	h := &countHandler{}
	w := &slogWriter{log: slog.New(h)}
	t0 := time.Now()
	cmd := exec.Command("sh", "-c", "yes 'a plugin that never stops talking' | head -c 50000000; head -c 16000000 /dev/zero | tr '\\0' x; echo")
	cmd.Stdout = w
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	el := time.Since(t0)
	w.flushDropped()
	h.mu.Lock()
	defer h.mu.Unlock()
	allowed := LogBurst + int(el.Seconds()*LogRate) + 2 + int(el.Seconds()) + 2 // lines, plus a report a second
	if h.records > allowed {
		t.Fatalf("%d records in %s reached the log; the limits allow %d", h.records, el, allowed)
	}
	if h.bytes > allowed*(MaxLogLine+100) {
		t.Fatalf("%d bytes reached the log", h.bytes)
	}
	if cap(w.buf) > 2*MaxLogLine {
		t.Fatalf("the writer holds a buffer of %d bytes", cap(w.buf))
	}
	var dropped int64
	for _, r := range h.last {
		if v, ok := attr(r, "lines_dropped"); ok {
			dropped += v.Int64()
		}
	}
	if dropped == 0 {
		t.Fatalf("no record says how many lines were dropped; last records %v", h.last)
	}
	t.Logf("%s: %d records, %d bytes in the log", el, h.records, h.bytes)
}

// TestPluginLogLongLineCut: an over-long line is cut at MaxLogLine and
// says how much of it was left out; the next line is whole.
func TestPluginLogLongLineCut(t *testing.T) {
	h := &countHandler{}
	w := &slogWriter{log: slog.New(h)}
	w.Write(bytes.Repeat([]byte("y"), 3*MaxLogLine))
	w.Write(bytes.Repeat([]byte("y"), MaxLogLine))
	w.Write([]byte("\nnext\n"))
	if h.records != 2 || !strings.Contains(h.last[0].Message, "3"+"2768 more bytes of this line dropped") && !strings.Contains(h.last[0].Message, "more bytes of this line dropped") {
		t.Fatalf("records %d, first %q", h.records, h.last[0].Message[max(0, len(h.last[0].Message)-80):])
	}
	if len(h.last[0].Message) > MaxLogLine+100 || h.last[1].Message != "next" {
		t.Fatalf("lines %d bytes and %q", len(h.last[0].Message), h.last[1].Message)
	}
}
