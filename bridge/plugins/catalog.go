package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge/plugins/backendrpc"
	"github.com/gridsub/gridsub/simbackend"
)

// BackendConfig is what the host tells a backend plugin at Configure, as
// JSON: the site's configuration. It never holds a secret: SSH keys travel
// as file paths (the plugin runs as the same user on the same machine).
type BackendConfig struct {
	Name         string  `json:"name"`
	Kind         string  `json:"kind"`
	Nodes        int     `json:"nodes,omitempty"`
	CoresPerNode int     `json:"cores_per_node,omitempty"`
	H            float64 `json:"h,omitempty"`
	Partition    string  `json:"partition,omitempty"`
	RemoteDir    string  `json:"remote_dir,omitempty"`
	// BinDir is a PBS site's directory of client commands (pbs.Config.BinDir).
	BinDir string     `json:"bin_dir,omitempty"`
	SSH    *SSHConfig `json:"ssh,omitempty"`
	Sim    *SimConfig `json:"sim,omitempty"`
	// Staging bounds every transfer of a site reached over SSH, as the
	// configuration's staging section does in process.
	Staging *StagingConfig `json:"staging,omitempty"`
	// Options is the site's free-form `plugin.options`, for an external
	// plugin to read as it likes.
	Options json.RawMessage `json:"options,omitempty"`
}

// SSHConfig is how a plugin reaches its site's login node.
type SSHConfig struct {
	Host                  string   `json:"host"`
	Port                  int      `json:"port,omitempty"`
	User                  string   `json:"user,omitempty"`
	KeyFiles              []string `json:"key_files,omitempty"`
	KnownHosts            []string `json:"known_hosts,omitempty"`
	Agent                 bool     `json:"agent,omitempty"`
	InsecureIgnoreHostKey bool     `json:"insecure_ignore_host_key,omitempty"`
	MaxSessions           int      `json:"max_sessions,omitempty"`
}

// StagingConfig is the configuration's staging limits (transport.Config
// MaxFileSize, MinTransferRate, MinTransferTime; slurm.Config
// MaxJobBytes). Zero fields are the backend's defaults.
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

// builtinBackends are the backends the gridsub binary serves itself.
var builtinBackends = map[string]backendrpc.Factory{
	"slurm": slurmFactory,
	"pbs":   pbsFactory,
	"sim":   simFactory,
}

