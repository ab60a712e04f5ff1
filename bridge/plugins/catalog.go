package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sort"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/local"
	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge/plugins/backendrpc"
	"github.com/gridsub/gridsub/simbackend"
)

// BackendConfig is one site as its backend is told it, in every mode: a
// built-in in process gets it as a Go value, a built-in isolated or an
// external plugin as JSON at Configure. It never holds a secret: SSH keys
// travel as file paths (the plugin runs as the same user on the same
// machine).
type BackendConfig struct {
	Name         string  `json:"name"`
	Kind         string  `json:"kind"`
	Nodes        int     `json:"nodes,omitempty"`
	CoresPerNode int     `json:"cores_per_node,omitempty"`
	H            float64 `json:"h,omitempty"`
	// MemPerNode (bytes) and GPUsPerNode describe one node: a simulated
	// site models them; a batch system reports its own.
	MemPerNode  int64  `json:"mem_per_node,omitempty"`
	GPUsPerNode int    `json:"gpus_per_node,omitempty"`
	Partition   string `json:"partition,omitempty"` // SLURM partition, PBS queue
	// Account is charged for a job whose file names none (sbatch
	// --account, qsub -A).
	Account   string `json:"account,omitempty"`
	RemoteDir string `json:"remote_dir,omitempty"`
	// BinDir is a PBS site's directory of client commands (pbs.Config.BinDir).
	BinDir string `json:"bin_dir,omitempty"`
	// NativeArrays: a SLURM site submits grid arrays as native arrays
	// (slurm.Config.NativeArrays).
	NativeArrays bool       `json:"native_arrays,omitempty"`
	SSH          *SSHConfig `json:"ssh,omitempty"`
	Sim          *SimConfig `json:"sim,omitempty"`
	// Staging bounds every transfer of a site reached over SSH.
	Staging *StagingConfig `json:"staging,omitempty"`
	// Options is the site's free-form `plugin.options`, for an external
	// plugin to read as it likes.
	Options json.RawMessage `json:"options,omitempty"`
	// Budget is a site's scheduler-command budget (slurm, pbs).
	Budget *BudgetConfig `json:"budget,omitempty"`
}

// BudgetConfig is the configuration's `budget:` block of a site
// (sshbatch.BudgetConfig, plus the deadline of one remote command). Zero
// fields are the defaults.
type BudgetConfig struct {
	PerMinute      float64       `json:"per_minute,omitempty"`
	Burst          int           `json:"burst,omitempty"`
	PollFast       time.Duration `json:"poll_fast,omitempty"`
	PollSlow       time.Duration `json:"poll_slow,omitempty"`
	Settle         time.Duration `json:"settle,omitempty"`
	CapacityEvery  time.Duration `json:"capacity_every,omitempty"`
	BackoffMax     time.Duration `json:"backoff_max,omitempty"`
	CommandTimeout time.Duration `json:"command_timeout,omitempty"`
}

// sshBudget is the sshbatch budget and command deadline of c.
func sshBudget(c *BackendConfig) (sshbatch.BudgetConfig, time.Duration, error) {
	b := c.Budget
	if b == nil {
		return sshbatch.BudgetConfig{}, 0, nil
	}
	out := sshbatch.BudgetConfig{PerMinute: b.PerMinute, Burst: b.Burst, PollFast: b.PollFast, PollSlow: b.PollSlow,
		Settle: b.Settle, CapacityEvery: b.CapacityEvery, BackoffMax: b.BackoffMax}
	if err := out.Check(); err != nil {
		return out, 0, siteConfigErr("site %s: %v", c.Name, err)
	}
	if b.CommandTimeout < 0 {
		return out, 0, siteConfigErr("site %s: budget.command_timeout must be >= 0, got %s", c.Name, b.CommandTimeout)
	}
	return out, b.CommandTimeout, nil
}

// SSHConfig is how a backend reaches its site's login node.
type SSHConfig struct {
	Host                  string   `json:"host"`
	Port                  int      `json:"port,omitempty"`
	User                  string   `json:"user,omitempty"`
	KeyFiles              []string `json:"key_files,omitempty"`
	KnownHosts            []string `json:"known_hosts,omitempty"`
	Agent                 bool     `json:"agent,omitempty"`
	InsecureIgnoreHostKey bool     `json:"insecure_ignore_host_key,omitempty"`
	MaxSessions           int      `json:"max_sessions,omitempty"`
	// SSHConfig, CertFiles and ProxyJump are transport.Config's.
	SSHConfig string   `json:"ssh_config,omitempty"`
	CertFiles []string `json:"cert_files,omitempty"`
	ProxyJump string   `json:"proxy_jump,omitempty"`
}

