package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"

	"github.com/gridsub/gridsub/configs"
	"github.com/gridsub/gridsub/policy"
)

// Site kinds.
const (
	KindSim   = "sim"   // a simulated site on virtual time (simbackend)
	KindSlurm = "slurm" // a SLURM cluster reached over SSH
	KindPBS   = "pbs"   // a PBS cluster reached over SSH
	KindLocal = "local" // real processes on this machine (backends/local)
)

// Kinds lists the valid site kinds.
var Kinds = []string{KindLocal, KindSim, KindSlurm, KindPBS}

// Config is a whole gridsub configuration: the sites, the network between
// them, the broker and the simulator.
type Config struct {
	Sites   []Site  `mapstructure:"sites"`
	Network Network `mapstructure:"network"`
	Broker  Broker  `mapstructure:"broker"`
	Sim     Sim     `mapstructure:"sim"`
	Staging Staging `mapstructure:"staging"`
	// Users bound each user's jobs (bridge.UserLimits): by user name, and
	// "default" for every user without an entry (docs/users.md).
	Users map[string]UserLimits `mapstructure:"users"`
	Store Store                 `mapstructure:"store"`

	// Source names where the configuration came from ("configs/testbed.yaml
	// (built in)" or the file path); it is not read from the file.
	Source string `mapstructure:"-"`
}

// UserLimits are one user's limits (bridge.UserLimits); 0 is no bound.
type UserLimits struct {
	MaxQueued         int `mapstructure:"max_queued"`
	MaxRunning        int `mapstructure:"max_running"`
	MaxRunningPerSite int `mapstructure:"max_running_per_site"`
	// Shares weigh the user in fair share (broker.order: fairshare).
	Shares float64 `mapstructure:"shares"`
}

// Site is one batch-system cluster.
type Site struct {
	Name string `mapstructure:"name"` // unique; [A-Za-z0-9][A-Za-z0-9._-]{0,63}
	Kind string `mapstructure:"kind"` // sim | slurm | pbs
	// Nodes is the number of schedulable nodes: required for sim sites; for
	// slurm/pbs sites 0 means "ask the site" (its Info).
	Nodes        int     `mapstructure:"nodes"`
	CoresPerNode int     `mapstructure:"cores_per_node"` // default 1
	H            float64 `mapstructure:"h"`              // heterogeneity factor > 0; default 1 (the reference machine)
	// MemPerNode and GPUsPerNode describe one node: the simulated site
	// models them; for slurm/pbs sites the site's own report (sinfo,
	// pbsnodes) wins once it is asked, and these serve `gridsub validate`.
	// 0 memory = not known; 0 GPUs = none.
	MemPerNode  Size   `mapstructure:"mem_per_node"`
	GPUsPerNode int    `mapstructure:"gpus_per_node"`
	Area        string `mapstructure:"area"` // local area for broker.policy trust-min-min (paper 002); "" = its own
	// For slurm and pbs sites:
	SSH       *SSH   `mapstructure:"ssh"`
	Partition string `mapstructure:"partition"`  // partition (SLURM) or queue (PBS); "" = the site's default
	Account   string `mapstructure:"account"`    // account charged for a job whose file names none; "" = none
	RemoteDir string `mapstructure:"remote_dir"` // absolute directory at the site under which job directories are made
	// BinDir is, for pbs sites, the absolute directory of the PBS client
	// commands (default /opt/pbs/bin); they are never called by bare name.
	BinDir string `mapstructure:"bin_dir"`
	// NativeArrays (slurm and pbs sites, in process): the elements of a
	// grid array bound for the site go as one native array (sbatch
	// --array, qsub -J) instead of one batch job each; docs/arrays.md.
	// Default on for a slurm or pbs site in process (UsesNativeArrays);
	// false turns them off.
	NativeArrays *bool `mapstructure:"native_arrays"`
	// Isolate runs the site's built-in backend out of process (gridsub
	// re-executes itself as a plugin, supervised): a crash in the backend
	// cannot take gridsub down. Only for slurm and pbs sites.
	Isolate bool `mapstructure:"isolate"`
	// Plugin loads the site's backend from an external plugin executable
	// (docs/plugins.md); kind is then the plugin's own.
	Plugin *Plugin `mapstructure:"plugin"`
	// Budget is the slurm/pbs site's scheduler-command budget
	// (docs/citizen.md); unset fields take the defaults.
	Budget *Budget `mapstructure:"budget"`
}

