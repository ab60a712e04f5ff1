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
	// Gridsub is the gridsub executable Open re-executes for a
	// plugin:builtin:NAME reference ("": os.Executable).
	Gridsub string
	// Fallback is a policy of the same kind (a built-in) that answers from
	// the moment the plugin fails for good (it died or hung, and a
	// restart did not help: see MinRestartInterval) on. nil: the failure
	// is returned, or the method's safe value.
	Fallback any
	// OnSwitch is told every restart after a failure and the switch to
	// Fallback (a *SwitchError), for an event and a metric.
	OnSwitch func(error)
}

// SwitchError reports what a Plugin did about a failure: it restarted the
// process (Restarted), or from now on answers with its fallback (To).
// Err is the failure.
type SwitchError struct {
	Kind, From, To string
	Restarted      bool
	Err            error
}

func (e *SwitchError) Error() string {
	if e.Restarted {
		return fmt.Sprintf("%s plugin %s failed and was restarted: %v", e.Kind, e.From, e.Err)
	}
	return fmt.Sprintf("%s plugin %s failed, %s decides from now on: %v", e.Kind, e.From, e.To, e.Err)
}

func (e *SwitchError) Unwrap() error { return e.Err }

// Plugin is a started policy plugin process. Its Policy value stays the
// same across Restart, and restarts the process itself when a call finds
// it gone (handle.go).
type Plugin struct {
	Kind   string
	SHA256 string // the verified checksum ("" when none was configured)
	cfg    Config
	ccfg   func() *goplugin.ClientConfig

	mu          sync.Mutex
	gp          *goplugin.Client
	cur         any    // the current process's client (*TrustClient, ...)
	gen         uint64 // bumped by every (re)start
	closed      bool
	lastRestart time.Time
	restarts    int
	handle      any
	down        bool // failed for good: the fallback answers
}

// Load starts the plugin executable cfg names, checks its handshake
// (bridge/plugins.Handshake: cookie and protocol version), and dispenses
// its policy of kind (plugins.KindTrust, ...). ctx is checked first;
// StartTimeout bounds the start.
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
	var checksum []byte
	if cfg.SHA256 != "" {
		sum, err := hex.DecodeString(strings.TrimPrefix(cfg.SHA256, "sha256:"))
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("%s plugin %s: sha256 %q is not 64 hex digits", kind, cfg.Path, cfg.SHA256)
		}
		checksum = sum
	}
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if cfg.Fallback != nil && !isKind(kind, cfg.Fallback) {
		return nil, fmt.Errorf("%s plugin %s: the fallback, a %T, is not a %s policy", kind, cfg.Path, cfg.Fallback, kind)
	}
	p := &Plugin{Kind: kind, SHA256: cfg.SHA256, cfg: cfg}
	p.ccfg = func() *goplugin.ClientConfig {
		c := &goplugin.ClientConfig{
			HandshakeConfig:  plugins.Handshake,
			Plugins:          HostPlugins(cfg.CallTimeout),
			Cmd:              execCommand(cfg),
			SkipHostEnv:      true,
			AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
			AutoMTLS:         true,
			GRPCDialOptions:  plannerrpc.DialOptions(),
			StartTimeout:     timeout,
			Stderr:           io.Discard,
			Logger:           hclog.New(&hclog.LoggerOptions{Name: "plugin." + kind + "." + filepath.Base(cfg.Path), Output: os.Stderr, Level: hclog.Warn}),
		}
		if cfg.Logger != nil {
			c.Logger = plugins.HostLogger(cfg.Logger, cfg.LogName)
		}
		if checksum != nil {
			c.SecureConfig = &goplugin.SecureConfig{Checksum: checksum, Hash: sha256.New()}
		}
		return c
	}
	if err := p.start(); err != nil {
		return nil, err
	}
	p.handle = newHandle(p)
	return p, nil
}

// start starts a new process and dispenses its client (p.mu held, or p not
// yet shared).
func (p *Plugin) start() error {
	kind, cfg := p.Kind, p.cfg
	gp := goplugin.NewClient(p.ccfg())
	fail := func(what string, err error) error {
		gp.Kill()
		if errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
			return fmt.Errorf("%s plugin %s: %s: %w: the executable's sha256 is not the configured %s (%v)", kind, cfg.Path, what, plugins.ErrChecksum, cfg.SHA256, err)
		}
		return fmt.Errorf("%s plugin %s: %s: %w", kind, cfg.Path, what, err)
	}
	rpc, err := gp.Client()
	if err != nil {
		return fail("start", err)
	}
	impl, err := rpc.Dispense(kind)
	if err != nil {
		return fail("dispense", err)
	}
	p.gp, p.cur = gp, impl
	p.gen++
	return nil
}

// MinRestartInterval is how soon after a restart a call that finds the
// plugin gone may restart it again: a plugin that dies at once is not
// restarted in a tight loop (the call fails with ErrPluginExited instead).
const MinRestartInterval = time.Second

