package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"

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

// slogWriter receives hclog JSON lines.
type slogWriter struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (w *slogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
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