// Budget is one site's scheduler-command budget (sshbatch.BudgetConfig).
type Budget struct {
	PerMinute      float64       `mapstructure:"per_minute"`      // steady-state commands a minute (default 6)
	Burst          int           `mapstructure:"burst"`           // commands at once after a quiet spell (default 6)
	PollFast       time.Duration `mapstructure:"poll_fast"`       // status poll interval while a change is expected (default 10s)
	PollSlow       time.Duration `mapstructure:"poll_slow"`       // ... when none is (default 20s)
	Settle         time.Duration `mapstructure:"settle"`          // polls stay fast this long after a submission or change (default 2m)
	CapacityEvery  time.Duration `mapstructure:"capacity_every"`  // capacity (sinfo/pbsnodes) refresh (default 2m)
	BackoffMax     time.Duration `mapstructure:"backoff_max"`     // the longest back-off after an overload answer (default 1m)
	CommandTimeout time.Duration `mapstructure:"command_timeout"` // deadline of one remote command (default 30s)
}

// Plugin is an external backend plugin executable.
type Plugin struct {
	Path   string   `mapstructure:"path"`   // the executable (absolute, or relative to the working directory)
	SHA256 string   `mapstructure:"sha256"` // its hex SHA-256, checked before it starts (required)
	Args   []string `mapstructure:"args"`   // its arguments
	// Options is passed to the plugin as its configuration's "options".
	Options map[string]any `mapstructure:"options"`
	// StartTimeout bounds its handshake (0 = 10s).
	StartTimeout time.Duration `mapstructure:"start_timeout"`
}

// SSH is how gridsub reaches a site's login node. There is deliberately no
// password field: authentication is by key file or ssh-agent.
type SSH struct {
	Host                  string `mapstructure:"host"`
	Port                  int    `mapstructure:"port"` // default 22
	User                  string `mapstructure:"user"`
	KeyFile               string `mapstructure:"key_file"`                 // private key file (unencrypted, or use the agent)
	KnownHosts            string `mapstructure:"known_hosts"`              // known_hosts file checked against the host key
	Agent                 bool   `mapstructure:"agent"`                    // also offer the keys of $SSH_AUTH_SOCK
	InsecureIgnoreHostKey bool   `mapstructure:"insecure_ignore_host_key"` // testing only: accept a host known_hosts does not list (a listed host must still match)
	MaxSessions           int    `mapstructure:"max_sessions"`             // concurrent sessions on the one connection; default 8
	// SSHConfig resolves host through the OpenSSH client configuration
	// (ssh -G): "default" (~/.ssh/config, /etc/ssh/ssh_config) or a file;
	// the fields given here win, the others (port, user, key_file,
	// known_hosts, cert_file, proxy_jump, ...) come from it. Empty: none.
	SSHConfig string `mapstructure:"ssh_config"`
	CertFile  string `mapstructure:"cert_file"`  // OpenSSH user certificate (default: <key_file>-cert.pub when present)
	ProxyJump string `mapstructure:"proxy_jump"` // jump hosts "[user@]host[:port],...", as OpenSSH's ProxyJump
}

// Link is the network path between two sites, given in the file.
type Link struct {
	From      string        `mapstructure:"from"`
	To        string        `mapstructure:"to"`
	Bandwidth Bandwidth     `mapstructure:"bandwidth"`
	Latency   time.Duration `mapstructure:"latency"`
}

// Path is a bandwidth and latency.
type Path struct {
	Bandwidth Bandwidth     `mapstructure:"bandwidth"`
	Latency   time.Duration `mapstructure:"latency"`
}

