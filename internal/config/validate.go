package config

import (
	"fmt"
	"github.com/gridsub/gridsub/bridge/daemon"
	"maps"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/jobfile"
	"github.com/gridsub/gridsub/bridge/jobrules"
	"github.com/gridsub/gridsub/bridge/store/pgstore"
	"github.com/gridsub/gridsub/bridge/users"
)

var (
	siteNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })
	policyRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]*$`) })
)

// Bounds of the numeric values. Beyond them a value is a typo or hostile,
// and the arithmetic built on it would overflow or stall: virtual time is
// wall time × sim.time_scale in int64 nanoseconds, a transfer takes
// size / bandwidth seconds (job data sizes are bounded too), and a period
// of nanoseconds keeps the daemon's scheduler busy without end.
const (
	MaxNodes        = 1 << 20 // sites[].nodes
	MaxCoresPerNode = 1 << 16 // sites[].cores_per_node
	MinH, MaxH      = 0.01, 100
	// MinBandwidth is 1 KB/s (8 Kbps): 1 TB at that rate still fits a
	// time.Duration.
	MinBandwidth       Bandwidth = 1e3
	MaxLatency                   = time.Hour
	MaxMultiSiteFactor           = 10.0
	// MinInterval and MaxInterval bound broker.interval,
	// broker.poll_interval and every "@every" period of broker.cron: the
	// daemon's own bounds.
	MinInterval = daemon.MinInterval
	MaxInterval = daemon.MaxInterval
	// MinTimeScale and MaxTimeScale bound sim.time_scale.
	MinTimeScale, MaxTimeScale = daemon.MinTimeScale, daemon.MaxTimeScale
)

// validate checks every value and returns every problem.
func (c *Config) validate() Errors {
	var errs Errors
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{File: c.Source, Field: key, Msg: fmt.Sprintf(format, args...), Err: ErrInvalid})
	}
	if len(c.Sites) == 0 {
		bad("sites", "at least one site is required (a list of {name, kind, nodes, ...})")
	}
	if c.Broker.FairShareHalfLife < 0 {
		bad("broker.fairshare_half_life", "must be a positive duration (168h: a week), got %s", c.Broker.FairShareHalfLife)
	}
	for _, u := range slices.Sorted(maps.Keys(c.Users)) {
		l := c.Users[u]
		if u != bridge.DefaultUser && users.CheckUser(u) != nil {
			bad("users."+u, "%q is not a user name: use an account name (letters, digits, '_', '.', '@', '-'), or default", u)
		}
		if l.Shares < 0 {
			bad("users."+u+".shares", "must be more than 0 (0: the default's), got %v", l.Shares)
		}
		for k, v := range map[string]int{"max_queued": l.MaxQueued, "max_running": l.MaxRunning, "max_running_per_site": l.MaxRunningPerSite} {
			if v < 0 {
				bad("users."+u+"."+k, "must be 0 (no limit) or more, got %d", v)
			}
		}
	}
	first := map[string]int{}
	for i := range c.Sites {
		s := &c.Sites[i]
		k := fmt.Sprintf("sites[%d]", i)
		switch j, dup := first[s.Name]; {
		case !siteNameRE().MatchString(s.Name):
			bad(k+".name", "must be 1-64 letters, digits, '.', '_' or '-' starting with a letter or digit, got %q", s.Name)
		case dup:
			bad(k+".name", "%q is already the name of sites[%d]; site names must be unique", s.Name, j)
		default:
			first[s.Name] = i
		}
		remote := s.Kind == KindSlurm || s.Kind == KindPBS
		switch {
		case s.Kind == KindSim:
			if s.Nodes < 1 || s.Nodes > MaxNodes {
				bad(k+".nodes", "a simulated site needs nodes from 1 to %d, got %d", MaxNodes, s.Nodes)
			}
			if s.SSH != nil {
				bad(k+".ssh", "only slurm and pbs sites are reached over SSH; remove it or set kind: slurm")
			}
			if s.RemoteDir != "" || s.Partition != "" {
				bad(k, "remote_dir and partition are only for slurm and pbs sites")
			}
		case s.Kind == KindLocal:
			if s.Nodes < 0 || s.Nodes > MaxNodes {
				bad(k+".nodes", "a local site's slots: from 0 (= one per core of this machine) to %d, got %d", MaxNodes, s.Nodes)
			}
			if s.SSH != nil {
				bad(k+".ssh", "a local site runs its jobs on this machine; remove it, or set kind: slurm or pbs")
			}
			if s.Partition != "" {
				bad(k, "partition is only for slurm and pbs sites")
			}
			if s.RemoteDir != "" && (!path.IsAbs(s.RemoteDir) || path.Clean(s.RemoteDir) != s.RemoteDir) {
				bad(k+".remote_dir", "a local site's job directories: a clean absolute path, got %q (leave it out for <state_dir>/sites/<name>)", s.RemoteDir)
			}
		case remote:
			if s.Nodes < 0 || s.Nodes > MaxNodes {
				bad(k+".nodes", "must be from 0 (= ask the site) to %d, got %d", MaxNodes, s.Nodes)
			}
			errs = append(errs, c.validateRemote(s, k)...)
		case s.Plugin != nil && s.Kind != "":
			// An external plugin's own kind (validatePlugin checks the rest).
		default:
			msg := fmt.Sprintf("must be one of %s, got %q", strings.Join(Kinds, ", "), s.Kind)
			if sg := jobfile.Suggest(s.Kind, Kinds); sg != "" {
				msg += fmt.Sprintf("; did you mean %q?", sg)
			}
			bad(k+".kind", "%s", msg)
		}
		errs = append(errs, c.validatePlugin(s, k)...)
		if b := s.Budget; b != nil {
			switch {
			case !remote || s.Plugin != nil:
				bad(k+".budget", "only slurm and pbs sites run scheduler commands gridsub budgets; remove it for a %s site", s.Kind)
			case b.PerMinute < 0 || b.Burst < 0 || b.PollFast < 0 || b.PollSlow < 0 || b.Settle < 0 || b.CapacityEvery < 0 || b.BackoffMax < 0 || b.CommandTimeout < 0:
				bad(k+".budget", "every field must be >= 0 (0 = the default), got %+v", *b)
			case b.PollFast > 0 && b.PollSlow > 0 && b.PollSlow < b.PollFast:
				bad(k+".budget.poll_slow", "must not be shorter than budget.poll_fast (%s), got %s", b.PollFast, b.PollSlow)
			case b.PollFast > 0 && b.PollFast < c.Broker.PollInterval:
				bad(k+".budget.poll_fast", "must not be shorter than broker.poll_interval (%s): a poll happens in a cycle; got %s", c.Broker.PollInterval, b.PollFast)
			}
		}
		if s.NativeArrays != nil && *s.NativeArrays && (!remote || s.Isolate || s.Plugin != nil) {
			bad(k+".native_arrays", "native job arrays are submitted by the built-in slurm and pbs backends in process; remove it for a %s site%s",
				s.Kind, map[bool]string{true: " (or drop isolate/plugin; a plugin site asks its plugin, e.g. the Grid Engine plugin's plugin.options.native_arrays)", false: ""}[remote])
		}
		if s.CoresPerNode < 1 || s.CoresPerNode > MaxCoresPerNode {
			bad(k+".cores_per_node", "must be a whole number from 1 to %d, got %d", MaxCoresPerNode, s.CoresPerNode)
		}
		if s.MemPerNode < 0 || s.MemPerNode > jobrules.MaxMemPerNode {
			bad(k+".mem_per_node", "must be a size from 0 (not known) to 1PiB, got %d bytes", int64(s.MemPerNode))
		}
		if s.GPUsPerNode < 0 || s.GPUsPerNode > jobrules.MaxGPUsPerNode {
			bad(k+".gpus_per_node", "must be a whole number from 0 to %d, got %d", jobrules.MaxGPUsPerNode, s.GPUsPerNode)
		}
		if s.Account != "" {
			if err := jobrules.BatchName(s.Account); err != nil {
				bad(k+".account", "%v", err)
			}
		}
		if s.Area != "" && !siteNameRE().MatchString(s.Area) {
			bad(k+".area", "names the site's local area (letters, digits, . _ -; at most 64), got %q", s.Area)
		}
		if !(s.H >= MinH && s.H <= MaxH) {
			bad(k+".h", "must be a number from %v to %v (1 = the reference machine, smaller = faster), got %v", MinH, MaxH, s.H)
		}
	}

	n := &c.Network
	if n.Default.Bandwidth <= 0 {
		bad("network.default.bandwidth", "must be %s", bandwidthHint)
	} else if n.Default.Bandwidth < MinBandwidth {
		bad("network.default.bandwidth", "%s is below the minimum of %s", n.Default.Bandwidth, MinBandwidth)
	}
	if n.Default.Latency < 0 || n.Default.Latency > MaxLatency {
		bad("network.default.latency", "must be from 0 to %s, got %s", MaxLatency, n.Default.Latency)
	}
	seen := map[[2]string]int{}
	for i, l := range n.Links {
		k := fmt.Sprintf("network.links[%d]", i)
		for _, end := range []struct{ key, name string }{{"from", l.From}, {"to", l.To}} {
			if _, ok := c.SiteIndex(end.name); !ok {
				msg := fmt.Sprintf("unknown site %q (sites: %s)", end.name, strings.Join(c.SiteNames(), ", "))
				if sg := jobfile.Suggest(end.name, c.SiteNames()); sg != "" {
					msg += fmt.Sprintf("; did you mean %q?", sg)
				}
				bad(k+"."+end.key, "%s", msg)
			}
		}
		if l.From == l.To {
			bad(k, "from and to are both %q; a site to itself is always free", l.From)
		}
		if j, dup := seen[[2]string{l.From, l.To}]; dup {
			bad(k, "%s -> %s is already given by network.links[%d]", l.From, l.To, j)
		}
		seen[[2]string{l.From, l.To}] = i
		if l.Bandwidth <= 0 {
			bad(k+".bandwidth", "missing; must be %s", bandwidthHint)
		} else if l.Bandwidth < MinBandwidth {
			bad(k+".bandwidth", "%s is below the minimum of %s", l.Bandwidth, MinBandwidth)
		}
		if l.Latency < 0 || l.Latency > MaxLatency {
			bad(k+".latency", "must be from 0 to %s, got %s", MaxLatency, l.Latency)
		}
	}
	if !(n.MultiSiteFactor >= 1 && n.MultiSiteFactor <= MaxMultiSiteFactor) {
		bad("network.multi_site_factor", "must be a number from 1 to %v (the slowdown of a job spanning several sites), got %v", MaxMultiSiteFactor, n.MultiSiteFactor)
	}

	b := &c.Broker
	errs = append(errs, c.validatePlannerPlugin()...)
	if b.Interval <= 0 {
		bad("broker.interval", "must be a duration > 0, got %s", b.Interval)
	} else if b.Interval < MinInterval || b.Interval > MaxInterval {
		bad("broker.interval", "must be from %s to %s, got %s", MinInterval, MaxInterval, b.Interval)
	}
	if b.PollInterval <= 0 {
		bad("broker.poll_interval", "must be a duration > 0, got %s", b.PollInterval)
	} else if b.PollInterval < MinInterval || b.PollInterval > MaxInterval {
		bad("broker.poll_interval", "must be from %s to %s, got %s", MinInterval, MaxInterval, b.PollInterval)
	}
	if !path.IsAbs(b.StateDir) {
		bad("broker.state_dir", "must be an absolute directory, got %q", b.StateDir)
	}
	if b.OutputRoot != "" && !path.IsAbs(b.OutputRoot) {
		bad("broker.output_root", "must be an absolute directory, got %q", b.OutputRoot)
	}
	for i, r := range b.InputRoots {
		if !path.IsAbs(r) {
			bad(fmt.Sprintf("broker.input_roots[%d]", i), "must be an absolute directory, got %q", r)
		}
	}
	for _, name := range sortedCron(b.Cron) {
		if msg := checkCron(b.Cron[name]); msg != "" {
			bad("broker.cron."+name, "%s", msg)
		}
	}
	if !(b.QoS.Lambda >= 0) || b.QoS.Lambda > 100 {
		bad("broker.qos.lambda", "must be a number from 0 (the default 1.5) to 100, got %v", b.QoS.Lambda)
	}
	if b.QoS.DownAfter < 0 || b.QoS.DownAfter > MaxInterval {
		bad("broker.qos.down_after", "must be a duration from 0 (the default 2m) to %s, got %s", MaxInterval, b.QoS.DownAfter)
	}
	validateRemap(&b.Remap, bad) // remap.go
	validatePolicies(b, bad)     // policies.go
	if (b.TLSCert == "") != (b.TLSKey == "") {
		bad("broker.tls_cert", "give both broker.tls_cert and broker.tls_key (PEM certificate and private key files), or neither")
	}
	for _, f := range []struct {
		key, path string
		max       int64
	}{{"broker.tls_cert", b.TLSCert, MaxCertFile}, {"broker.tls_key", b.TLSKey, MaxKeyFile}} {
		if f.path == "" {
			continue
		}
		if msg := checkNamedFile(f.path, f.max); msg != "" {
			bad(f.key, "%s", msg)
		}
	}
	if !(c.Sim.TimeScale > 0) || math.IsInf(c.Sim.TimeScale, 0) {
		bad("sim.time_scale", "must be a number > 0 (virtual seconds per wall second), got %v", c.Sim.TimeScale)
	} else if c.Sim.TimeScale < MinTimeScale || c.Sim.TimeScale > MaxTimeScale {
		bad("sim.time_scale", "must be from %v to %v virtual seconds per wall second, got %v", MinTimeScale, MaxTimeScale, c.Sim.TimeScale)
	}
	errs = append(errs, c.validateStaging()...)
	errs = append(errs, c.validateStore()...)
	return errs
}

// validateStaging checks the staging limits.
// validateStore checks the store section: a known kind, a DSN for
// postgres and none for sqlite, never a password in the DSN (the error
// does not repeat the DSN), one place for the password at most.
func (c *Config) validateStore() Errors {
	var errs Errors
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{File: c.Source, Field: key, Msg: fmt.Sprintf(format, args...), Err: ErrInvalid})
	}
	st := &c.Store
	switch st.Kind {
	case "sqlite":
		if st.DSN != "" || st.PasswordFile != "" || st.PasswordEnv != "" {
			bad("store", "dsn, password_file and password_env are for kind: postgres; the sqlite store is <state_dir>/gridsub.db")
		}
	case "postgres":
		if st.DSN == "" {
			bad("store.dsn", "kind postgres needs a dsn like \"host=db.example.org user=gridsub dbname=gridsub sslmode=verify-full\"")
		} else if err := pgstore.CheckDSN(st.DSN); err != nil {
			bad("store.dsn", "%v", err)
		}
		if st.PasswordFile != "" && st.PasswordEnv != "" {
			bad("store", "give password_file or password_env, not both")
		}
		if st.PasswordFile != "" && !path.IsAbs(st.PasswordFile) {
			bad("store.password_file", "must be an absolute path, got %q", st.PasswordFile)
		}
	default:
		bad("store.kind", "must be sqlite (the default) or postgres, got %q", st.Kind)
	}
	if st.Shared && st.Kind != "postgres" {
		bad("store.shared", "several brokers share a store of kind postgres only")
	}
	if st.Shared {
		// A local site runs its jobs on one machine and a simulated one
		// inside one daemon: a broker taking over could not find them.
		for i, site := range c.Sites {
			if site.Kind == KindLocal || site.Kind == KindSim {
				bad(fmt.Sprintf("sites[%d].kind", i), "%s is a %s site, which brokers sharing a store cannot share (its jobs live on one machine or inside one daemon): store.shared needs slurm or pbs sites (or plugin sites every broker reaches)", site.Name, site.Kind)
			}
		}
	}
	if st.Lease < time.Second || st.Lease > time.Minute {
		bad("store.lease", "must be from 1s to 1m, got %s", st.Lease)
	}
	return errs
}

func (c *Config) validateStaging() Errors {
	var errs Errors
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{File: c.Source, Field: key, Msg: fmt.Sprintf(format, args...), Err: ErrInvalid})
	}
	st := &c.Staging
	if st.MaxFileSize <= 0 {
		bad("staging.max_file_size", "must be a size > 0 like \"10GiB\", got %d bytes", st.MaxFileSize)
	}
	if st.MaxJobBytes < st.MaxFileSize {
		bad("staging.max_job_bytes", "must be at least staging.max_file_size (%d bytes), got %d bytes", st.MaxFileSize, st.MaxJobBytes)
	}
	if !(st.MinRate > 0) {
		bad("staging.min_rate", "must be a rate > 0 like \"1MiB/s\", got %v", st.MinRate)
	}
	if st.MinTime < time.Second || st.MinTime > 24*time.Hour {
		bad("staging.min_time", "must be between 1s and 24h, got %s", st.MinTime)
	}
	if st.FetchWorkers < 1 || st.FetchWorkers > 64 {
		bad("staging.fetch_workers", "must be 1-64, got %d", st.FetchWorkers)
	}
	if st.FetchTimeout < time.Second || st.FetchTimeout > 30*24*time.Hour {
		bad("staging.fetch_timeout", "must be between 1s and 720h, got %s", st.FetchTimeout)
	}
	return errs
}

// cronRef is the fixed instant from which checkCron asks a schedule for
// its next runs (a validation must not depend on the wall clock).
var cronRef = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// checkCron says what is wrong with a broker.cron spec, or "". The daemon
// reads "@every D" itself (sub-second periods kept), so D is bounded here
// by MinInterval and MaxInterval; any other spec must be a standard cron
// spec that fires at all (a "30 2 30 2 *", February 30, never does).
func checkCron(spec string) string {
	if rest, ok := strings.CutPrefix(strings.TrimSpace(spec), "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil || d < MinInterval || d > MaxInterval {
			return fmt.Sprintf("%q: want \"@every D\" with a duration D from %s to %s, e.g. \"@every 10m\"", spec, MinInterval, MaxInterval)
		}
		return ""
	}
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return fmt.Sprintf("%q is not a cron spec (e.g. \"@every 10m\" or \"*/5 * * * *\"): %v", spec, err)
	}
	if s.Next(cronRef).IsZero() {
		return fmt.Sprintf("%q never fires (no such date); give a date that exists", spec)
	}
	return ""
}

func sortedCron(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return sortStrings(keys)
}

// validateRemote checks the SSH and directory settings of a slurm/pbs site.
func (c *Config) validateRemote(s *Site, k string) Errors {
	var errs Errors
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{File: c.Source, Field: key, Msg: fmt.Sprintf(format, args...), Err: ErrInvalid})
	}
	if s.RemoteDir == "" {
		bad(k+".remote_dir", "missing; give the absolute directory at the site under which gridsub makes job directories")
	} else if !path.IsAbs(s.RemoteDir) || path.Clean(s.RemoteDir) != strings.TrimSuffix(s.RemoteDir, "/") && s.RemoteDir != "/" {
		bad(k+".remote_dir", "must be a clean absolute path, got %q", s.RemoteDir)
	}
	if s.BinDir != "" && (s.Kind != KindPBS || !path.IsAbs(s.BinDir)) {
		bad(k+".bin_dir", "is the absolute directory of the PBS commands of a pbs site (default /opt/pbs/bin), got %q for a %s site", s.BinDir, s.Kind)
	}
	x := s.SSH
	if x == nil {
		bad(k+".ssh", "missing; a %s site is reached over SSH: give {host, port, user, key_file, known_hosts}", s.Kind)
		return errs
	}
	k += ".ssh"
	if x.Host == "" {
		bad(k+".host", "missing; give the login node's host name or address")
	}
	resolved := x.SSHConfig != "" // port, user, key_file and known_hosts may come from the OpenSSH configuration
	if x.SSHConfig != "" && x.SSHConfig != "default" && !path.IsAbs(x.SSHConfig) {
		bad(k+".ssh_config", "must be \"default\" (OpenSSH's own files) or an absolute file, got %q", x.SSHConfig)
	}
	if (x.Port < 1 && !(resolved && x.Port == 0)) || x.Port > 65535 {
		bad(k+".port", "must be a port number 1..65535, got %d", x.Port)
	}
	if x.User == "" && !resolved {
		bad(k+".user", "missing; give the login user at the site (or ssh_config: default to take it from ~/.ssh/config)")
	}
	if x.KeyFile == "" && !x.Agent && !resolved {
		bad(k+".key_file", "missing; give a private key file, or set agent: true to use ssh-agent")
	}
	if x.KnownHosts == "" && !x.InsecureIgnoreHostKey && !resolved {
		bad(k+".known_hosts", "missing; give a known_hosts file holding the site's host key (insecure_ignore_host_key: true skips the check, for tests only)")
	}
	if x.CertFile != "" && x.KeyFile == "" && !x.Agent && !resolved {
		bad(k+".cert_file", "certifies a key: give key_file (or agent: true) too")
	}
	for _, h := range strings.Split(x.ProxyJump, ",") {
		if x.ProxyJump != "" && (strings.TrimSpace(h) == "" || strings.ContainsAny(h, " \t'\"$;|&<>`\\")) {
			bad(k+".proxy_jump", "must be jump hosts \"[user@]host[:port],...\" as OpenSSH's ProxyJump, got %q", x.ProxyJump)
			break
		}
	}
	for _, f := range []struct {
		key, path string
		max       int64
	}{{".key_file", x.KeyFile, MaxKeyFile}, {".known_hosts", x.KnownHosts, MaxKnownHostsFile}, {".cert_file", x.CertFile, MaxKeyFile}} {
		if f.path == "" {
			continue
		}
		if msg := checkNamedFile(f.path, f.max); msg != "" {
			bad(k+f.key, "%s", msg)
		}
	}
	if x.MaxSessions < 1 || x.MaxSessions > 1024 {
		bad(k+".max_sessions", "must be a whole number 1..1024, got %d", x.MaxSessions)
	}
	return errs
}
