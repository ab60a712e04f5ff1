package policyrpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
)

// Config says how to start a policy plugin executable.
type Config struct {
	// Path is the executable; Args its arguments (the gridsub binary with
	// "plugin", "serve", "trust", "paper002" for a built-in isolated).
	Path string
	Args []string
	// Env is the plugin's whole environment: it does not inherit
	// gridsub's. go-plugin adds its handshake variables.
	Env []string
	// SHA256 is the executable's checksum, hex; when set it is verified
	// before the start (go-plugin's SecureConfig) and a mismatch refuses
	// to start it (plugins.ErrChecksum).
	SHA256 string
	// StartTimeout bounds the start and the handshake (0: 10 s);
	// CallTimeout each call (0: DefaultCallTimeout).
	StartTimeout time.Duration
	CallTimeout  time.Duration
	// Logger gets the plugin's log lines as slog records with
	// plugin=LogName (nil: warnings and worse on os.Stderr).
	Logger  *slog.Logger
	LogName string
}

// Plugin is a started policy plugin process.
type Plugin struct {
	Kind   string
	SHA256 string // the verified checksum ("" when none was configured)
	mu     sync.Mutex
	gp     *goplugin.Client
	impl   any
}

// Load starts the plugin executable cfg names, checks its handshake
// (bridge/plugins.Handshake: cookie and protocol version), and dispenses
// its policy of kind (plugins.KindTrust, ...): Policy is then a
// *TrustClient, ... ctx is checked first; StartTimeout bounds the start.
func Load(ctx context.Context, kind string, cfg Config) (*Plugin, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !slices.Contains(Kinds(), kind) {
		return nil, fmt.Errorf("%w: no policy kind %q (valid: %s)", plugins.ErrUnknownPlugin, kind, strings.Join(Kinds(), ", "))
	}
	if cfg.Path == "" {
		return nil, fmt.Errorf("%s plugin: no executable path", kind)
	}
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	cmd := execCommand(cfg)
	ccfg := &goplugin.ClientConfig{
		HandshakeConfig:  plugins.Handshake,
		Plugins:          HostPlugins(cfg.CallTimeout),
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		GRPCDialOptions:  plannerrpc.DialOptions(),
		StartTimeout:     timeout,
		Stderr:           io.Discard,
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "plugin." + kind + "." + filepath.Base(cfg.Path), Output: os.Stderr, Level: hclog.Warn}),
	}
	if cfg.Logger != nil {
		ccfg.Logger = plugins.HostLogger(cfg.Logger, cfg.LogName)
	}
	if cfg.SHA256 != "" {
		sum, err := hex.DecodeString(strings.TrimPrefix(cfg.SHA256, "sha256:"))
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("%s plugin %s: sha256 %q is not 64 hex digits", kind, cfg.Path, cfg.SHA256)
		}
		ccfg.SecureConfig = &goplugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	gp := goplugin.NewClient(ccfg)
	fail := func(what string, err error) error {
		gp.Kill()
		if errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
			return fmt.Errorf("%s plugin %s: %s: %w: the executable's sha256 is not the configured %s (%v)", kind, cfg.Path, what, plugins.ErrChecksum, cfg.SHA256, err)
		}
		return fmt.Errorf("%s plugin %s: %s: %w", kind, cfg.Path, what, err)
	}
	rpc, err := gp.Client()
	if err != nil {
		return nil, fail("start", err)
	}
	impl, err := rpc.Dispense(kind)
	if err != nil {
		return nil, fail("dispense", err)
	}
	return &Plugin{Kind: kind, SHA256: cfg.SHA256, gp: gp, impl: impl}, nil
}

// Policy is the plugin's policy: a *FeasibilityClient, *AdmissionClient,
// *TrustClient, *TieringClient or *RemapClient by Kind.
func (p *Plugin) Policy() any { return p.impl }

// Pid is the plugin process's id (0 when it is not running).
func (p *Plugin) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gp == nil || p.gp.Exited() {
		return 0
	}
	if rc := p.gp.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

// Exited reports whether the plugin process has exited.
func (p *Plugin) Exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gp == nil || p.gp.Exited()
}

// Close stops the plugin process (gracefully, then by force).
func (p *Plugin) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gp != nil {
		p.gp.Kill()
	}
	return nil
}

func execCommand(cfg Config) *exec.Cmd {
	cmd := exec.Command(cfg.Path, cfg.Args...)
	cmd.Env = slices.Clone(cfg.Env)
	plugins.DieWithHost(cmd)
	return cmd
}
