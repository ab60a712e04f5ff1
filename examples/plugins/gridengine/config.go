package gridengine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge/plugins"
)

// Kind is the backend's kind: a site's `kind:` in gridsub's configuration
// and SiteInfo.Kind.
const Kind = "gridengine"

// ErrConfig marks an error in the site's configuration (with
// backends.ErrInvalidSpec).
var ErrConfig = errors.New("gridengine: bad site configuration")

// Config describes one Grid Engine site as the backend sees it.
type Config struct {
	Name string // site name (Backend.Name)
	// Queue is the cluster queue jobs go to (qsub -q) and whose slots
	// make the site's size; "" = the qmaster's choice, every queue's slots.
	Queue string
	// PE is the parallel environment of a job of more than one slot
	// (qsub -pe PE N); "" = the site runs single-slot jobs only.
	PE string
	// Project is the project (qsub -P) of a job that names no account;
	// "" = none.
	Project string
	// SlotsPerNode: a gridsub node is this many slots (default 1).
	SlotsPerNode int
	// RemoteDir holds the job directories; User is the login user (the
	// status command lists this user's jobs).
	RemoteDir, User string
	// BinDir is the absolute directory of the Grid Engine client commands
	// (DefaultBinDir when "").
	BinDir string
	// Location is the qmaster's time zone (qstat, qacct and qrstat print
	// local times); nil = time.Local.
	Location *time.Location
	// Now is the clock for reservation start times; nil = time.Now.
	Now func() time.Time
	// NativeArrays: the elements of a grid array that reach the site in
	// one batch go as one array job (qsub -t; sshbatch.Backend.SubmitArrays).
	NativeArrays  bool
	Logger        *slog.Logger
	MaxJobBytes   int64
	BatchSessions int
}

// Backend drives one Grid Engine site: the shared SSH batch backend in
// the Grid Engine dialect.
type Backend = sshbatch.Backend

// New builds the backend over run and stage as sshbatch.New does.
func New(cfg Config, run backends.Runner, stage func(root string) backends.Stager) *Backend {
	return sshbatch.New(shared(cfg), newDialect(cfg), run, stage)
}

// Connect dials the site's login node as sshbatch.Dial does (cfg.User
// defaults to ssh.User); Close the backend to close the connection.
func Connect(ctx context.Context, cfg Config, ssh transport.Config) (*Backend, error) {
	if cfg.User == "" {
		cfg.User = ssh.User
	}
	return sshbatch.Dial(ctx, shared(cfg), newDialect(cfg), ssh)
}

func shared(cfg Config) sshbatch.Config {
	return sshbatch.Config{Name: cfg.Name, RemoteDir: cfg.RemoteDir, User: cfg.User, Logger: cfg.Logger,
		MaxJobBytes: cfg.MaxJobBytes, BatchSessions: cfg.BatchSessions, NativeArrays: cfg.NativeArrays}
}

// Options is the site's `plugin.options` section.
type Options struct {
	PE       string `json:"pe"`        // parallel environment (Config.PE)
	Project  string `json:"project"`   // default project (Config.Project); the site's account is used when unset
	TimeZone string `json:"time_zone"` // the qmaster's zone, an IANA name ("UTC", "Europe/Berlin"); default the plugin's local zone
	BinDir   string `json:"bin_dir"`   // Config.BinDir; the site's bin_dir is used when unset
	// NativeArrays: Config.NativeArrays (the elements of a grid array
	// that one batch brings go as one qsub -t).
	NativeArrays bool `json:"native_arrays"`
}

// FromConfig builds the site from gridsub's configuration of it (the JSON
// the host sends when it configures the plugin): name, partition (the
// queue), account (the default project), cores_per_node (slots per node),
// remote_dir, bin_dir, ssh, staging, and plugin.options (Options). Unknown
// options are refused, so a misspelt one is not silently ignored.
func FromConfig(ctx context.Context, raw []byte) (backends.Backend, error) {
	var c plugins.BackendConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%w: %w: the site configuration is not valid JSON: %w", ErrConfig, backends.ErrInvalidSpec, err)
	}
	var o Options
	if len(c.Options) > 0 && !bytes.Equal(bytes.TrimSpace(c.Options), []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(c.Options))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return nil, fmt.Errorf("%w: %w: site %s: plugin.options: %w (known: pe, project, time_zone, bin_dir, native_arrays)", ErrConfig, backends.ErrInvalidSpec, c.Name, err)
		}
	}
	cfg := Config{Name: c.Name, Queue: c.Partition, PE: o.PE, Project: c.Account, SlotsPerNode: c.CoresPerNode,
		RemoteDir: c.RemoteDir, BinDir: c.BinDir, NativeArrays: o.NativeArrays}
	if o.Project != "" {
		cfg.Project = o.Project
	}
	if o.BinDir != "" {
		cfg.BinDir = o.BinDir
	}
	if o.TimeZone != "" {
		loc, err := time.LoadLocation(o.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("%w: %w: site %s: plugin.options.time_zone %q: %w", ErrConfig, backends.ErrInvalidSpec, c.Name, o.TimeZone, err)
		}
		cfg.Location = loc
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	ssh, err := c.SSHTransport(Kind, slog.Default())
	if err != nil {
		return nil, fmt.Errorf("%w: %w: %w", ErrConfig, backends.ErrInvalidSpec, err)
	}
	if c.Staging != nil {
		cfg.MaxJobBytes = c.Staging.MaxJobBytes
	}
	cfg.Logger = ssh.Logger
	return Connect(ctx, cfg, *ssh)
}

// check refuses a configuration whose words would reach qsub as options
// or whose bin directory is not absolute.
func (c Config) check() error {
	bad := func(what, v string) error {
		return fmt.Errorf("%w: %w: site %s: %s %q must be a Grid Engine name (letters, digits, '.', '_', '-')", ErrConfig, backends.ErrInvalidSpec, c.Name, what, v)
	}
	for _, f := range []struct{ what, v string }{{"partition (queue)", c.Queue}, {"plugin.options.pe", c.PE}, {"project", c.Project}} {
		if f.v != "" && !queueRe.MatchString(f.v) {
			return bad(f.what, f.v)
		}
	}
	if c.BinDir != "" && c.BinDir[0] != '/' {
		return fmt.Errorf("%w: %w: site %s: bin_dir %q must be an absolute path", ErrConfig, backends.ErrInvalidSpec, c.Name, c.BinDir)
	}
	if c.SlotsPerNode < 0 {
		return fmt.Errorf("%w: %w: site %s: cores_per_node (slots per node) must be >= 0", ErrConfig, backends.ErrInvalidSpec, c.Name)
	}
	return nil
}
