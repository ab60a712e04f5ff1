package plannerrpc

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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/policy"
)

// Config says how to start a planner plugin executable.
type Config struct {
	// Path is the executable; Args its arguments (e.g. the gridsub binary
	// with "plugin", "serve", "planner", "greedy-easy").
	Path string
	Args []string
	// Env is the plugin's whole environment ("KEY=value"): it does not
	// inherit gridsub's, which may hold what a planner has no business
	// reading. go-plugin adds its handshake variables.
	Env []string
	// SHA256 is the executable's checksum, hex; when set it is verified
	// before every start (go-plugin's SecureConfig) and a mismatch refuses
	// to start it.
	SHA256 string
	// StartTimeout bounds the start and the handshake (0: 10 s).
	StartTimeout time.Duration
	// CallTimeout bounds NewSession, which has no ctx (0: 30 s).
	CallTimeout time.Duration
	// Log gets the plugin's log lines (its hclog JSON, and any other line
	// it writes to stderr at debug level, a panic at error), named
	// plugin.planner.<executable> (nil: os.Stderr). Level is the lowest
	// level passed on (0: warn).
	Log   io.Writer
	Level hclog.Level
	// Logger, when set, gets the plugin's log lines instead of Log, as
	// slog records with plugin=LogName (bridge/plugins.HostLogger): what a
	// broker that logs with slog uses.
	Logger  *slog.Logger
	LogName string
}

// Plugin is a started planner plugin process. Its Planner value stays the
// same across Restart: sessions opened on it re-open on the new process.
type Plugin struct {
	cfg      Config
	checksum []byte
	mu       sync.Mutex
	gp       *goplugin.Client
	cur      *Client
	gen      uint64 // bumped by every (re)start
	closed   bool
	planner  policy.Planner
}

// Load starts the plugin executable cfg names, checks its handshake
// (cookie and protocol version, bridge/plugins.Handshake), and dispenses
// its planner. ctx bounds nothing the start does not already bound with
// StartTimeout; it is checked first.
func Load(ctx context.Context, cfg Config) (*Plugin, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.Path == "" {
		return nil, fmt.Errorf("planner plugin: no executable path")
	}
	p := &Plugin{cfg: cfg}
	if cfg.SHA256 != "" {
		sum, err := hex.DecodeString(strings.TrimPrefix(cfg.SHA256, "sha256:"))
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("planner plugin %s: sha256 %q is not 64 hex digits", cfg.Path, cfg.SHA256)
		}
		p.checksum = sum
	}
	if err := p.start(); err != nil {
		return nil, err
	}
	if p.cur.incremental {
		p.planner = incrementalHandle{handle{p}}
	} else {
		p.planner = handle{p}
	}
	return p, nil
}

// start starts a new process and connects to it (p.mu held or p not yet
// shared).
func (p *Plugin) start() error {
	cfg := p.cfg
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	out := cfg.Log
	if out == nil {
		out = os.Stderr
	}
	level := cfg.Level
	if level == hclog.NoLevel {
		level = hclog.Warn
	}
	cmd := exec.Command(cfg.Path, cfg.Args...)
	cmd.Env = slices.Clone(cfg.Env)
	plugins.DieWithHost(cmd)
	ccfg := &goplugin.ClientConfig{
		HandshakeConfig:  plugins.Handshake,
		Plugins:          goplugin.PluginSet{plugins.KindPlanner: &GRPCPlugin{CallTimeout: cfg.CallTimeout}},
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		GRPCDialOptions:  DialOptions(),
		StartTimeout:     timeout,
		Stderr:           io.Discard, // a raw copy of what Logger gets
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "plugin.planner." + baseName(cfg.Path), Output: out, Level: level}),
	}
	if cfg.Logger != nil {
		ccfg.Logger = plugins.HostLogger(cfg.Logger, cfg.LogName)
	}
	if p.checksum != nil {
		ccfg.SecureConfig = &goplugin.SecureConfig{Checksum: p.checksum, Hash: sha256.New()}
	}
	gp := goplugin.NewClient(ccfg)
	fail := func(what string, err error) error {
		gp.Kill()
		if errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
			return fmt.Errorf("planner plugin %s: %s: the executable's sha256 is not the configured %s: rebuild it or update the checksum: %w", cfg.Path, what, p.cfg.SHA256, err)
		}
		return fmt.Errorf("planner plugin %s: %s: %w", cfg.Path, what, err)
	}
	rpc, err := gp.Client()
	if err != nil {
		return fail("start", err)
	}
	raw, err := rpc.Dispense(plugins.KindPlanner)
	if err != nil {
		return fail("dispense", err)
	}
	var c *Client
	switch x := raw.(type) {
	case *Client:
		c = x
	case IncrementalClient:
		c = x.Client
	default:
		return fail("dispense", fmt.Errorf("got a %T, not a planner", raw))
	}
	if p.cur != nil && p.cur.incremental && !c.incremental {
		return fail("restart", fmt.Errorf("the plugin no longer serves sessions"))
	}
	p.gp, p.cur = gp, c
	p.gen++
	return nil
}

func baseName(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[i+1:]
	}
	return path
}

// Planner is the plugin's planner: a policy.Incremental when the plugin
// serves sessions. The value stays valid across Restart and has a
// Restart(ctx) method itself (WithFallback uses it).
func (p *Plugin) Planner() policy.Planner { return p.planner }

// Pid is the plugin process's id (0 when it is not running).
func (p *Plugin) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return plugins.ProcessPid(p.gp)
}

// Exited reports whether the plugin process has exited.
func (p *Plugin) Exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gp == nil || p.gp.Exited()
}

// Restart kills the plugin process (if it still runs) and starts a new
// one. Sessions re-open on it from their mirrors at their next pass.
func (p *Plugin) Restart(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.gp != nil {
		p.gp.Kill()
	}
	return p.start()
}

// Close stops the plugin process (gracefully, then by force).
func (p *Plugin) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.gp != nil {
		p.gp.Kill()
	}
	return nil
}

// conn is the current connection and its generation.
func (p *Plugin) conn() (*Client, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur, p.gen
}

// handle is the Plugin's stable policy.Planner.
type handle struct{ p *Plugin }

func (h handle) Name() string { c, _ := h.p.conn(); return c.Name() }

func (h handle) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	c, _ := h.p.conn()
	return c.Plan(ctx, s)
}

// Restart restarts the plugin process (Plugin.Restart).
func (h handle) Restart(ctx context.Context) error { return h.p.Restart(ctx) }

type incrementalHandle struct{ handle }

func (h incrementalHandle) NewSession(s *policy.Snapshot) (policy.Session, error) {
	return newSession(s, h.p.conn)
}