// StagingConfig is the configuration's staging limits (transport.Config
// MaxFileSize, MinTransferRate, MinTransferTime; slurm.Config and
// pbs.Config MaxJobBytes). Zero fields are the backend's defaults.
type StagingConfig struct {
	MaxFileSize int64         `json:"max_file_size,omitempty"` // bytes per file
	MaxJobBytes int64         `json:"max_job_bytes,omitempty"` // bytes per job, each way
	MinRate     float64       `json:"min_rate,omitempty"`      // bytes per second
	MinTime     time.Duration `json:"min_time,omitempty"`      // nanoseconds
}

// SimConfig is a simulated site's own engine: a sim plugin has a virtual
// clock of its own, which the host drives with the Clock RPC.
type SimConfig struct {
	Epoch time.Time `json:"epoch"`
	Seed  uint64    `json:"seed"`
}

// Resolved is the configuration a site's backend is built with, as the
// side that builds it sees it: in process the catalog's own values, out of
// process what the plugin decodes from the JSON the host sends. Exactly one
// of Slurm, PBS, Local and Sim is set for a built-in; none for an external plugin,
// which reads Config as it likes.
type Resolved struct {
	Mode    string        // ModeInProcess, ModeIsolated or ModeExternal
	Builtin string        // the built-in's name ("" for an external plugin)
	Config  BackendConfig // as the backend's side has it
	// SSH is the transport of a site reached over SSH (slurm, pbs).
	SSH   *transport.Config
	Slurm *slurm.Config
	PBS   *pbs.Config
	// Local is a local site's configuration (processes on this machine).
	Local *local.Config
	// Sim is a simulated site's configuration; SimEngine its own engine's,
	// nil when it runs on the host's shared engine (BuildOptions.Engine).
	Sim       *simbackend.SiteConfig
	SimEngine *SimConfig
}

// BuildOptions are what only the host has: they are not part of the
// site's description and never cross a plugin boundary.
type BuildOptions struct {
	// Engine is the discrete-event engine every simulated site of one
	// broker shares in process; nil gives a simulated site an engine of its
	// own (SimConfig), as the sim plugin has.
	Engine *simbackend.Engine
	// OnEvent gets an out-of-process backend's supervision events
	// (SuperviseOptions.OnEvent).
	OnEvent func(site, kind, detail string)
}

// backendKind is one built-in backend of the catalog.
type backendKind struct {
	// caps are the optional capabilities the built-in declares; its
	// in-process value reports them (backends.Declarer) and a test holds
	// them equal to what the value implements.
	caps backends.Capabilities
	// resolve turns the site's description into the built-in's own
	// configuration (no I/O); engine is the host's shared engine or nil.
	resolve func(c *BackendConfig, engine *simbackend.Engine, log *slog.Logger) (*Resolved, error)
	// open builds the backend from what resolve made.
	open func(ctx context.Context, r *Resolved, engine *simbackend.Engine) (backends.Backend, error)
}

// builtinBackends are the backends the gridsub binary has built in: in
// process, and served by `gridsub plugin serve backend NAME` isolated.
var builtinBackends = map[string]*backendKind{
	"slurm": {caps: sshCaps, resolve: resolveSlurm, open: openSlurm},
	"pbs":   {caps: sshCaps, resolve: resolvePBS, open: openPBS},
	"sim":   {caps: simCaps, resolve: resolveSim, open: openSim},
	"local": {caps: localCaps, resolve: resolveLocal, open: openLocal},
}

// The capabilities the built-ins declare. A simulated site pushes its
// changes only with an engine of its own (the sim plugin): on the host's
// shared engine the broker polls it like any other site.
var (
	sshCaps   = backends.Capabilities{Find: true, Fetch: true, Reserve: true, Link: true, Conn: true, Batch: true, Data: true}
	simCaps   = backends.Capabilities{Find: true, Fetch: true, Reserve: true}
	localCaps = backends.Capabilities{Find: true, Fetch: true}
)

