package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/gridsub/gridsub/backends/transport"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/gridsub/gridsub/bridge/plugins/backendrpc"
)

// BackendSpec says where one site's backend comes from and how it is told
// its configuration.
type BackendSpec struct {
	// Config is what the backend is told (Configure).
	Config BackendConfig
	// Prompter answers, in process, what a site's SSH login asks a person
	// (transport.Config.Prompter: a one-time password, a key passphrase);
	// the CLI sets it when it runs on a terminal. It never crosses a
	// plugin boundary: an out-of-process site that needs a person shows
	// "needs login".
	Prompter transport.Prompter
	// Builtin is a built-in's name ("slurm", "sim"); ignored when Path is
	// set.
	Builtin string
	// Isolate runs the built-in out of process: gridsub re-executes itself
	// as `gridsub plugin serve backend NAME`.
	Isolate bool
	// Path is an external plugin executable, SHA256 its hex checksum
	// (required: it is verified before the executable starts), Args its
	// arguments.
	Path   string
	SHA256 string
	Args   []string
	// StartTimeout bounds the handshake (default 10s); ConfigureTimeout
	// the Configure call after it (default 30s: a real site's first dial).
	StartTimeout     time.Duration
	ConfigureTimeout time.Duration
	// Self is the executable re-executed for Isolate ("" = os.Executable()).
	Self string
	// Env is added to the plugin's environment ("KEY=value"). A plugin
	// does not inherit gridsub's environment (which may hold the API token
	// or other credentials): it gets only pluginEnv's variables and these.
	Env []string
	// Logger receives the host's messages about the plugin and everything
	// the plugin logs, with the attribute plugin=<site>.
	Logger *slog.Logger
}

func (s *BackendSpec) mode() string {
	switch {
	case s.Path != "":
		return ModeExternal
	case s.Isolate:
		return ModeIsolated
	}
	return ModeInProcess
}

func (s *BackendSpec) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// LoadBackend loads one backend: in process (the catalog's built-in built
// here, a simulated site on an engine of its own), isolated, or external. Out of process the executable's checksum
// is verified before it starts, the handshake must complete within
// StartTimeout, the connection uses AutoMTLS and gRPC only, and the plugin
// is configured and pinged before LoadBackend returns. Every error names
// the site and says what to do.
func LoadBackend(ctx context.Context, spec BackendSpec) (*Instance, error) {
	name := spec.Config.Name
	cfg, err := spec.wireConfig()
	if err != nil {
		return nil, err
	}
	if spec.mode() == ModeInProcess {
		b, err := buildInProcess(ctx, spec, nil)
		if err != nil {
			return nil, fmt.Errorf("site %s: %w", name, err)
		}
		return &Instance{Name: name, Kind: KindBackend, Mode: ModeInProcess, Impl: spec.Builtin, Version: Version(), Backend: b}, nil
	}

	path, args := spec.Path, spec.Args
	what := "the plugin executable"
	if spec.mode() == ModeIsolated {
		if _, err := builtin(spec.Builtin); err != nil {
			return nil, fmt.Errorf("site %s: %w", name, err)
		}
		path, args = spec.Self, []string{"plugin", "serve", KindBackend, spec.Builtin}
		if path == "" {
			if path, err = os.Executable(); err != nil {
				return nil, fmt.Errorf("plugin %s: finding gridsub's own executable to run the built-in %s isolated: %w", name, spec.Builtin, err)
			}
		}
		what = "gridsub's own executable"
	}
	sum, err := checkExecutable(name, path, what)
	if err != nil {
		return nil, err
	}
	if spec.mode() == ModeExternal {
		want := strings.ToLower(strings.TrimSpace(spec.SHA256))
		if want == "" {
			return nil, fmt.Errorf("plugin %s: %w: no sha256 configured for %s; add `sha256: %s` to the site's plugin section after checking that this is the executable you mean to run", name, ErrChecksum, path, sum)
		}
		if want != sum {
			return nil, fmt.Errorf("plugin %s: %w: %s has sha256 %s, the configuration says %s; it was not started. If you rebuilt the plugin on purpose, put the new sum in the site's plugin.sha256 (sha256sum %s)", name, ErrChecksum, path, sum, want, path)
		}
	}
	want, _ := hex.DecodeString(sum)
	timeout := spec.StartTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	log := spec.logger()
	cmd := exec.Command(path, args...)
	cmd.Env = append(hostEnv(), spec.Env...)
	DieWithHost(cmd)
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig: Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{
			ProtocolVersion: {KindBackend: &backendrpc.Plugin{Label: name}},
		},
		Cmd:              cmd,
		SecureConfig:     &goplugin.SecureConfig{Checksum: want, Hash: sha256.New()},
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		SkipHostEnv:      true,
		StartTimeout:     timeout,
		Logger:           hostLogger(log, name),
		// What the plugin writes to its stdout or stderr after the
		// handshake arrives here, one slog record per line.
		SyncStdout: &slogWriter{log: log.With("plugin", name, "stream", "stdout")},
		SyncStderr: &slogWriter{log: log.With("plugin", name, "stream", "stderr")},
	})
	rpc, err := client.Client()
	if err != nil {
		client.Kill()
		return nil, startError(name, path, timeout, err)
	}
	raw, err := rpc.Dispense(KindBackend)
	if err != nil {
		client.Kill()
		return nil, fmt.Errorf("plugin %s: %w: %s serves no %q plugin (%v); is it a gridsub backend plugin (plugins.ServeBackend)?", name, ErrHandshake, path, KindBackend, err)
	}
	c, ok := raw.(*backendrpc.Client)
	if !ok {
		client.Kill()
		return nil, fmt.Errorf("plugin %s: dispensed %T, want a backend client", name, raw)
	}
	if st := spec.Config.Staging; st != nil {
		// The host's limits, held on this side of the seam: a plugin that
		// ignores them still writes no more than they allow.
		c.SetOutputLimits(backendrpc.OutputLimits{MaxFileSize: st.MaxFileSize, MaxJobBytes: st.MaxJobBytes})
	}
	ct := spec.ConfigureTimeout
	if ct <= 0 {
		ct = 30 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, ct)
	defer cancel()
	hello, err := c.Configure(cctx, cfg)
	if err == nil {
		err = c.Ping(cctx)
	}
	if err != nil {
		client.Kill()
		return nil, fmt.Errorf("plugin %s: configuring %s: %w", name, path, err)
	}
	pid := 0
	if rc := client.ReattachConfig(); rc != nil {
		pid = rc.Pid
	}
	impl := path
	if spec.mode() == ModeIsolated {
		impl = spec.Builtin
	}
	log.Info("plugin started", "plugin", name, "mode", spec.mode(), "impl", impl, "pid", pid, "version", hello.Version, "sha256", sum)
	return &Instance{Name: name, Kind: KindBackend, Mode: spec.mode(), Impl: impl, Version: hello.Version, SHA256: sum,
		Pid: pid, Backend: c, Client: c, proc: client}, nil
}