// BuiltinBackends lists the built-in backends' names.
func BuiltinBackends() []string {
	var out []string
	for n := range builtinBackends {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// BuiltinBackend returns the factory of the built-in backend name.
func BuiltinBackend(name string) (backendrpc.Factory, error) {
	f, ok := builtinBackends[name]
	if !ok {
		return nil, fmt.Errorf("%w: no built-in backend %q (built-ins: %v)", ErrUnknownPlugin, name, BuiltinBackends())
	}
	return f, nil
}

func decodeConfig(raw []byte) (*BackendConfig, error) {
	var c BackendConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%w: the plugin's configuration is not valid JSON: %w", backends.ErrInvalidSpec, err)
	}
	if c.Name == "" {
		return nil, fmt.Errorf("%w: the plugin's configuration names no site (name)", backends.ErrInvalidSpec)
	}
	return &c, nil
}

// sshConfig is the transport configuration of a site reached over SSH,
// with the staging limits every transfer keeps; kind names the backend in
// errors.
func sshConfig(c *BackendConfig, kind string) (transport.Config, error) {
	if c.SSH == nil || c.SSH.Host == "" {
		return transport.Config{}, fmt.Errorf("%w: site %s: a %s backend needs ssh.host", backends.ErrInvalidSpec, c.Name, kind)
	}
	ssh := transport.Config{Host: c.SSH.Host, Port: c.SSH.Port, User: c.SSH.User, KeyFiles: c.SSH.KeyFiles,
		KnownHosts: c.SSH.KnownHosts, UseAgent: c.SSH.Agent, InsecureIgnoreHostKey: c.SSH.InsecureIgnoreHostKey,
		MaxSessions: c.SSH.MaxSessions, Logger: slog.Default().With("site", c.Name), Lazy: true}
	if st := c.Staging; st != nil {
		if st.MaxFileSize < 0 || st.MaxJobBytes < 0 || st.MinRate < 0 || st.MinTime < 0 {
			return transport.Config{}, fmt.Errorf("%w: site %s: negative staging limit %+v", backends.ErrInvalidSpec, c.Name, *st)
		}
		ssh.MaxFileSize, ssh.MinTransferRate, ssh.MinTransferTime = st.MaxFileSize, st.MinRate, st.MinTime
	}
	return ssh, nil
}

func slurmFactory(ctx context.Context, raw []byte) (backends.Backend, error) {
	c, err := decodeConfig(raw)
	if err != nil {
		return nil, err
	}
	ssh, err := sshConfig(c, "slurm")
	if err != nil {
		return nil, err
	}
	cfg := slurm.Config{Name: c.Name, Partition: c.Partition, RemoteDir: c.RemoteDir, User: c.SSH.User, Logger: ssh.Logger}
	if c.Staging != nil {
		cfg.MaxJobBytes = c.Staging.MaxJobBytes
	}
	b, err := slurm.Connect(ctx, cfg, ssh)
	if err != nil {
		return nil, err
	}
	return kinded{b, "slurm"}, nil
}

// kinded adds the Kind the Configure reply reports; it keeps every
// capability of the backend it wraps (the server asks CapabilitiesOf on the
// inner value through the embedded interface's methods).
type kinded struct {
	*slurm.Backend
	kind string
}

func (k kinded) Kind() string { return k.kind }

func pbsFactory(ctx context.Context, raw []byte) (backends.Backend, error) {
	c, err := decodeConfig(raw)
	if err != nil {
		return nil, err
	}
	ssh, err := sshConfig(c, "pbs")
	if err != nil {
		return nil, err
	}
	b, err := pbs.Connect(ctx, pbs.Config{Name: c.Name, Queue: c.Partition, RemoteDir: c.RemoteDir, User: c.SSH.User,
		BinDir: c.BinDir, Logger: ssh.Logger}, ssh)
	if err != nil {
		return nil, err
	}
	return pbsKinded{b}, nil
}

// pbsKinded is a PBS backend that says its Kind, like kinded for SLURM.
type pbsKinded struct{ *pbs.Backend }

func (pbsKinded) Kind() string { return "pbs" }

func simFactory(_ context.Context, raw []byte) (backends.Backend, error) {
	c, err := decodeConfig(raw)
	if err != nil {
		return nil, err
	}
	sc := SimConfig{Epoch: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Seed: 1}
	if c.Sim != nil {
		sc = *c.Sim
	}
	cores, h := c.CoresPerNode, c.H
	if cores <= 0 {
		cores = 1
	}
	if h <= 0 {
		h = 1
	}
	s := &SimSite{e: simbackend.NewEngine(sc.Epoch, sc.Seed)}
	site, err := simbackend.NewSite(s.e, simbackend.SiteConfig{Name: c.Name, Nodes: c.Nodes, CoresPerNode: cores, H: h,
		OnChange: s.publish})
	if err != nil {
		return nil, fmt.Errorf("%w: site %s: %w", backends.ErrInvalidSpec, c.Name, err)
	}
	s.Site = site
	return s, nil
}

// SimSite is a simulated site with an engine of its own, as the sim plugin
// serves it: a backends.Watcher (its OnChange notes fan out to every
// watcher) and a backendrpc.SimClock.
type SimSite struct {
	*simbackend.Site
	e *simbackend.Engine

	mu       sync.Mutex
	watchers []*func(backends.JobStatus)
}

var (
	_ backends.Watcher    = (*SimSite)(nil)
	_ backends.Finder     = (*SimSite)(nil)
	_ backends.Reserver   = (*SimSite)(nil)
	_ backendrpc.SimClock = (*SimSite)(nil)
)

// Kind is "sim".
func (s *SimSite) Kind() string { return "sim" }

func (s *SimSite) publish(st backends.JobStatus) {
	s.mu.Lock()
	ws := slices.Clone(s.watchers)
	s.mu.Unlock()
	for _, w := range ws {
		(*w)(st)
	}
}

// Watch implements backends.Watcher.
func (s *SimSite) Watch(ctx context.Context, fn func(backends.JobStatus)) error {
	var mu sync.Mutex // one call of fn at a time
	f := func(st backends.JobStatus) {
		mu.Lock()
		defer mu.Unlock()
		fn(st)
	}
	s.mu.Lock()
	s.watchers = append(s.watchers, &f)
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	s.watchers = slices.DeleteFunc(s.watchers, func(w *func(backends.JobStatus)) bool { return w == &f })
	s.mu.Unlock()
	return ctx.Err()
}

// AdvanceTo implements backendrpc.SimClock.
func (s *SimSite) AdvanceTo(ctx context.Context, until time.Time) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return s.e.Now(), err
	}
	if until.After(s.e.Now()) {
		s.e.RunUntil(until)
	}
	return s.e.Now(), nil
}