// Network describes the paths between sites. A link applies in both
// directions unless the reverse direction is listed too; every pair not
// listed uses Default. A site to itself is free (SPEC.md §1: t_trans = 0).
type Network struct {
	Default         Path    `mapstructure:"default"`
	Links           []Link  `mapstructure:"links"`
	MultiSiteFactor float64 `mapstructure:"multi_site_factor"` // p >= 1 of SPEC.md §1 equation (3)
}

// Store chooses the broker's durable store. Kind "sqlite" (the default)
// is one file in broker.state_dir; "postgres" is a PostgreSQL database
// (DSN) that several brokers may share. The password is never here: DSN
// must not carry one; PasswordFile (a 0600 file) or PasswordEnv (the name
// of an environment variable) says where it is.
type Store struct {
	Kind         string `mapstructure:"kind"`          // sqlite | postgres
	DSN          string `mapstructure:"dsn"`           // postgres: "host=db user=gridsub dbname=gridsub sslmode=verify-full" or postgres://user@host/db
	PasswordFile string `mapstructure:"password_file"` // postgres: file holding the password (first line), mode 0600
	PasswordEnv  string `mapstructure:"password_env"`  // postgres: environment variable holding the password
	// Shared makes this one of several brokers on the one PostgreSQL
	// database: any of them accepts submissions and answers reads, the one
	// holding the lease plans and dispatches (docs/store.md).
	Shared bool          `mapstructure:"shared"`
	Lease  time.Duration `mapstructure:"lease"` // shared: how long the leader's lease lasts unrenewed (default 3s, 1s to 1m)
}

// Broker configures the broker.
type Broker struct {
	Policy   string        `mapstructure:"policy"`   // planner name (the policy registry checks it), or plugin:... (PolicySHA256)
	Interval time.Duration `mapstructure:"interval"` // scheduling interval Δt, > 0
	// PollInterval is how often each site is asked for the status of its
	// jobs (one batched call per site), > 0.
	PollInterval time.Duration `mapstructure:"poll_interval"`
	StateDir     string        `mapstructure:"state_dir"` // durable state; default $XDG_STATE_HOME/gridsub or ~/.local/state/gridsub
	Socket       string        `mapstructure:"socket"`    // the broker's API socket; default <state_dir>/gridsub.sock
	// OutputRoot is the one directory under which the daemon writes
	// fetched outputs (bridge.Options.OutputRoot): a client's output
	// directory must lie inside it, a relative one is taken below it.
	// Default $HOME/gridsub-out. Overridden by GRIDSUB_BROKER_OUTPUT_ROOT.
	OutputRoot string `mapstructure:"output_root"`
	// InputRoots are the directories input files may be staged from
	// (bridge.Options.InputRoots). Default: [$HOME]. Hidden files and
	// directories below a root (.ssh, .gnupg, ...) are refused anyway.
	InputRoots []string `mapstructure:"input_roots"`
	// Cron holds robfig/cron specs of periodic broker work by name, e.g.
	// trust_decay: "@every 10m". Each spec is checked at load.
	Cron map[string]string `mapstructure:"cron"`
	// TLSCert and TLSKey are PEM files (certificate chain, private key of
	// mode 0600) that make `gridsub serve --listen` speak TLS 1.2 or newer;
	// both or neither. Without them a --listen address that is not
	// loopback is refused unless InsecurePlaintext is true.
	TLSCert           string `mapstructure:"tls_cert"`
	TLSKey            string `mapstructure:"tls_key"`
	InsecurePlaintext bool   `mapstructure:"insecure_plaintext"`
	// SharedSocket lets every local user connect to the socket (mode
	// 0666): the daemon tells them apart by their peer credentials, and
	// each sees only their own jobs (docs/users.md). The socket's
	// directory must be reachable by them: not the 0700 state directory.
	SharedSocket bool `mapstructure:"shared_socket"`

	// Policy may name a planner plugin instead of a built-in:
	// plugin:/path/to/exe ARGS, or plugin:builtin:NAME (PlannerPluginPrefix).
	// PolicySHA256 is the planner plugin executable's SHA-256 (64 hex
	// digits, quoted), verified before every start; required for
	// plugin:/path. FallbackPolicy is the built-in planner that takes over
	// when the plugin keeps failing or hangs past PolicyTimeout (default
	// greedy-easy); PolicyTimeout bounds one planning call to the plugin
	// (default 30s).
	PolicySHA256   string `mapstructure:"policy_sha256"`
	FallbackPolicy string `mapstructure:"fallback_policy"`
	// Order is the queue-order policy (policy.Order): fcfs (default),
	// fairshare, or a policy plugin as the keys below (OrderSHA256 is a
	// plugin:/path's checksum); FairShareHalfLife how fast past use is
	// forgotten (0: 7 days). docs/users.md.
	Order             string        `mapstructure:"order"`
	OrderSHA256       string        `mapstructure:"order_sha256"`
	FairShareHalfLife time.Duration `mapstructure:"fairshare_half_life"`
	PolicyTimeout     time.Duration `mapstructure:"policy_timeout"`

	// QoS tunes the dependability tiers (SPEC.md §5, bridge.TierOptions).
	QoS QoS `mapstructure:"qos"`

	// Remap moves jobs waiting in a site's queue to a site that can start
	// them now (bridge.RemapOptions, docs/remap.md). Off by default.
	Remap Remap `mapstructure:"remap"`

	// The policy of each extension point beside the planner (policies.go):
	// the feasibility check at submission, the advance-reservation
	// mechanism, the trust model, the tier rule and copy plan;
	// broker.remap.policy names the remapping policy. Each is a built-in
	// (policy registry name) or, as broker.policy, a policy plugin:
	// plugin:/path/to/exe ARGS, whose SHA-256 (64 hex digits, quoted) the
	// sibling *_sha256 key gives, or plugin:builtin:NAME (a built-in of
	// the kind run out of process as `gridsub plugin serve KIND NAME`).
	Feasibility       string `mapstructure:"feasibility"`
	FeasibilitySHA256 string `mapstructure:"feasibility_sha256"`
	Admission         string `mapstructure:"admission"`
	AdmissionSHA256   string `mapstructure:"admission_sha256"`
	Trust             string `mapstructure:"trust"`
	TrustSHA256       string `mapstructure:"trust_sha256"`
	Tiering           string `mapstructure:"tiering"`
	TieringSHA256     string `mapstructure:"tiering_sha256"`
}