// BuiltinBackends lists the built-in backends' names.
func BuiltinBackends() []string {
	var out []string
	for n := range builtinBackends {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func builtin(name string) (*backendKind, error) {
	k, ok := builtinBackends[name]
	if !ok {
		return nil, fmt.Errorf("%w: no built-in backend %q (built-ins: %v)", ErrUnknownPlugin, name, BuiltinBackends())
	}
	return k, nil
}

// BuiltinCapabilities is what the built-in backend name declares it
// supports, known before any site is built.
func BuiltinCapabilities(name string) (backends.Capabilities, error) {
	k, err := builtin(name)
	if err != nil {
		return backends.Capabilities{}, err
	}
	return k.caps, nil
}

// BuiltinBackend returns the factory that serves the built-in backend
// name out of process: it decodes the host's JSON and builds the backend
// as Build does in process (with an engine of its own for a simulated
// site).
func BuiltinBackend(name string) (backendrpc.Factory, error) {
	k, err := builtin(name)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, raw []byte) (backends.Backend, error) {
		c, err := decodeConfig(raw)
		if err != nil {
			return nil, err
		}
		r, err := k.resolve(c, nil, slog.Default())
		if err != nil {
			return nil, err
		}
		r.Builtin = name
		return k.open(ctx, r, nil)
	}, nil
}

// Resolve is the configuration spec's backend would be built with, in
// spec's mode, without building it: for a built-in out of process it is
// what the plugin makes of the JSON the host sends (the same encoding and
// decoding as LoadBackend and the plugin's factory). It checks what Build
// would check before any I/O.
func Resolve(spec BackendSpec) (*Resolved, error) {
	return resolve(spec, nil)
}

func resolve(spec BackendSpec, engine *simbackend.Engine) (*Resolved, error) {
	mode := spec.mode()
	c := spec.Config
	if mode != ModeInProcess {
		raw, err := spec.wireConfig()
		if err != nil {
			return nil, err
		}
		d, err := decodeConfig(raw)
		if err != nil {
			return nil, fmt.Errorf("site %s: %w", spec.Config.Name, err)
		}
		c, engine = *d, nil
	}
	if mode == ModeExternal {
		return &Resolved{Mode: mode, Config: c}, nil
	}
	k, err := builtin(spec.Builtin)
	if err != nil {
		return nil, fmt.Errorf("site %s: %w", spec.Config.Name, err)
	}
	log := slog.Default()
	if mode == ModeInProcess {
		log = spec.logger()
	}
	r, err := k.resolve(&c, engine, log)
	if err != nil {
		return nil, err
	}
	r.Mode, r.Builtin = mode, spec.Builtin
	if mode == ModeInProcess && r.SSH != nil {
		r.SSH.Prompter = spec.Prompter
	}
	return r, nil
}

// Build builds one site's backend in its spec's mode and returns it with
// what to close at the end: in process (the default) the built-in's value
// itself; isolated (spec.Isolate) or external (spec.Path) a Supervisor
// keeping the plugin process alive behind one stable backend. Every mode
// starts from the same BackendConfig, so every field reaches the backend
// whichever way it runs.
func Build(ctx context.Context, spec BackendSpec, opts BuildOptions) (backends.Backend, io.Closer, error) {
	if spec.mode() != ModeInProcess {
		if _, err := resolve(spec, nil); err != nil {
			return nil, nil, err
		}
		sup, err := Supervise(ctx, spec, SuperviseOptions{OnEvent: opts.OnEvent})
		if err != nil {
			return nil, nil, err
		}
		return sup, sup, nil
	}
	b, err := buildInProcess(ctx, spec, opts.Engine)
	if err != nil {
		return nil, nil, err
	}
	c, _ := b.(io.Closer)
	return b, c, nil
}

// buildInProcess builds a built-in in gridsub's own process.
func buildInProcess(ctx context.Context, spec BackendSpec, engine *simbackend.Engine) (backends.Backend, error) {
	r, err := resolve(spec, engine)
	if err != nil {
		return nil, err
	}
	return builtinBackends[r.Builtin].open(ctx, r, engine)
}

// wireConfig is the JSON a plugin is configured with.
func (s *BackendSpec) wireConfig() ([]byte, error) {
	raw, err := json.Marshal(s.Config)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: encoding its configuration: %w", s.Config.Name, err)
	}
	return raw, nil
}

// siteConfigError is a site's description that no backend can be built
// from. It is backends.ErrInvalidSpec (errors.Is), so it keeps its identity
// across the plugin boundary (the wire's INVALID_SPEC) and is never
// retried, and its message speaks of the site, not of a job.
type siteConfigError struct{ err error }

func siteConfigErr(format string, args ...any) error {
	return &siteConfigError{fmt.Errorf(format, args...)}
}

