package config

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"strings"

	"github.com/robfig/cron/v3"

	"github.com/gridsub/gridsub/internal/jobfile"
)

var (
	siteNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	policyRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]*$`)
)

// validate checks every value and returns every problem.
func (c *Config) validate() Errors {
	var errs Errors
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Source: c.Source, Key: key, Msg: fmt.Sprintf(format, args...), Err: ErrInvalid})
	}
	if len(c.Sites) == 0 {
		bad("sites", "at least one site is required (a list of {name, kind, nodes, ...})")
	}
	first := map[string]int{}
	for i := range c.Sites {
		s := &c.Sites[i]
		k := fmt.Sprintf("sites[%d]", i)
		switch j, dup := first[s.Name]; {
		case !siteNameRE.MatchString(s.Name):
			bad(k+".name", "must be 1-64 letters, digits, '.', '_' or '-' starting with a letter or digit, got %q", s.Name)
		case dup:
			bad(k+".name", "%q is already the name of sites[%d]; site names must be unique", s.Name, j)
		default:
			first[s.Name] = i
		}
		remote := s.Kind == KindSlurm || s.Kind == KindPBS
		switch {
		case s.Kind == KindSim:
			if s.Nodes < 1 {
				bad(k+".nodes", "a simulated site needs nodes >= 1, got %d", s.Nodes)
			}
			if s.SSH != nil {
				bad(k+".ssh", "only slurm and pbs sites are reached over SSH; remove it or set kind: slurm")
			}
			if s.RemoteDir != "" || s.Partition != "" {
				bad(k, "remote_dir and partition are only for slurm and pbs sites")
			}
		case remote:
			if s.Nodes < 0 {
				bad(k+".nodes", "must be >= 0 (0 = ask the site), got %d", s.Nodes)
			}
			errs = append(errs, c.validateRemote(s, k)...)
		default:
			msg := fmt.Sprintf("must be one of %s, got %q", strings.Join(Kinds, ", "), s.Kind)
			if sg := jobfile.Suggest(s.Kind, Kinds); sg != "" {
				msg += fmt.Sprintf("; did you mean %q?", sg)
			}
			bad(k+".kind", "%s", msg)
		}
		if s.CoresPerNode < 1 {
			bad(k+".cores_per_node", "must be a whole number >= 1, got %d", s.CoresPerNode)
		}
		if !(s.H > 0) || math.IsInf(s.H, 0) {
			bad(k+".h", "must be a number > 0 (1 = the reference machine, smaller = faster), got %v", s.H)
		}
	}

	n := &c.Network
	if n.Default.Bandwidth <= 0 {
		bad("network.default.bandwidth", "must be %s", bandwidthHint)
	}
	if n.Default.Latency < 0 {
		bad("network.default.latency", "must be >= 0, got %s", n.Default.Latency)
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
		}
		if l.Latency < 0 {
			bad(k+".latency", "must be >= 0, got %s", l.Latency)
		}
	}
	if !(n.MultiSiteFactor >= 1) || math.IsInf(n.MultiSiteFactor, 0) {
		bad("network.multi_site_factor", "must be a number >= 1 (the slowdown of a job spanning several sites), got %v", n.MultiSiteFactor)
	}

	b := &c.Broker
	if !policyRE.MatchString(b.Policy) {
		bad("broker.policy", "must name a planner (e.g. greedy), got %q", b.Policy)
	}
	if b.Interval <= 0 {
		bad("broker.interval", "must be a duration > 0, got %s", b.Interval)
	}
	if b.PollInterval <= 0 {
		bad("broker.poll_interval", "must be a duration > 0, got %s", b.PollInterval)
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
		if _, err := cron.ParseStandard(b.Cron[name]); err != nil {
			bad("broker.cron."+name, "%q is not a cron spec (e.g. \"@every 10m\" or \"*/5 * * * *\"): %v", b.Cron[name], err)
		}
	}
	if !(c.Sim.TimeScale > 0) || math.IsInf(c.Sim.TimeScale, 0) {
		bad("sim.time_scale", "must be a number > 0 (virtual seconds per wall second), got %v", c.Sim.TimeScale)
	}
	return errs
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
		errs = append(errs, &Error{Source: c.Source, Key: key, Msg: fmt.Sprintf(format, args...), Err: ErrInvalid})
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
	if x.Port < 1 || x.Port > 65535 {
		bad(k+".port", "must be a port number 1..65535, got %d", x.Port)
	}
	if x.User == "" {
		bad(k+".user", "missing; give the login user at the site")
	}
	if x.KeyFile == "" && !x.Agent {
		bad(k+".key_file", "missing; give a private key file, or set agent: true to use ssh-agent")
	}
	if x.KnownHosts == "" && !x.InsecureIgnoreHostKey {
		bad(k+".known_hosts", "missing; give a known_hosts file holding the site's host key (insecure_ignore_host_key: true skips the check, for tests only)")
	}
	if x.MaxSessions < 1 || x.MaxSessions > 1024 {
		bad(k+".max_sessions", "must be a whole number 1..1024, got %d", x.MaxSessions)
	}
	return errs
}