// checkExecutable checks path is an executable regular file and returns its
// SHA-256 (hex).
func checkExecutable(name, path, what string) (string, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("plugin %s: %w: %s %s does not exist; build it or fix the site's plugin.path", name, ErrNotExecutable, what, path)
	case err != nil:
		return "", fmt.Errorf("plugin %s: %w: %s: %w", name, ErrNotExecutable, path, err)
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("plugin %s: %w: %s is a %s, not a file; point plugin.path at the plugin executable", name, ErrNotExecutable, path, fi.Mode().Type())
	case fi.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("plugin %s: %w: %s is not executable (mode %s); chmod +x it if it is the plugin you mean", name, ErrNotExecutable, path, fi.Mode().Perm())
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("plugin %s: %w: %w", name, ErrNotExecutable, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("plugin %s: reading %s: %w", name, path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

var incompatibleRE = regexp.MustCompile(`Plugin version: (\d+)`)

// startError turns go-plugin's start errors into ours, naming the plugin
// and what to do.
func startError(name, path string, timeout time.Duration, err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, goplugin.ErrChecksumsDoNotMatch):
		return fmt.Errorf("plugin %s: %w: %s changed between the check and the start; it was not started", name, ErrChecksum, path)
	case strings.Contains(msg, "incompatible API version"), strings.Contains(msg, "incompatible core API version"):
		theirs := "?"
		if m := incompatibleRE.FindStringSubmatch(msg); m != nil {
			theirs = m[1]
		}
		return fmt.Errorf("plugin %s: %w: %s speaks protocol version %s, this gridsub speaks version %d; rebuild the plugin against this gridsub's bridge/plugins (or run the gridsub it was built for)", name, ErrIncompatible, path, theirs, ProtocolVersion)
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return fmt.Errorf("plugin %s: %w: %s did not complete the handshake within %s (it was killed); is it a gridsub backend plugin, and does its main call plugins.ServeBackend at once?", name, ErrHandshake, path, timeout)
	case strings.Contains(msg, "plugin exited before we could connect"):
		return fmt.Errorf("plugin %s: %w: %s exited during the handshake; run it by hand to see why (it should say it is a plugin and exit)", name, ErrHandshake, path)
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		return fmt.Errorf("plugin %s: %w: %s printed something other than the handshake: is it a gridsub plugin? (%s)", name, ErrHandshake, path, firstLine(msg))
	}
	return fmt.Errorf("plugin %s: %w: starting %s: %v", name, ErrHandshake, path, err)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// pluginEnv are the variables of gridsub's environment a plugin inherits:
// what a process needs to run and to reach an ssh-agent, nothing that may
// carry a credential of gridsub's own (GRIDSUB_TOKEN and the like).
var pluginEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SSH_AUTH_SOCK"}

func hostEnv() []string {
	var out []string
	for _, k := range pluginEnv {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}
