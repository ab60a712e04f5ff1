package plugins

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/plugins/backendrpc"
)

// ServeBackend serves b as a backend plugin and returns when the host is
// done with it. It is what an external backend's main calls; b ignores
// the host's configuration (it configured itself). Run by hand, outside a
// host, it prints a message and exits (the magic cookie is missing).
func ServeBackend(b backends.Backend) {
	ServeBackendFactory(func(context.Context, []byte) (backends.Backend, error) { return b, nil }, Version())
}

// ServeBackendFactory serves the backend f builds from the host's
// configuration (BackendConfig as JSON). `gridsub plugin serve backend
// NAME` calls it with a built-in's factory.
func ServeBackendFactory(f backendrpc.Factory, version string) {
	log := pluginLogger()
	slog.SetDefault(slog.New(newHCLogHandler(os.Stderr)))
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{
			ProtocolVersion: {KindBackend: &backendrpc.Plugin{Factory: f, Version: version}},
		},
		GRPCServer: goplugin.DefaultGRPCServer,
		Logger:     log,
	})
}

// Version is the running binary's module version ("(devel)" for a build
// from a checkout), reported by built-in plugins.
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// pluginLogger is the plugin side's hclog logger: JSON on stderr, which the
// host's go-plugin client parses and hands to the host's slog.
func pluginLogger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true, Level: hclog.Info})
}

// newHCLogHandler is a slog handler writing hclog's JSON line format
// (@level, @message, @timestamp), so what a plugin logs with slog reaches
// the host's log with its level and attributes.
func newHCLogHandler(w *os.File) slog.Handler {
	return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.LevelKey:
				return slog.String("@level", strings.ToLower(a.Value.String()))
			case slog.MessageKey:
				return slog.String("@message", a.Value.String())
			case slog.TimeKey:
				return slog.String("@timestamp", a.Value.Time().Format("2006-01-02T15:04:05.000000Z07:00"))
			}
			return a
		}})
}