// Remap configures repetitive mapping of waiting jobs. Enabled turns it
// on; MinGain is the least predicted gain worth a move (0 = 10m),
// MaxMoves the most moves of one job (0 = 2), Interval the least time
// between two passes (0 = every scheduling cycle). Off by default: a move
// gives up the job's place (and age) in the first site's queue and
// stages its inputs again, which only the user's centre can judge worth it.
type Remap struct {
	Enabled bool   `mapstructure:"enabled"`
	Policy  string `mapstructure:"policy"` // the remapping policy: a built-in ("" = gain) or a plugin (PolicySHA256)
	// PolicySHA256 is the SHA-256 of a plugin:/path remapping policy.
	PolicySHA256 string        `mapstructure:"policy_sha256"`
	MinGain      time.Duration `mapstructure:"min_gain"`
	MaxMoves     int           `mapstructure:"max_moves"`
	Interval     time.Duration `mapstructure:"interval"`
}

// QoS tunes the dependability tiers: Lambda is λ of the tier rule (0 =
// 1.5), DownAfter how long a site may fail to answer before the jobs it
// runs count as lost (0 = 2m).
type QoS struct {
	Lambda    float64       `mapstructure:"lambda"`
	DownAfter time.Duration `mapstructure:"down_after"`
}

// Staging bounds every file moved to and from the real sites (SFTP stage-in
// and output fetch) and the broker's output fetching.
type Staging struct {
	// MaxFileSize bounds one staged or fetched file; a larger one is
	// refused, a growing or endless one stopped at the limit. Default 10GiB.
	MaxFileSize Size `mapstructure:"max_file_size"`
	// MaxJobBytes bounds the inputs of one job, and its outputs, each way.
	// Default 50GiB.
	MaxJobBytes Size `mapstructure:"max_job_bytes"`
	// MinRate and MinTime make each transfer's deadline: a file of n bytes
	// must move within min_time + n/min_rate, else it is cancelled.
	// Defaults 1MiB/s and 1m.
	MinRate Bandwidth     `mapstructure:"min_rate"`
	MinTime time.Duration `mapstructure:"min_time"`
	// FetchWorkers is how many jobs' outputs are fetched at once, off the
	// scheduling cycle (default 4); FetchTimeout bounds one job's fetch
	// (default 6h).
	FetchWorkers int           `mapstructure:"fetch_workers"`
	FetchTimeout time.Duration `mapstructure:"fetch_timeout"`
}

