package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// HostLogger is hostLogger for the other plugin kinds' hosts (a planner
// plugin's): the plugin's log lines become slog records of log with
// plugin=name.
func HostLogger(log *slog.Logger, name string) hclog.Logger { return hostLogger(log, name) }

// hostLogger is the hclog logger the go-plugin client of one plugin logs
// with (its own messages and every line the plugin writes to stderr): it
// writes JSON lines into a writer that turns each into a slog record of
// log, with the attribute plugin=name.
func hostLogger(log *slog.Logger, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "plugin", Output: &slogWriter{log: log.With("plugin", name)},
		JSONFormat: true, Level: hclog.Debug})
}

// Bounds of what a plugin may put into the daemon's log (slogWriter).
const (
	// MaxLogLine bounds one line: a longer one is cut there, marked with
	// how many bytes were left out; the rest until its newline is dropped
	// without being held in memory.
	MaxLogLine = 8 << 10
	// LogBurst lines may come at once; then LogRate lines a second. Lines
	// over the rate are dropped and counted; the count is logged (a
	// warning with lines_dropped and bytes_dropped) once lines get through
	// again, or a second after the dropping began.
	LogBurst = 200
	LogRate  = 50
)

// slogWriter receives hclog JSON lines (or a plugin's raw output) and
// turns each into a slog record, within MaxLogLine, LogBurst and LogRate:
// a plugin that writes without end costs the daemon's log a bounded rate,
// and its memory one line.
type slogWriter struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte

	skipping bool      // dropping the rest of an over-long line
	cut      int       // bytes left out of the current over-long line
	tokens   float64   // the rate limit's bucket
	last     time.Time // when tokens was last refilled
	dropped  int       // lines dropped since the last report
	dropB    int64     // their bytes
	timer    *time.Timer
	now      func() time.Time // time.Now; tests replace it
}

func (w *slogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		switch {
		case w.skipping:
			w.cut += len(chunk)
		case len(w.buf)+len(chunk) > MaxLogLine:
			keep := MaxLogLine - len(w.buf)
			w.buf = append(w.buf, chunk[:keep]...)
			w.cut += len(chunk) - keep
			w.skipping = true
		default:
			w.buf = append(w.buf, chunk...)
		}
		if i < 0 {
			break
		}
		w.line()
		p = p[i+1:]
	}
	return n, nil
}

// line emits the buffered line if the rate allows. w.mu held.
func (w *slogWriter) line() {
	line, cut := w.buf, w.cut
	w.buf, w.cut, w.skipping = w.buf[:0], 0, false
	if !w.allow() {
		w.dropped++
		w.dropB += int64(len(line) + cut)
		if w.timer == nil {
			w.timer = time.AfterFunc(time.Second, w.flushDropped)
		}
		return
	}
	if w.timer == nil {
		w.report() // else the timer reports, at most one report a second
	}
	if cut > 0 {
		line = append(line, fmt.Sprintf(" [... %d more bytes of this line dropped]", cut)...)
	}
	w.emit(line)
	w.buf = w.buf[:0:min(cap(w.buf), MaxLogLine+128)]
}

// allow takes a token of the rate limit. w.mu held.
func (w *slogWriter) allow() bool {
	now := time.Now()
	if w.now != nil {
		now = w.now()
	}
	if w.last.IsZero() {
		w.tokens, w.last = LogBurst, now
	}
	w.tokens = min(LogBurst, w.tokens+now.Sub(w.last).Seconds()*LogRate)
	w.last = now
	if w.tokens < 1 {
		return false
	}
	w.tokens--
	return true
}

// report logs how many lines were dropped since the last report. w.mu
// held.
func (w *slogWriter) report() {
	if w.dropped == 0 {
		return
	}
	w.log.Warn("plugin log over its rate limit: lines dropped", "lines_dropped", w.dropped, "bytes_dropped", w.dropB,
		"limit", fmt.Sprintf("%d lines at once, then %d a second", LogBurst, LogRate))
	w.dropped, w.dropB = 0, 0
}

func (w *slogWriter) flushDropped() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = nil
	w.report()
}

func (w *slogWriter) emit(line []byte) {
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		w.log.Info(string(line))
		return
	}
	msg, _ := m["@message"].(string)
	lv, _ := m["@level"].(string)
	var level slog.Level
	switch lv {
	case "trace", "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		level = slog.LevelInfo
	}
	if !w.log.Enabled(context.Background(), level) {
		return
	}
	var attrs []any
	for k, v := range m {
		switch k {
		case "@message", "@level", "@timestamp", "@module", "timestamp":
			continue
		}
		if k == "plugin" {
			k = "plugin_path" // go-plugin's own key; plugin= is the site's name
		}
		attrs = append(attrs, slog.Any(k, v))
	}
	w.log.Log(context.Background(), level, msg, attrs...)
}
