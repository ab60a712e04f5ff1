package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// endpoint is one host of the login path: a jump host or the login node.
type endpoint struct {
	cfg   Config // Host, Port, User, KeyFiles, CertFiles, UseAgent, KnownHosts, InsecureIgnoreHostKey, Logger
	label string // "jump host 1 of 2 (user@host:port)" or "login node user@host:port"
	hk    *hostKeys
}

// endpoints builds the path of cfg: its jump hosts in order, then the
// login node, each with its host-key policy.
func endpoints(cfg Config) ([]*endpoint, error) {
	var eps []*endpoint
	for i, h := range cfg.Jumps {
		hc := Config{Host: h.Host, Port: h.Port, User: h.User, KeyFiles: h.KeyFiles, CertFiles: h.CertFiles,
			UseAgent: h.UseAgent, KnownHosts: h.KnownHosts, Logger: cfg.Logger}
		if len(hc.KnownHosts) == 0 {
			if home, err := os.UserHomeDir(); err == nil {
				hc.KnownHosts = []string{filepath.Join(home, ".ssh", "known_hosts")}
			}
		}
		ep := &endpoint{cfg: hc, label: fmt.Sprintf("jump host %d of %d (%s)", i+1, len(cfg.Jumps), hc.target())}
		hk, err := newHostKeys(hc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ep.label, err)
		}
		ep.hk = hk
		eps = append(eps, ep)
	}
	label := cfg.target()
	if len(cfg.Jumps) > 0 {
		label = "login node " + label
	}
	hk, err := newHostKeys(cfg)
	if err != nil {
		return nil, err
	}
	return append(eps, &endpoint{cfg: cfg, label: label, hk: hk}), nil
}

// hopConn is a live connection to one jump host.
type hopConn struct {
	ssh  *ssh.Client
	dead chan struct{}
}

func (h *hopConn) alive() bool {
	if h == nil {
		return false
	}
	select {
	case <-h.dead:
		return false
	default:
		return true
	}
}

// dialTCP opens the byte stream to ep: directly, or through via (a jump
// host's connection, as ssh -J does with a direct-tcpip channel).
func dialTCP(ctx context.Context, ep *endpoint, via *ssh.Client, viaLabel string) (net.Conn, error) {
	addr := ep.cfg.addr()
	if via == nil {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, unavailable("%s: dial %s: %w", ep.label, addr, err)
		}
		return nc, nil
	}
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := via.Dial("tcp", addr)
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, unavailable("%s: %s could not connect to %s: %w", ep.label, viaLabel, addr, r.err)
		}
		return r.c, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, unavailable("%s: connecting to %s through %s: %w", ep.label, addr, viaLabel, ctx.Err())
	}
}

// handshake runs the SSH handshake and authentication with ep over nc,
// bounded by ctx (closing nc aborts it). p answers the questions a person
// must (nil: none can be answered).
func (c *Client) handshake(ctx context.Context, ep *endpoint, nc net.Conn, p Prompter) (*ssh.Client, error) {
	return c.handshakeInfo(ctx, ep, nc, p, &handshakeInfo{})
}

// handshakeInfo is what a handshake saw, for Diagnose.
type handshakeInfo struct {
	hostKey   ssh.PublicKey // as offered; nil if the handshake never got there
	hostKeyOK bool
	offered   string // what was offered for authentication
	answered  bool   // keyboard-interactive questions were answered
	version   string // the server's version string
}

func (c *Client) handshakeInfo(ctx context.Context, ep *endpoint, nc net.Conn, p Prompter, info *handshakeInfo) (*ssh.Client, error) {
	addr := ep.cfg.addr()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	// x/crypto/ssh has no context: closing the socket aborts the handshake.
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	o, err := loadOffer(ctx, ep, &c.keys, p, time.Now())
	if err != nil {
		stop()
		nc.Close()
		return nil, c.authErr(ep, err, nil, false)
	}
	defer o.closer()
	info.offered = strings.Join(o.desc, "; ")
	var hostKeyErr error
	var answered bool
	defer func() { info.answered = answered }()
	methods := o.authMethods(ctx, ep, PrompterFunc(func(ctx context.Context, ch Challenge) ([]string, error) {
		if p == nil {
			return nil, &errNoPrompter{fmt.Sprintf("%s asks %q (keyboard-interactive)", ep.label, questionsText(ch))}
		}
		answered = true
		return p.Prompt(ctx, ch)
	}))
	conf := &ssh.ClientConfig{
		User: ep.cfg.User,
		Auth: methods,
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			hostKeyErr = ep.hk.cb(hostname, remote, key)
			info.hostKey, info.hostKeyOK = key, hostKeyErr == nil
			return hostKeyErr
		},
		HostKeyAlgorithms: ep.hk.algos,
	}
	sc, chans, reqs, err := ssh.NewClientConn(nc, addr, conf)
	if !stop() {
		if err == nil {
			sc.Close()
		}
		return nil, unavailable("%s: ssh handshake with %s: %w", ep.label, addr, ctx.Err())
	}
	if err != nil {
		nc.Close()
		switch {
		case hostKeyErr != nil:
			return nil, fmt.Errorf("%s: %w", ep.label, hostKeyErr)
		case errors.Is(err, os.ErrDeadlineExceeded): // the socket deadline set from ctx
			return nil, unavailable("%s: ssh handshake with %s: %w (%v)", ep.label, addr, context.DeadlineExceeded, err)
		}
		return nil, c.authErr(ep, err, o, answered)
	}
	nc.SetDeadline(time.Time{})
	info.version = string(sc.ServerVersion())
	return ssh.NewClient(sc, chans, reqs), nil
}

func questionsText(ch Challenge) string {
	var qs []string
	for _, q := range ch.Questions {
		qs = append(qs, strings.TrimSpace(q.Text))
	}
	return strings.Join(qs, " ")
}

// authErr classifies a failed login with ep: a question nobody could
// answer is ErrNeedsLogin; a refusal is ErrAuth saying what was offered,
// which certificates were left out and why, and whether answers to the
// server's questions were rejected.
func (c *Client) authErr(ep *endpoint, err error, o *offer, answered bool) error {
	var np *errNoPrompter
	if errors.As(err, &np) {
		return fmt.Errorf("%w: %s: %s; run `gridsub login SITE` (or a gridsub command on a terminal) to answer it",
			ErrNeedsLogin, ep.label, np.what)
	}
	if errors.Is(err, ErrAuth) || o == nil {
		return fmt.Errorf("%s: %w", ep.label, err)
	}
	if !strings.Contains(err.Error(), "unable to authenticate") {
		return unavailable("%s: ssh handshake with %s: %w", ep.label, ep.cfg.addr(), err)
	}
	offered := strings.Join(o.desc, "; ")
	if offered == "" {
		offered = "nothing"
	}
	msg := fmt.Sprintf("%s accepted none of the credentials offered: %s", ep.label, offered)
	if answered {
		msg += "; it rejected the answers to its keyboard-interactive questions (a wrong or expired one-time code?)"
	}
	if len(o.notes) > 0 {
		msg += "; left out: " + strings.Join(o.notes, "; ")
	}
	return fmt.Errorf("%w: %s (%v)", ErrAuth, msg, err)
}