// Sim configures the simulated sites.
type Sim struct {
	TimeScale float64 `mapstructure:"time_scale"` // virtual seconds per wall second in interactive runs, > 0
	Seed      uint64  `mapstructure:"seed"`       // seed of every random choice
}

// defaults are every default value, by key. Keys listed here can also be
// overridden from the environment: broker.policy by GRIDSUB_BROKER_POLICY,
// sim.time_scale by GRIDSUB_SIM_TIME_SCALE, and so on (dots become
// underscores, upper case). Per-site defaults are in siteDefaults.
var defaults = map[string]any{
	"network.default.bandwidth":  "1MB/s",
	"network.default.latency":    "575ms",
	"network.multi_site_factor":  1.1,
	"broker.policy":              "greedy",
	"broker.policy_sha256":       "",
	"broker.fallback_policy":     "greedy-easy",
	"broker.order":               "fcfs",
	"broker.order_sha256":        "",
	"broker.fairshare_half_life": "168h",
	"broker.policy_timeout":      "30s",
	"broker.feasibility":         "capacity",
	"broker.admission":           "drrm",
	"broker.trust":               "paper002",
	"broker.tiering":             "dgjs",
	"broker.feasibility_sha256":  "",
	"broker.admission_sha256":    "",
	"broker.trust_sha256":        "",
	"broker.tiering_sha256":      "",
	"broker.interval":            "1s",
	"broker.poll_interval":       "2s",
	"broker.state_dir":           "",
	"broker.socket":              "",
	"broker.output_root":         "",
	"broker.tls_cert":            "",
	"broker.tls_key":             "",
	"broker.insecure_plaintext":  false,
	"broker.shared_socket":       false,
	"store.kind":                 "sqlite",
	"store.dsn":                  "",
	"store.password_file":        "",
	"store.password_env":         "",
	"store.shared":               false,
	"store.lease":                "3s",
	"sim.time_scale":             600,
	"staging.max_file_size":      "10GiB",
	"staging.max_job_bytes":      "50GiB",
	"staging.min_rate":           "1MiB/s",
	"staging.min_time":           "1m",
	"staging.fetch_workers":      4,
	"staging.fetch_timeout":      "6h",
	"sim.seed":                   1,
}

// siteDefaults are applied to each site mapping that lacks the key, and
// sshDefaults to each ssh mapping.
var (
	siteDefaults = map[string]any{"h": 1.0, "cores_per_node": 1}
	sshDefaults  = map[string]any{"port": 22, "max_sessions": 8}
)

