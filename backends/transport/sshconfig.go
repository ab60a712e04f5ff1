package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SSHConfigDefault as Config.SSHConfig resolves Host through OpenSSH's own
// client configuration files (~/.ssh/config, /etc/ssh/ssh_config).
const SSHConfigDefault = "default"

// ErrSSHConfig: the OpenSSH client configuration of a host cannot be read,
// or asks for something gridsub cannot honour (ProxyCommand,
// StrictHostKeyChecking no, ...); the message names the setting. Needs a
// person: not retryable.
var ErrSSHConfig = errors.New("ssh client configuration")

// maxJumpDepth bounds the jump hosts a path may have (ProxyJump of a jump
// host's own configuration included).
const maxJumpDepth = 10

// SSHSettings is what OpenSSH resolved for one host (ssh -G), keyword
// (lower case) to values, in the order printed.
type SSHSettings map[string][]string

// ParseSSHG reads the output of `ssh -G HOST`: one "keyword value" per
// line. A keyword may repeat (identityfile, certificatefile).
func ParseSSHG(out []byte) (SSHSettings, error) {
	s := SSHSettings{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, " ")
		k = strings.ToLower(k) // OpenSSH 9.2 prints "canonicalizePermittedcnames"
		if k == "" || strings.ContainsFunc(k, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') }) {
			return nil, fmt.Errorf("%w: ssh -G line %d is not \"keyword value\": %q", ErrSSHConfig, n, line)
		}
		s[k] = append(s[k], strings.TrimSpace(v))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: reading ssh -G output: %w", ErrSSHConfig, err)
	}
	if len(s["hostname"]) == 0 {
		return nil, fmt.Errorf("%w: ssh -G printed no hostname", ErrSSHConfig)
	}
	return s, nil
}

// One is the first value of keyword k ("" if absent).
func (s SSHSettings) One(k string) string { return s.one(k) }

// Existing is the files the values of keyword k name (space-separated,
// "~/" expanded) that exist, in order.
func (s SSHSettings) Existing(k string) []string { return existing(s[k]) }

// Refuse is the error for a setting gridsub cannot honour (see
// ResolveSSHConfig), nil if there is none.
func (s SSHSettings) Refuse(host string) error { return s.refuse(host) }

func (s SSHSettings) one(k string) string {
	if v := s[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Refusals: settings gridsub cannot honour. Each is refused by name rather
// than ignored (a config that asks for them would not do what it says).
func (s SSHSettings) refuse(host string) error {
	bad := func(what, fix string) error {
		return fmt.Errorf("%w: host %s: %s cannot be honoured by gridsub; %s", ErrSSHConfig, host, what, fix)
	}
	if v := s.one("proxycommand"); v != "" && v != "none" {
		return bad("ProxyCommand "+v, "use ProxyJump (jump hosts) instead")
	}
	switch s.one("stricthostkeychecking") {
	case "false", "no", "off":
		return bad("StrictHostKeyChecking no", "gridsub always checks host keys: remove it and record the host key in known_hosts")
	}
	if v := s.one("knownhostscommand"); v != "" && v != "none" {
		return bad("KnownHostsCommand "+v, "list the host keys in a known_hosts file")
	}
	if v := s.one("hostkeyalias"); v != "" && v != "none" {
		return bad("HostKeyAlias "+v, "record the host key under its host name and port in known_hosts")
	}
	for _, f := range s["userknownhostsfile"] {
		if f == "/dev/null" || f == "none" {
			return bad("UserKnownHostsFile "+f, "gridsub always checks host keys: name a real known_hosts file")
		}
	}
	if v := s.one("identityagent"); v != "" && v != "SSH_AUTH_SOCK" && v != "none" && v != "$SSH_AUTH_SOCK" {
		return bad("IdentityAgent "+v, "gridsub asks the agent at $SSH_AUTH_SOCK: export SSH_AUTH_SOCK="+v)
	}
	return nil
}

// expandHome expands a leading "~/" (ssh -G prints identity files so).
func expandHome(p string) string {
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[2:])
		}
	}
	return p
}