// Restart kills the plugin process (if it still runs) and starts a new
// one. Admission books re-open on it from their call logs at their next
// call.
func (p *Plugin) Restart(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restartLocked()
}

func (p *Plugin) restartLocked() error {
	if p.closed {
		return fmt.Errorf("%s plugin %s: closed", p.Kind, p.cfg.Path)
	}
	if p.gp != nil {
		p.gp.Kill()
	}
	p.lastRestart = time.Now()
	p.restarts++
	return p.start()
}

// revive restarts the plugin after a call of generation gen found it
// failed (gone, or hung: the process is killed first), unless another call
// did already or it was restarted less than MinRestartInterval ago. It
// reports whether a retry may help.
func (p *Plugin) revive(gen uint64, cause error) bool {
	p.mu.Lock()
	if p.gen != gen {
		p.mu.Unlock()
		return true // restarted meanwhile
	}
	if p.down || p.closed || time.Since(p.lastRestart) < MinRestartInterval {
		p.mu.Unlock()
		return false
	}
	from := p.name()
	ok := p.restartLocked() == nil
	p.mu.Unlock()
	if ok && p.cfg.OnSwitch != nil {
		p.cfg.OnSwitch(&SwitchError{Kind: p.Kind, From: from, To: from, Restarted: true, Err: cause})
	}
	return ok
}

// fallen is the fallback once the plugin failed for good, else nil.
func (p *Plugin) fallen() any {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return p.cfg.Fallback
	}
	return nil
}

// fallDown gives up on the plugin after cause when it has a fallback, and
// returns the fallback (nil when it has none: the failure stands).
func (p *Plugin) fallDown(cause error) any {
	p.mu.Lock()
	if p.cfg.Fallback == nil {
		p.mu.Unlock()
		return nil
	}
	first := !p.down
	p.down = true
	from := p.name()
	if p.gp != nil {
		p.gp.Kill()
	}
	p.mu.Unlock()
	if first {
		e := &SwitchError{Kind: p.Kind, From: from, To: p.cfg.Fallback.(interface{ Name() string }).Name(), Err: cause}
		if p.cfg.Logger != nil {
			p.cfg.Logger.Warn(e.Error(), "plugin", p.cfg.LogName)
		}
		if p.cfg.OnSwitch != nil {
			p.cfg.OnSwitch(e)
		}
	}
	return p.cfg.Fallback
}

// FallbackActive reports whether the plugin failed for good and its
// fallback answers.
func (p *Plugin) FallbackActive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down
}

// name is the plugin's policy's name as its process gave it (p.mu held).
func (p *Plugin) name() string {
	if c, ok := p.cur.(interface{ Name() string }); ok {
		return c.Name()
	}
	return p.cfg.Path
}

// Restarts is how many times the plugin was restarted.
func (p *Plugin) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// conn is the current process's client and its generation.
func (p *Plugin) conn() (any, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur, p.gen
}

// Policy is the plugin's policy, a value of its kind's interface
// (policy.Feasibility, Admission, Trust, Tiering, Remap or Order) that stays valid
// across restarts: a call that finds the process gone restarts it (at most
// once per MinRestartInterval) and is made again, which is safe as the
// policies are pure and an admission book is rebuilt from its calls. Its
// Err() reports the last failure of a method without an error result.
func (p *Plugin) Policy() any { return p.handle }

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

func execCommand(cfg Config) *exec.Cmd {
	cmd := exec.Command(cfg.Path, cfg.Args...)
	cmd.Env = slices.Clone(cfg.Env)
	plugins.DieWithHost(cmd)
	return cmd
}

// Listing describes the plugin as `gridsub plugins` lists it: name is what
// it serves (the configuration key), mode plugins.ModeIsolated for a
// built-in re-executed by gridsub, else plugins.ModeExternal.
func (p *Plugin) Listing(name, mode string) plugins.Listing {
	p.mu.Lock()
	l := plugins.Listing{Name: name, Kind: p.Kind, Mode: mode, Impl: p.cfg.Path, SHA256: p.SHA256, Restarts: p.restarts, Health: "ok"}
	if c, ok := p.cur.(interface{ Version() string }); ok {
		l.Version = c.Version()
	}
	if fb, ok := p.cfg.Fallback.(interface{ Name() string }); ok {
		l.Fallback = fb.Name()
	}
	down, closed, gp := p.down, p.closed, p.gp
	p.mu.Unlock()
	switch {
	case down:
		l.Health, l.FallbackActive, l.Reason = "down", true, "failed for good; the fallback "+l.Fallback+" decides"
	case closed || gp == nil || gp.Exited():
		l.Health, l.Reason = "down", "the plugin process is not running (the next call restarts it)"
	default:
		l.Pid = p.Pid()
	}
	if mode == plugins.ModeIsolated && len(p.cfg.Args) == 4 {
		l.Impl = p.cfg.Args[3] // plugin serve KIND NAME
	}
	return l
}