// EnvName is the environment variable that overrides a defaults key.
func EnvName(key string) string {
	return "GRIDSUB_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// EnvKeys lists the keys that GRIDSUB_* environment variables override.
func EnvKeys() []string {
	keys := make([]string, 0, len(defaults))
	for k := range defaults {
		keys = append(keys, k)
	}
	return sortStrings(keys)
}

// LoadDefault loads the built-in default configuration (configs/local.yaml).
func LoadDefault() (*Config, error) { return Load("") }

// Load reads, expands and validates a configuration. path "" means the
// built-in configs/local.yaml; a path that does not exist but names a
// built-in configuration ("local-slurm" or "local-slurm.yaml") loads that.
// On a validation problem the error is an Errors listing every problem.
func Load(path string) (*Config, error) {
	data, source, err := read(path)
	if err != nil {
		return nil, err
	}
	return Parse(source, data, os.LookupEnv)
}

func read(path string) ([]byte, string, error) {
	if path == "" {
		data, err := configs.Read(configs.Default)
		return data, "configs/" + configs.Default + " (built in)", err
	}
	data, err := readFile(path)
	if err == nil {
		return data, path, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, path, &Error{File: path, Msg: err.Error(), Err: ErrRead}
	}
	if !strings.ContainsRune(path, filepath.Separator) {
		if d, e := configs.Read(path); e == nil {
			return d, "configs/" + strings.TrimSuffix(path, ".yaml") + ".yaml (built in)", nil
		}
	}
	return nil, path, &Error{File: path, Msg: fmt.Sprintf("%v (built-in configurations: %s)", err, strings.Join(configs.Names(), ", ")), Err: ErrRead}
}

// Parse reads a configuration from data. source names it in errors; lookup
// reads the environment (os.LookupEnv in Load; a map in tests) for ${VAR}
// expansion and GRIDSUB_* overrides.
func Parse(source string, data []byte, lookup func(string) (string, bool)) (*Config, error) {
	if len(data) > MaxFileSize {
		return nil, Errors{{File: source, Msg: fmt.Sprintf("%d bytes; a configuration may be at most %d bytes", len(data), MaxFileSize), Err: ErrRead}}
	}
	v := viper.New()
	v.SetConfigType("yaml")
	for k, val := range defaults {
		v.SetDefault(k, val)
	}
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, Errors{{File: source, Msg: fmt.Sprintf("not valid YAML: %v", err), Err: ErrRead}}
	}
	// Environment overrides for the scalar keys, through the lookup so that
	// tests need not touch the process environment.
	for _, k := range EnvKeys() {
		if val, ok := lookup(EnvName(k)); ok {
			v.Set(k, val)
		}
	}
	settings := v.AllSettings()

	p := &loader{source: source, lookup: lookup}
	p.walk(settings, reflect.TypeOf(Config{}), "")
	p.reportMissing()
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	applyListDefaults(settings)

	cfg := &Config{Source: source}
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		ErrorUnused:      true,
		WeaklyTypedInput: true,
		Result:           cfg,
		TagName:          "mapstructure",
	})
	if err != nil {
		return nil, fmt.Errorf("config decoder: %w", err)
	}
	if err := dec.Decode(settings); err != nil {
		return nil, p.decodeErrors(err)
	}
	cfg.Source = source
	if err := cfg.finish(lookup); err != nil {
		return nil, err
	}
	if errs := cfg.validate(); len(errs) > 0 {
		return nil, errs
	}
	return cfg, nil
}

// applyListDefaults fills per-site and per-ssh defaults into the decoded
// settings, so that "h missing" becomes 1 while "h: 0" stays an error.
func applyListDefaults(settings map[string]any) {
	sites, _ := settings["sites"].([]any)
	for _, s := range sites {
		m, ok := s.(map[string]any)
		if !ok {
			continue
		}
		fill(m, siteDefaults)
		if ssh, ok := m["ssh"].(map[string]any); ok {
			if c, _ := ssh["ssh_config"].(string); c != "" {
				// The port comes from the OpenSSH configuration unless given.
				fill(ssh, map[string]any{"max_sessions": sshDefaults["max_sessions"]})
				continue
			}
			fill(ssh, sshDefaults)
		}
	}
}

