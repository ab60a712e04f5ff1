package plugins

import (
	"bytes"
	"log/slog"
	"testing"
	"time"
)

// FuzzPluginLog: whatever a plugin writes, in whatever chunks, the writer
// never holds more than one bounded line, every record it makes is
// bounded, and it never makes more records than lines it was given (plus
// the drop reports).
func FuzzPluginLog(f *testing.F) {
	f.Add([]byte(`{"@level":"error","@message":"x","k":1}`+"\n"), 3, 1)
	f.Add(bytes.Repeat([]byte("y"), 3*MaxLogLine), 2, 4096)
	f.Add([]byte("\n\n\n"), 1000, 1)
	f.Add([]byte(`{"@message":`), 1, 7)
	f.Fuzz(func(t *testing.T, data []byte, times, chunk int) {
		times = min(max(times, 1), 2000)
		chunk = min(max(chunk, 1), 1<<16)
		h := &countHandler{}
		now := time.Unix(0, 0)
		w := &slogWriter{log: slog.New(h), now: func() time.Time { return now }}
		lines := 0
		for range times {
			for p := data; len(p) > 0; {
				n := min(chunk, len(p))
				w.Write(p[:n])
				p = p[n:]
			}
			lines += bytes.Count(data, []byte("\n"))
			if len(w.buf) > MaxLogLine {
				t.Fatalf("the writer holds %d bytes", len(w.buf))
			}
		}
		w.mu.Lock()
		if w.timer != nil {
			w.timer.Stop()
		}
		w.mu.Unlock()
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.records > min(lines, LogBurst)+1 {
			t.Fatalf("%d records for %d lines at one instant (burst %d)", h.records, lines, LogBurst)
		}
		for _, r := range h.last {
			if len(r.Message) > MaxLogLine+100 {
				t.Fatalf("a record of %d bytes", len(r.Message))
			}
		}
	})
}