func (e *siteConfigError) Error() string        { return e.err.Error() }
func (e *siteConfigError) Unwrap() error        { return e.err }
func (e *siteConfigError) Is(target error) bool { return target == backends.ErrInvalidSpec }

func decodeConfig(raw []byte) (*BackendConfig, error) {
	var c BackendConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, siteConfigErr("the plugin's configuration is not valid JSON: %w", err)
	}
	if c.Name == "" {
		return nil, siteConfigErr("the plugin's configuration names no site (name)")
	}
	return &c, nil
}

// sshConfig is the transport configuration of a site reached over SSH,
// with the staging limits every transfer keeps; kind names the backend in
// errors. The connection is lazy: a site that is down at start does not
// stop the others (the broker sees it down and uses it once it answers);
// host key and authentication errors still stop everything.
func sshConfig(c *BackendConfig, kind string, log *slog.Logger) (*transport.Config, error) {
	if c.SSH == nil || c.SSH.Host == "" {
		return nil, siteConfigErr("site %s: a %s site needs an ssh section (host, port, user, key_file, known_hosts)", c.Name, kind)
	}
	ssh := &transport.Config{Host: c.SSH.Host, Port: c.SSH.Port, User: c.SSH.User, KeyFiles: c.SSH.KeyFiles,
		KnownHosts: c.SSH.KnownHosts, UseAgent: c.SSH.Agent, InsecureIgnoreHostKey: c.SSH.InsecureIgnoreHostKey,
		MaxSessions: c.SSH.MaxSessions, Logger: log.With("site", c.Name), Lazy: true,
		SSHConfig: c.SSH.SSHConfig, CertFiles: c.SSH.CertFiles, ProxyJump: c.SSH.ProxyJump}
	if ssh.SSHConfig == "default" {
		ssh.SSHConfig = transport.SSHConfigDefault
	}
	if st := c.Staging; st != nil {
		if st.MaxFileSize < 0 || st.MaxJobBytes < 0 || st.MinRate < 0 || st.MinTime < 0 {
			return nil, siteConfigErr("site %s: negative staging limit %+v", c.Name, *st)
		}
		ssh.MaxFileSize, ssh.MinTransferRate, ssh.MinTransferTime = st.MaxFileSize, st.MinRate, st.MinTime
	}
	return ssh, nil
}

func resolveSlurm(c *BackendConfig, _ *simbackend.Engine, log *slog.Logger) (*Resolved, error) {
	ssh, err := sshConfig(c, "slurm", log)
	if err != nil {
		return nil, err
	}
	bud, cmdTimeout, err := sshBudget(c)
	if err != nil {
		return nil, err
	}
	cfg := &slurm.Config{Name: c.Name, Partition: c.Partition, Account: c.Account, RemoteDir: c.RemoteDir, User: c.SSH.User,
		Logger: ssh.Logger, MaxFileSize: ssh.MaxFileSize, Budget: bud, CommandTimeout: cmdTimeout, NativeArrays: c.NativeArrays}
	if c.Staging != nil {
		cfg.MaxJobBytes = c.Staging.MaxJobBytes
	}
	return &Resolved{Config: *c, SSH: ssh, Slurm: cfg}, nil
}

func openSlurm(ctx context.Context, r *Resolved, _ *simbackend.Engine) (backends.Backend, error) {
	b, err := slurm.Connect(ctx, *r.Slurm, *r.SSH)
	if err != nil {
		return nil, err
	}
	return slurmBackend{b}, nil
}

// slurmBackend is the built-in SLURM backend as the catalog hands it out:
// it says its Kind (for the Configure reply) and declares its
// capabilities; every method of the backend it embeds is promoted.
type slurmBackend struct{ *slurm.Backend }

func (slurmBackend) Kind() string                        { return "slurm" }
func (slurmBackend) Capabilities() backends.Capabilities { return sshCaps }

func resolvePBS(c *BackendConfig, _ *simbackend.Engine, log *slog.Logger) (*Resolved, error) {
	ssh, err := sshConfig(c, "pbs", log)
	if err != nil {
		return nil, err
	}
	bud, cmdTimeout, err := sshBudget(c)
	if err != nil {
		return nil, err
	}
	cfg := &pbs.Config{Name: c.Name, Queue: c.Partition, Account: c.Account, RemoteDir: c.RemoteDir, User: c.SSH.User,
		BinDir: c.BinDir, Logger: ssh.Logger, Budget: bud, CommandTimeout: cmdTimeout, NativeArrays: c.NativeArrays}
	if c.Staging != nil {
		cfg.MaxJobBytes = c.Staging.MaxJobBytes
	}
	return &Resolved{Config: *c, SSH: ssh, PBS: cfg}, nil
}