func fill(m map[string]any, defs map[string]any) {
	for k, v := range defs {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
}

// finish computes the defaults that depend on the environment.
func (c *Config) finish(lookup func(string) (string, bool)) error {
	if c.Broker.StateDir == "" {
		if x, ok := lookup("XDG_STATE_HOME"); ok && x != "" {
			c.Broker.StateDir = filepath.Join(x, "gridsub")
		} else if h, ok := lookup("HOME"); ok && h != "" {
			c.Broker.StateDir = filepath.Join(h, ".local", "state", "gridsub")
		} else {
			return Errors{{File: c.Source, Field: "broker.state_dir", Msg: "not set and neither XDG_STATE_HOME nor HOME is; give a directory for the broker's durable state", Err: ErrInvalid}}
		}
	}
	if c.Broker.Socket == "" {
		c.Broker.Socket = filepath.Join(c.Broker.StateDir, "gridsub.sock")
	}
	for i := range c.Sites {
		s := &c.Sites[i]
		if s.Kind != KindLocal || s.Plugin != nil {
			continue
		}
		if s.RemoteDir == "" {
			s.RemoteDir = filepath.Join(c.Broker.StateDir, "sites", s.Name)
		}
		if s.Nodes == 0 {
			s.Nodes = runtime.NumCPU() // one slot per core
		}
	}
	if h, ok := lookup("HOME"); ok && h != "" {
		if c.Broker.OutputRoot == "" {
			c.Broker.OutputRoot = filepath.Join(h, "gridsub-out")
		}
		if len(c.Broker.InputRoots) == 0 {
			c.Broker.InputRoots = []string{h}
		}
	}
	return nil
}

// SiteNames lists the site names in configuration order.
func (c *Config) SiteNames() []string {
	names := make([]string, len(c.Sites))
	for i, s := range c.Sites {
		names[i] = s.Name
	}
	return names
}

// SiteIndex returns the index of the named site (names are case-sensitive).
func (c *Config) SiteIndex(name string) (int, bool) {
	for i, s := range c.Sites {
		if s.Name == name {
			return i, true
		}
	}
	return -1, false
}

// Site returns the named site.
func (c *Config) Site(name string) (*Site, bool) {
	if i, ok := c.SiteIndex(name); ok {
		return &c.Sites[i], true
	}
	return nil, false
}

// TotalNodes is the sum of the configured nodes of every site.
func (c *Config) TotalNodes() int {
	n := 0
	for _, s := range c.Sites {
		n += s.Nodes
	}
	return n
}

// Path returns the network path from site i to site j: free for i == j, the
// listed link (or its reverse) if any, else the default.
func (c *Config) Path(i, j int) Path {
	if i == j {
		return Path{}
	}
	from, to := c.Sites[i].Name, c.Sites[j].Name
	var reverse *Link
	for k := range c.Network.Links {
		l := &c.Network.Links[k]
		if l.From == from && l.To == to {
			return Path{Bandwidth: l.Bandwidth, Latency: l.Latency}
		}
		if l.From == to && l.To == from {
			reverse = l
		}
	}
	if reverse != nil {
		return Path{Bandwidth: reverse.Bandwidth, Latency: reverse.Latency}
	}
	return c.Network.Default
}

// Links is the Snapshot.Links matrix: Links()[i][j] is the path from site i
// to site j as the policies read it (seconds per byte and latency).
func (c *Config) Links() [][]policy.Link {
	out := make([][]policy.Link, len(c.Sites))
	for i := range c.Sites {
		out[i] = make([]policy.Link, len(c.Sites))
		for j := range c.Sites {
			p := c.Path(i, j)
			out[i][j] = policy.Link{SecPerByte: p.Bandwidth.SecPerByte(), Latency: p.Latency}
		}
	}
	return out
}

// PolicySites are the sites as a policy sees them before any state is known:
// every node free, h from the configuration.
func (c *Config) PolicySites() []policy.Site {
	out := make([]policy.Site, len(c.Sites))
	for i, s := range c.Sites {
		out[i] = policy.Site{Name: s.Name, Nodes: s.Nodes, Free: s.Nodes, H: s.H}
	}
	return out
}

// Snapshot is an empty snapshot of the configured grid at now: sites with
// every node free, the links and the multi-site factor. The broker fills in
// the live state.
func (c *Config) Snapshot(now time.Time) *policy.Snapshot {
	return &policy.Snapshot{Now: now, Sites: c.PolicySites(), Links: c.Links(), MultiSite: c.Network.MultiSiteFactor}
}

// UsesNativeArrays is the site's effective native_arrays: the value set,
// else true for a slurm or pbs site whose built-in backend runs in process
// (the only backends that submit native arrays) and false otherwise.
func (s *Site) UsesNativeArrays() bool {
	if s.NativeArrays != nil {
		return *s.NativeArrays
	}
	return (s.Kind == KindSlurm || s.Kind == KindPBS) && !s.Isolate && s.Plugin == nil
}