func existing(paths []string) []string {
	var out []string
	for _, p := range paths {
		for _, f := range strings.Fields(p) {
			f = expandHome(f)
			if _, err := os.Stat(f); err == nil && !contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// SSHG runs `ssh -G` for host with OpenSSH's own files (file
// SSHConfigDefault) or with -F file, with user and port given as -l and -p
// when set (as a ProxyJump element "user@host:port" gives them).
func SSHG(ctx context.Context, file, host, user string, port int) (SSHSettings, error) {
	bin, err := exec.LookPath("ssh")
	if err != nil {
		return nil, fmt.Errorf("%w: resolving %s needs the OpenSSH client (apt-get install openssh-client), or set ssh_config: none and give every field: %w",
			ErrSSHConfig, host, err)
	}
	if strings.HasPrefix(host, "-") || host == "" {
		return nil, fmt.Errorf("%w: %q is not a host name or alias", ErrSSHConfig, host)
	}
	args := []string{"-G"}
	if file != "" && file != SSHConfigDefault {
		args = append(args, "-F", file)
	}
	if user != "" {
		args = append(args, "-l", user)
	}
	if port != 0 {
		args = append(args, "-p", strconv.Itoa(port))
	}
	args = append(args, "--", host)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: ssh %s failed: %w: %s", ErrSSHConfig, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return ParseSSHG(out)
}

// ResolveSSHConfig fills the fields of cfg that are not set from what
// OpenSSH resolves for cfg.Host (Config.SSHConfig names the files): the
// site's explicit fields win. It honours HostName, User, Port,
// IdentityFile (the files that exist), IdentitiesOnly (no agent keys
// unless UseAgent), CertificateFile, UserKnownHostsFile and
// GlobalKnownHostsFile (the files that exist), ProxyJump (every hop
// resolved the same way), ServerAliveInterval and ConnectTimeout, and
// refuses ProxyCommand, StrictHostKeyChecking no, KnownHostsCommand,
// HostKeyAlias, UserKnownHostsFile /dev/null and an IdentityAgent other
// than $SSH_AUTH_SOCK, naming the setting. With SSHConfig "" it returns cfg
// unchanged.
func ResolveSSHConfig(ctx context.Context, cfg Config) (Config, error) {
	if cfg.SSHConfig == "" {
		if cfg.ProxyJump != "" && len(cfg.Jumps) == 0 {
			hops, err := parseProxyJump(cfg.ProxyJump)
			if err != nil {
				return cfg, err
			}
			cfg.Jumps = hops
		}
		return cfg, nil
	}
	if cfg.Host == "" {
		return cfg, fmt.Errorf("transport config: host is empty (want a host name, address or ~/.ssh/config alias)")
	}
	s, err := SSHG(ctx, cfg.SSHConfig, cfg.Host, cfg.User, cfg.Port)
	if err != nil {
		return cfg, err
	}
	if err := s.refuse(cfg.Host); err != nil {
		return cfg, err
	}
	alias := cfg.Host
	cfg.Host = s.one("hostname")
	if cfg.User == "" {
		cfg.User = s.one("user")
	}
	if cfg.Port == 0 {
		if cfg.Port, err = strconv.Atoi(s.one("port")); err != nil {
			return cfg, fmt.Errorf("%w: host %s: port %q", ErrSSHConfig, alias, s.one("port"))
		}
	}
	if len(cfg.KeyFiles) == 0 {
		cfg.KeyFiles = existing(s["identityfile"])
		if !cfg.UseAgent && s.one("identitiesonly") != "yes" && s.one("identityagent") != "none" && os.Getenv("SSH_AUTH_SOCK") != "" {
			cfg.UseAgent = true
		}
	}
	if len(cfg.CertFiles) == 0 {
		cfg.CertFiles = existing(s["certificatefile"])
	}
	if len(cfg.KnownHosts) == 0 {
		cfg.KnownHosts = existing(append(append([]string(nil), s["userknownhostsfile"]...), s["globalknownhostsfile"]...))
		if len(cfg.KnownHosts) == 0 && len(s["userknownhostsfile"]) > 0 {
			// None exists yet: name the first, so the error for an
			// unknown host says where to add it.
			cfg.KnownHosts = []string{expandHome(strings.Fields(s["userknownhostsfile"][0])[0])}
		}
	}
	if cfg.KeepAlive == 0 {
		if n, err := strconv.Atoi(s.one("serveraliveinterval")); err == nil && n > 0 {
			cfg.KeepAlive = time.Duration(n) * time.Second
		}
	}
	if cfg.DialTimeout == 0 {
		if n, err := strconv.Atoi(s.one("connecttimeout")); err == nil && n > 0 {
			cfg.DialTimeout = time.Duration(n) * time.Second
		}
	}
	if len(cfg.Jumps) == 0 {
		pj := cfg.ProxyJump
		if pj == "" {
			pj = s.one("proxyjump")
		}
		if pj != "" && pj != "none" {
			cfg.Jumps, err = resolveJumps(ctx, cfg.SSHConfig, pj, 0)
			if err != nil {
				return cfg, fmt.Errorf("host %s: ProxyJump %s: %w", alias, pj, err)
			}
		}
	}
	return cfg, nil
}

// resolveJumps resolves a ProxyJump list "[user@]host[:port],..." hop by
// hop. The first hop's own ProxyJump is followed (as ssh does); the others
// are reached through the hop before them.
func resolveJumps(ctx context.Context, file, list string, depth int) ([]Hop, error) {
	var hops []Hop
	for i, spec := range strings.Split(list, ",") {
		user, hostport, ok := strings.Cut(strings.TrimSpace(spec), "@")
		if !ok {
			user, hostport = "", user
		}
		host, port := hostport, 0
		if h, p, err := splitHostPort(hostport); err == nil {
			host, port = h, p
		}
		s, err := SSHG(ctx, file, host, user, port)
		if err != nil {
			return nil, err
		}
		if err := s.refuse(host); err != nil {
			return nil, err
		}
		h := Hop{Host: s.one("hostname"), User: s.one("user"), KeyFiles: existing(s["identityfile"]),
			CertFiles:  existing(s["certificatefile"]),
			KnownHosts: existing(append(append([]string(nil), s["userknownhostsfile"]...), s["globalknownhostsfile"]...))}
		if h.Port, err = strconv.Atoi(s.one("port")); err != nil {
			return nil, fmt.Errorf("%w: jump host %s: port %q", ErrSSHConfig, host, s.one("port"))
		}
		if s.one("identitiesonly") != "yes" && s.one("identityagent") != "none" && os.Getenv("SSH_AUTH_SOCK") != "" {
			h.UseAgent = true
		}
		if i == 0 {
			if pj := s.one("proxyjump"); pj != "" && pj != "none" {
				if depth+len(hops) >= maxJumpDepth {
					return nil, fmt.Errorf("%w: more than %d jump hosts (a ProxyJump loop?)", ErrSSHConfig, maxJumpDepth)
				}
				before, err := resolveJumps(ctx, file, pj, depth+1)
				if err != nil {
					return nil, fmt.Errorf("jump host %s: ProxyJump %s: %w", host, pj, err)
				}
				hops = append(hops, before...)
			}
		}
		hops = append(hops, h)
		if depth+len(hops) > maxJumpDepth {
			return nil, fmt.Errorf("%w: more than %d jump hosts (a ProxyJump loop?)", ErrSSHConfig, maxJumpDepth)
		}
	}
	return hops, nil
}

// parseProxyJump reads "[user@]host[:port],..." literally.
func parseProxyJump(list string) ([]Hop, error) {
	var hops []Hop
	for _, spec := range strings.Split(list, ",") {
		spec = strings.TrimSpace(spec)
		user, hostport, ok := strings.Cut(spec, "@")
		if !ok {
			user, hostport = "", spec
		}
		h := Hop{Host: hostport, User: user}
		if host, port, err := splitHostPort(hostport); err == nil {
			h.Host, h.Port = host, port
		}
		if h.Host == "" || strings.ContainsAny(spec, " \t/") {
			return nil, fmt.Errorf("%w: ProxyJump element %q is not [user@]host[:port]", ErrSSHConfig, spec)
		}
		hops = append(hops, h)
	}
	if len(hops) > maxJumpDepth {
		return nil, fmt.Errorf("%w: ProxyJump %q has more than %d jump hosts", ErrSSHConfig, list, maxJumpDepth)
	}
	return hops, nil
}

// splitHostPort splits "host:port" and "[v6]:port"; a bare host is an error.
func splitHostPort(s string) (string, int, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 || strings.HasSuffix(s, "]") {
		return "", 0, errors.New("no port")
	}
	p, err := strconv.Atoi(s[i+1:])
	if err != nil || p < 1 || p > 65535 {
		return "", 0, fmt.Errorf("bad port %q", s[i+1:])
	}
	return strings.Trim(s[:i], "[]"), p, nil
}