func openPBS(ctx context.Context, r *Resolved, _ *simbackend.Engine) (backends.Backend, error) {
	b, err := pbs.Connect(ctx, *r.PBS, *r.SSH)
	if err != nil {
		return nil, err
	}
	return pbsBackend{b}, nil
}

// pbsBackend is the built-in PBS backend as the catalog hands it out,
// like slurmBackend.
type pbsBackend struct{ *pbs.Backend }

func (pbsBackend) Kind() string                        { return "pbs" }
func (pbsBackend) Capabilities() backends.Capabilities { return sshCaps }

// resolveLocal describes a local site: its slots are its nodes (0: one per
// core of this machine, each of one core unless cores_per_node says
// otherwise) and its job directories lie under remote_dir, which the
// configuration fills in (<state_dir>/sites/<name>) when the file leaves it
// out.
func resolveLocal(c *BackendConfig, _ *simbackend.Engine, log *slog.Logger) (*Resolved, error) {
	if c.SSH != nil {
		return nil, siteConfigErr("site %s: a local site runs its jobs on this machine; remove its ssh section", c.Name)
	}
	if c.RemoteDir == "" {
		return nil, siteConfigErr("site %s: a local site needs remote_dir, the directory of its job directories", c.Name)
	}
	if c.Nodes < 0 || c.CoresPerNode < 0 {
		return nil, siteConfigErr("site %s: nodes and cores_per_node must not be negative", c.Name)
	}
	slots, cores := c.Nodes, c.CoresPerNode
	if slots == 0 {
		slots = runtime.NumCPU()
	}
	if cores == 0 {
		cores = 1
	}
	cfg := &local.Config{Name: c.Name, Root: c.RemoteDir, Slots: slots, CoresPerNode: cores, Logger: log.With("site", c.Name)}
	if c.Staging != nil {
		cfg.MaxInputBytes, cfg.MaxOutputBytes = c.Staging.MaxFileSize, c.Staging.MaxFileSize
	}
	return &Resolved{Config: *c, Local: cfg}, nil
}

func openLocal(_ context.Context, r *Resolved, _ *simbackend.Engine) (backends.Backend, error) {
	s, err := local.New(*r.Local)
	if err != nil {
		return nil, siteConfigErr("site %s: %w", r.Local.Name, err)
	}
	return localBackend{s}, nil
}

// localBackend is the built-in local site as the catalog hands it out,
// like slurmBackend.
type localBackend struct{ *local.Site }

func (localBackend) Kind() string                        { return "local" }
func (localBackend) Capabilities() backends.Capabilities { return localCaps }

// defaultSim is the engine of a simulated site served as a plugin whose
// configuration names none.
var defaultSim = SimConfig{Epoch: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Seed: 1}

func resolveSim(c *BackendConfig, engine *simbackend.Engine, _ *slog.Logger) (*Resolved, error) {
	r := &Resolved{Config: *c, Sim: &simbackend.SiteConfig{Name: c.Name, Nodes: c.Nodes, CoresPerNode: c.CoresPerNode,
		H: c.H, MemPerNode: c.MemPerNode, GPUsPerNode: c.GPUsPerNode}}
	if engine == nil {
		sc := defaultSim
		if c.Sim != nil {
			sc = *c.Sim
		}
		r.SimEngine = &sc
	}
	return r, nil
}

// openSim builds a simulated site: on the host's shared engine a plain
// simbackend.Site (the broker drives the engine); else a SimSite with an
// engine of its own, which pushes its changes and is driven by the Clock
// RPC.
func openSim(_ context.Context, r *Resolved, engine *simbackend.Engine) (backends.Backend, error) {
	cfg := *r.Sim
	if engine != nil {
		site, err := simbackend.NewSite(engine, cfg)
		if err != nil {
			return nil, siteConfigErr("site %s: %w", cfg.Name, err)
		}
		return site, nil
	}
	s := &SimSite{e: simbackend.NewEngine(r.SimEngine.Epoch, r.SimEngine.Seed)}
	cfg.OnChange = s.publish
	site, err := simbackend.NewSite(s.e, cfg)
	if err != nil {
		return nil, siteConfigErr("site %s: %w", cfg.Name, err)
	}
	s.Site = site
	return s, nil
}
