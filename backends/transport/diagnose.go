package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// Step is one step of Diagnose: which host of the path ("resolve" for the
// configuration itself), what was checked, whether it passed, what was
// seen, and, when it failed, what to do.
type Step struct {
	Hop    string        `json:"hop"`
	Name   string        `json:"step"` // resolve, dns, connect, host key, auth
	OK     bool          `json:"ok"`
	Detail string        `json:"detail"`
	Fix    string        `json:"fix,omitempty"`
	Took   time.Duration `json:"took_ns"`
	Err    error         `json:"-"`
}

// Diagnose walks the login path of cfg hop by hop — resolve the
// configuration, look each host up, connect (through the hop before),
// check its host key, authenticate — reporting every step through report,
// and stops at the first that fails. p answers what a person must (nil:
// cfg.Prompter). On success it returns a connected Client (the caller
// closes it) for the checks that need one; on failure the error of the
// failing step.
func Diagnose(ctx context.Context, cfg Config, p Prompter, report func(Step)) (*Client, error) {
	if p == nil {
		p = cfg.Prompter
	}
	t0 := time.Now()
	if cfg.SSHConfig != "" && net.ParseIP(cfg.Host) == nil {
		// An alias that no Host block renames and DNS does not know.
		if st, err := SSHG(ctx, cfg.SSHConfig, cfg.Host, cfg.User, cfg.Port); err == nil && st.one("hostname") == cfg.Host {
			if _, lerr := net.DefaultResolver.LookupHost(ctx, cfg.Host); lerr != nil {
				err := fmt.Errorf("%w: unknown alias %q: no Host block of the ssh configuration (%s) gives it a HostName, and DNS does not know it: %w",
					ErrSSHConfig, cfg.Host, cfg.SSHConfig, lerr)
				report(Step{Hop: cfg.Host, Name: "resolve", Detail: err.Error(), Err: err, Took: time.Since(t0),
					Fix: fmt.Sprintf("check the spelling, or add \"Host %s\" with its HostName to your ssh configuration (ssh -G %s shows what ssh resolves)", cfg.Host, cfg.Host)})
				return nil, err
			}
		}
	}
	c, err := newClient(ctx, cfg)
	if err != nil {
		st := Step{Hop: cfg.Host, Name: "resolve", Detail: err.Error(), Err: err, Took: time.Since(t0)}
		switch {
		case errors.Is(err, ErrSSHConfig):
			st.Fix = "change the named setting in your ssh configuration, or give the site's ssh fields explicitly"
		default:
			st.Fix = "fix the site's ssh section (see gridsub config init --help)"
		}
		report(st)
		return nil, err
	}
	var path []string
	for _, ep := range c.eps {
		path = append(path, ep.cfg.target())
	}
	detail := "path: " + strings.Join(path, " -> ")
	if cfg.SSHConfig != "" {
		detail = fmt.Sprintf("%s resolved by ssh -G; %s", cfg.Host, detail)
	}
	report(Step{Hop: cfg.Host, Name: "resolve", OK: true, Detail: detail, Took: time.Since(t0)})
	fail := func(st Step) (*Client, error) {
		report(st)
		c.Close()
		return nil, st.Err
	}
	var via *ssh.Client
	viaLabel := ""
	for i, ep := range c.eps {
		if ip := net.ParseIP(ep.cfg.Host); ip == nil {
			t := time.Now()
			addrs, err := net.DefaultResolver.LookupHost(ctx, ep.cfg.Host)
			if err != nil {
				fix := "check the host name"
				if cfg.SSHConfig != "" {
					fix = fmt.Sprintf("%q is neither a Host of your ssh configuration nor a name DNS knows: check the alias (ssh -G %s)", ep.cfg.Host, ep.cfg.Host)
				}
				return fail(Step{Hop: ep.label, Name: "dns", Detail: err.Error(), Fix: fix, Err: fmt.Errorf("%s: %w", ep.label, err), Took: time.Since(t)})
			}
			report(Step{Hop: ep.label, Name: "dns", OK: true, Detail: strings.Join(addrs, " "), Took: time.Since(t)})
		}
		t := time.Now()
		dctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
		nc, err := dialTCP(dctx, ep, via, viaLabel)
		if err != nil {
			cancel()
			fix := "is the host up and the port right? is a firewall in the way?"
			if via != nil {
				fix = fmt.Sprintf("%s could not open a connection to %s: is the address right as the jump host sees it, and may the jump host forward (AllowTcpForwarding)?", viaLabel, ep.cfg.addr())
			}
			return fail(Step{Hop: ep.label, Name: "connect", Detail: err.Error(), Fix: fix, Err: err, Took: time.Since(t)})
		}
		report(Step{Hop: ep.label, Name: "connect", OK: true, Detail: "TCP to " + ep.cfg.addr() + viaText(viaLabel), Took: time.Since(t)})
		t = time.Now()
		info := &handshakeInfo{}
		sc, err := c.handshakeInfo(dctx, ep, nc, p, info)
		cancel()
		if info.hostKey == nil && err != nil {
			return fail(Step{Hop: ep.label, Name: "host key", Detail: err.Error(), Fix: "the server closed the connection before its host key: is it an SSH server?", Err: err, Took: time.Since(t)})
		}
		kd := fmt.Sprintf("%s %s", info.hostKey.Type(), ssh.FingerprintSHA256(info.hostKey))
		if !info.hostKeyOK {
			fix := "verify the fingerprint with the site's admins before changing known_hosts (the message says how)"
			return fail(Step{Hop: ep.label, Name: "host key", Detail: err.Error(), Fix: fix, Err: err, Took: time.Since(t)})
		}
		report(Step{Hop: ep.label, Name: "host key", OK: true, Detail: kd + " matches " + strings.Join(ep.cfg.KnownHosts, ", "), Took: time.Since(t)})
		if err != nil {
			st := Step{Hop: ep.label, Name: "auth", Detail: err.Error(), Err: err, Took: time.Since(t)}
			switch {
			case errors.Is(err, ErrNeedsLogin):
				st.Fix = "the site asks a one-time password or a passphrase: run gridsub doctor on a terminal, or gridsub login SITE with a daemon"
			case info.answered:
				st.Fix = "the server rejected the answers: enter a fresh one-time code (check the clock of the device that makes it)"
			default:
				st.Fix = "offered: " + orNothing(info.offered) + "; install the public key at the site (authorized_keys) or give the right key_file / cert_file"
			}
			return fail(st)
		}
		report(Step{Hop: ep.label, Name: "auth", OK: true, Detail: "logged in as " + ep.cfg.User + " (" + orNothing(info.offered) + ")" + answeredText(info.answered) + "; " + info.version, Took: time.Since(t)})
		if i < len(c.eps)-1 {
			h := &hopConn{ssh: sc, dead: make(chan struct{})}
			go func() { sc.Wait(); close(h.dead) }()
			c.mu.Lock()
			c.hops[i] = h
			c.mu.Unlock()
			via, viaLabel = sc, ep.label
			continue
		}
		cn := &conn{ssh: sc, dead: make(chan struct{}), sftpTok: make(chan struct{}, 1)}
		go func() { cn.err = sc.Wait(); close(cn.dead) }()
		c.mu.Lock()
		c.cur = cn
		c.mu.Unlock()
	}
	return c, nil
}

func viaText(via string) string {
	if via == "" {
		return ""
	}
	return " through " + via
}

func orNothing(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

func answeredText(b bool) string {
	if b {
		return ", keyboard-interactive answered"
	}
	return ""
}
