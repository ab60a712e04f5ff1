package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gridsub/gridsub/backends"
)

// Reconnect backoff: the n-th consecutive failed dial waits
// min(reconnectBase*2^(n-1), reconnectMax) (plus up to 20% jitter) before the
// next one. One call tries at most dialAttempts times.
const (
	reconnectBase = 250 * time.Millisecond
	reconnectMax  = 30 * time.Second
	dialAttempts  = 3
	// Backoff between session requests the server refused.
	refusalBase = 50 * time.Millisecond
	refusalMax  = 2 * time.Second
)

// Client is one SSH connection to one site, shared by every caller. It is
// safe for concurrent use. See the package documentation for the design.
type Client struct {
	cfg  Config
	log  *slog.Logger
	eps  []*endpoint   // the jump hosts in order, then the login node
	keys keyring       // keys whose passphrase was given
	sem  chan struct{} // one token per open session, MaxSessions in all
	est  *Estimator

	dialTok chan struct{} // held by the one goroutine (re)dialing
	closeCh chan struct{}

	mu     sync.Mutex
	cur    *conn
	hops   []*hopConn // kept connections to the jump hosts (eps[i])
	closed bool
	// needLogin is why the Client waits for Login (it wraps
	// ErrNeedsLogin): the last dial met a question nobody could answer.
	// While it is set nothing is dialed.
	needLogin error
	failures  int       // consecutive failed dials
	nextDial  time.Time // no dial before this (backoff)
	lastErr   error     // of the last failed dial
	orphans   []string  // temp files a failed Put could not remove yet
}

var _ backends.Runner = (*Client)(nil)

// conn is one SSH connection; a Client replaces it when it dies.
type conn struct {
	ssh  *ssh.Client
	dead chan struct{} // closed when the connection has ended
	err  error         // why it ended; read only after <-dead

	sftpTok chan struct{} // held while the SFTP client is being created
	sftpMu  sync.Mutex
	sftp    *sftpSession
}

func (cn *conn) alive() bool {
	select {
	case <-cn.dead:
		return false
	default:
		return true
	}
}

// Dial connects to the site and returns a Client holding the connection.
// Dial and handshake are bounded by ctx and by cfg.DialTimeout, whichever
// ends first. Errors wrap ErrHostKeyChanged, ErrHostKeyUnknown,
// ErrHostKeyRevoked, ErrAuth, or backends.ErrUnavailable (network, timeout).
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	c, err := newClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cn, err := c.dial(ctx, nil)
	if err != nil {
		if !cfg.Lazy || !errors.Is(err, backends.ErrUnavailable) || ctx.Err() != nil {
			c.closeHops()
			return nil, err
		}
		c.mu.Lock()
		d := c.failed(err)
		c.mu.Unlock()
		if errors.Is(err, ErrNeedsLogin) {
			c.log.Warn("ssh site needs a login; nothing is sent there until then", "err", err)
		} else {
			c.log.Warn("ssh site unreachable; will connect on first use", "err", err, "next_in", d)
		}
		return c, nil
	}
	c.cur = cn
	return c, nil
}

// newClient resolves and checks cfg and returns a Client that has not
// dialed yet.
func newClient(ctx context.Context, cfg Config) (*Client, error) {
	cfg, err := ResolveSSHConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	eps, err := endpoints(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{
		cfg:     cfg,
		log:     cfg.Logger.With("site", cfg.addr()),
		eps:     eps,
		hops:    make([]*hopConn, len(eps)-1),
		sem:     make(chan struct{}, cfg.MaxSessions),
		est:     NewEstimator(0),
		dialTok: make(chan struct{}, 1),
		closeCh: make(chan struct{}),
	}, nil
}

// Err is why the Client has no connection now: the last dial error, nil
// while connected or before anything failed. A Lazy Dial to a site that
// was down returns a Client whose Err says so.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil && c.cur.alive() {
		return nil
	}
	if c.needLogin != nil {
		return c.needLogin
	}
	return c.lastErr
}

// Estimator returns the bandwidth and latency estimate of this site, fed by
// every transfer of every Stager of this Client.
func (c *Client) Estimator() *Estimator { return c.est }

// Close closes the connection (and its SFTP client). Later calls fail with
// ErrClosed. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.closeCh)
	cn := c.cur
	c.cur = nil
	c.mu.Unlock()
	defer c.closeHops()
	if cn == nil {
		return nil
	}
	// Closing the connection first ends the SFTP session without waiting
	// for the server; the SFTP client then shuts down at once.
	err := cn.ssh.Close()
	cn.sftpMu.Lock()
	if cn.sftp != nil {
		cn.sftp.Client.Close()
	}
	cn.sftpMu.Unlock()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("closing ssh connection to %s: %w", c.cfg.addr(), err)
	}
	return nil
}

// closeHops closes the kept connections to the jump hosts.
func (c *Client) closeHops() {
	c.mu.Lock()
	hops := append([]*hopConn(nil), c.hops...)
	clear(c.hops)
	c.mu.Unlock()
	for _, h := range hops {
		if h != nil {
			h.ssh.Close()
		}
	}
}

// dial makes one connection attempt through the path: each jump host
// whose kept connection is alive is reused, the others are dialed (through
// the one before), then the login node; each step bounded by ctx and
// DialTimeout. p answers the questions a person must (nil: Config.Prompter).
// Called by one goroutine at a time (holding dialTok, or from Dial).
func (c *Client) dial(ctx context.Context, p Prompter) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	if p == nil {
		p = c.cfg.Prompter
	}
	var via *ssh.Client
	viaLabel := ""
	for i, ep := range c.eps[:len(c.eps)-1] {
		c.mu.Lock()
		h := c.hops[i]
		c.mu.Unlock()
		if !h.alive() {
			nc, err := dialTCP(ctx, ep, via, viaLabel)
			if err != nil {
				return nil, err
			}
			sc, err := c.handshake(ctx, ep, nc, p)
			if err != nil {
				return nil, err
			}
			h = &hopConn{ssh: sc, dead: make(chan struct{})}
			go func() {
				err := sc.Wait()
				close(h.dead)
				c.log.Info("ssh connection to jump host ended", "hop", ep.label, "err", err)
			}()
			if c.cfg.KeepAlive > 0 {
				go c.keepalive(sc, h.dead)
			}
			c.log.Info("ssh connected", "hop", ep.label)
			c.mu.Lock()
			closed := c.closed
			if !closed {
				c.hops[i] = h
			}
			c.mu.Unlock()
			if closed {
				sc.Close()
				return nil, ErrClosed
			}
		}
		via, viaLabel = h.ssh, ep.label
	}
	ep := c.eps[len(c.eps)-1]
	nc, err := dialTCP(ctx, ep, via, viaLabel)
	if err != nil {
		return nil, err
	}
	sc, err := c.handshake(ctx, ep, nc, p)
	if err != nil {
		return nil, err
	}
	cn := &conn{
		ssh:     sc,
		dead:    make(chan struct{}),
		sftpTok: make(chan struct{}, 1),
	}
	go func() {
		cn.err = cn.ssh.Wait()
		close(cn.dead)
		c.log.Info("ssh connection ended", "err", cn.err)
	}()
	if c.cfg.KeepAlive > 0 {
		go c.keepalive(cn.ssh, cn.dead)
	}
	c.log.Info("ssh connected", "user", c.cfg.User, "server_version", string(sc.ServerVersion()), "jump_hosts", len(c.eps)-1)
	return cn, nil
}

// keepalive sends keepalive@openssh.com every KeepAlive; an unanswered
// request (no reply within another KeepAlive) closes the connection, so the
// next caller reconnects instead of hanging on a dead TCP connection.
func (c *Client) keepalive(sc *ssh.Client, dead <-chan struct{}) {
	t := time.NewTicker(c.cfg.KeepAlive)
	defer t.Stop()
	for {
		select {
		case <-dead:
			return
		case <-t.C:
		}
		res := make(chan error, 1)
		go func() {
			// Any reply (OpenSSH answers "failure" to this request) proves
			// the connection is alive.
			_, _, err := sc.SendRequest("keepalive@openssh.com", true, nil)
			res <- err
		}()
		timeout := time.NewTimer(c.cfg.KeepAlive)
		select {
		case err := <-res:
			timeout.Stop()
			if err != nil {
				c.log.Warn("ssh keepalive failed; closing the connection", "err", err)
				sc.Close()
				return
			}
		case <-timeout.C:
			c.log.Warn("ssh keepalive unanswered; closing the connection", "waited", c.cfg.KeepAlive)
			sc.Close()
			return
		case <-dead:
			timeout.Stop()
			return
		}
	}
}

// get returns the live connection, redialing (one goroutine at a time, with
// exponential backoff across failures) when it has died.
func (c *Client) get(ctx context.Context) (*conn, error) {
	for attempt := 1; ; attempt++ {
		if cn, err := c.current(); err != nil || cn != nil {
			return cn, err
		}
		select {
		case c.dialTok <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting to reconnect to %s: %w", c.cfg.addr(), ctx.Err())
		case <-c.closeCh:
			return nil, ErrClosed
		}
		cn, err := c.redial(ctx)
		<-c.dialTok
		if err == nil {
			return cn, nil
		}
		if !errors.Is(err, backends.ErrUnavailable) || ctx.Err() != nil || attempt >= dialAttempts {
			return nil, err
		}
	}
}

// current returns the live connection, nil if there is none.
func (c *Client) current() (*conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.cur != nil && c.cur.alive() {
		return c.cur, nil
	}
	if c.needLogin != nil {
		return nil, c.needLogin
	}
	return nil, nil
}

// redial is called holding dialTok.
func (c *Client) redial(ctx context.Context) (*conn, error) {
	if cn, err := c.current(); err != nil || cn != nil {
		return cn, err // someone else reconnected meanwhile
	}
	c.mu.Lock()
	wait, failures, lastErr := time.Until(c.nextDial), c.failures, c.lastErr
	c.mu.Unlock()
	if wait > 0 {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, unavailable("%s is in reconnect backoff for another %s after %d failed attempts (last: %v)",
				c.cfg.addr(), wait.Round(time.Millisecond), failures, lastErr)
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("reconnect backoff for %s: %w", c.cfg.addr(), err)
		}
	}
	c.log.Info("ssh reconnecting", "after_failures", failures)
	cn, err := c.dial(ctx, nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && ctx.Err() != nil {
		return nil, err // the caller gave up; says nothing about the site
	}
	if err != nil {
		d := c.failed(err)
		c.log.Warn("ssh reconnect failed", "err", err, "failures", c.failures, "next_in", d)
		return nil, err
	}
	if c.closed {
		cn.ssh.Close()
		return nil, ErrClosed
	}
	c.failures, c.nextDial, c.lastErr, c.needLogin = 0, time.Time{}, nil, nil
	c.cur = cn
	return cn, nil
}

// failed records a failed dial and schedules the next one after the
// backoff, which it returns. c.mu held.
func (c *Client) failed(err error) time.Duration {
	c.failures++
	d := min(reconnectBase<<min(c.failures-1, 16), reconnectMax)
	d += time.Duration(rand.Int64N(int64(d)/5 + 1))
	c.nextDial = time.Now().Add(d)
	c.lastErr = err
	if errors.Is(err, ErrNeedsLogin) {
		c.needLogin = err
	}
	return d
}

// NeedsLogin reports whether the Client waits for Login: its connection
// is gone and the next one needs answers only a person can give.
func (c *Client) NeedsLogin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.needLogin != nil && (c.cur == nil || !c.cur.alive())
}

// Login connects with p answering the questions of the login (one-time
// passwords, key passphrases) and keeps the connection for every later
// call, with keepalives. It returns at once (already true) while the
// Client is connected. A key's passphrase given here is kept in memory
// for the Client's lifetime; a one-time password is used once. Errors are
// Dial's (a rejected answer is ErrAuth).
func (c *Client) Login(ctx context.Context, p Prompter) (already bool, err error) {
	if p == nil {
		return false, errors.New("transport: Login needs a Prompter")
	}
	select {
	case c.dialTok <- struct{}{}:
	case <-ctx.Done():
		return false, fmt.Errorf("waiting to log in to %s: %w", c.cfg.addr(), ctx.Err())
	case <-c.closeCh:
		return false, ErrClosed
	}
	defer func() { <-c.dialTok }()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false, ErrClosed
	}
	if c.cur != nil && c.cur.alive() {
		c.mu.Unlock()
		return true, nil
	}
	c.mu.Unlock()
	cn, err := c.dial(ctx, p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		return false, err
	}
	if c.closed {
		cn.ssh.Close()
		return false, ErrClosed
	}
	c.failures, c.nextDial, c.lastErr, c.needLogin = 0, time.Time{}, nil, nil
	c.cur = cn
	c.log.Info("ssh login done; connection kept")
	return false, nil
}

// acquire takes one session slot; release gives it back.
func (c *Client) acquire(ctx context.Context) (release func(), err error) {
	select {
	case c.sem <- struct{}{}:
		return func() { <-c.sem }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: all %d session slots to %s stayed busy: %w", ErrSessionLimit, c.cfg.MaxSessions, c.cfg.addr(), ctx.Err())
	case <-c.closeCh:
		return nil, ErrClosed
	}
}

// session opens a session (the caller holds a slot), retrying with backoff
// while the server refuses (sshd's MaxSessions may be lower than ours, or
// count sessions still closing) and reconnecting once if the connection
// turns out dead.
func (c *Client) session(ctx context.Context) (*ssh.Session, *conn, error) {
	reconnected := false
	for {
		cn, err := c.get(ctx)
		if err != nil {
			return nil, nil, err
		}
		s, err := c.openOn(ctx, cn)
		if err == nil || reconnected || !errors.Is(err, errConnDead) || ctx.Err() != nil {
			return s, cn, err
		}
		// openOn closed the dead connection; once its watcher has seen it
		// end, get no longer hands it out and dials a new one.
		select {
		case <-cn.dead:
		case <-ctx.Done():
			return nil, cn, err
		}
		reconnected = true
	}
}

// errConnDead marks a session open that failed because the connection is
// gone (as opposed to a refusal).
var errConnDead = errors.New("connection lost")

// openOn opens a session on cn, backing off while the server refuses.
func (c *Client) openOn(ctx context.Context, cn *conn) (*ssh.Session, error) {
	delay := refusalBase
	for refusals := 0; ; refusals++ {
		s, err := newSessionCtx(ctx, cn.ssh)
		if err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			if refusals > 0 {
				// Time ran out during a retry rather than during the wait
				// before one (a busy machine): still the session limit.
				return nil, fmt.Errorf("%w: %s refused %d session requests, then the caller's time ran out: %w",
					ErrSessionLimit, c.cfg.addr(), refusals, err)
			}
			return nil, fmt.Errorf("opening a session on %s: %w", c.cfg.addr(), err)
		}
		var oce *ssh.OpenChannelError
		if !errors.As(err, &oce) {
			cn.ssh.Close() // make sure: the next get redials
			return nil, unavailable("opening a session on %s: %w: %w", c.cfg.addr(), errConnDead, err)
		}
		// OpenSSH refuses a session beyond MaxSessions with "open failed",
		// as "administratively prohibited" in some versions and "connect
		// failed" in others (9.2): every reason but an unknown channel type
		// is a refusal worth waiting out.
		if oce.Reason == ssh.UnknownChannelType {
			return nil, unavailable("%s refused a session: %w", c.cfg.addr(), err)
		}
		if refusals == 0 {
			c.log.Debug("ssh server refused a session; backing off", "err", err)
		}
		if err := sleep(ctx, delay+time.Duration(rand.Int64N(int64(delay)/4+1))); err != nil {
			return nil, fmt.Errorf("%w: %s refused %d session requests (%v; sshd MaxSessions?): %w",
				ErrSessionLimit, c.cfg.addr(), refusals+1, oce, err)
		}
		delay = min(2*delay, refusalMax)
	}
}

// newSessionCtx is ssh.Client.NewSession bounded by ctx (a server that
// never answers the channel open would otherwise block until keepalive gives
// up on the connection). A session that arrives after ctx ended is closed.
func newSessionCtx(ctx context.Context, sc *ssh.Client) (*ssh.Session, error) {
	type result struct {
		s   *ssh.Session
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := sc.NewSession()
		ch <- result{s, err}
	}()
	select {
	case r := <-ch:
		return r.s, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.s != nil {
				r.s.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// Run runs argv on the site's login node. The words are quoted with Quote,
// so each reaches the remote program literally. stdin may be nil. A non-zero
// exit is returned in Result.ExitCode with a nil error. A lost connection or
// a missing exit status is an error wrapping backends.ErrUnavailable; the
// command is then NOT retried (it may have run, e.g. sbatch). An error from
// before the command was sent (no slot, connection or session) also wraps
// ErrNotSent. When ctx ends
// while the command runs, the remote process is sent SIGTERM, the session is
// closed and Run returns at once with ctx.Err() wrapped. (OpenSSH delivers
// the signal from 7.9 on, and not to root logins; a process that does not
// get it keeps running, and holding its sshd session, until it ends.)
func (c *Client) Run(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	var res backends.Result
	if len(argv) == 0 {
		return res, fmt.Errorf("%w: empty argv (want a program and its arguments)", backends.ErrInvalidSpec)
	}
	for i, w := range argv {
		if strings.IndexByte(w, 0) >= 0 {
			return res, fmt.Errorf("%w: argv[%d] contains a NUL byte, which no remote program can receive", backends.ErrInvalidSpec, i)
		}
	}
	start := time.Now()
	release, err := c.acquire(ctx)
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	defer release()
	s, _, err := c.session(ctx)
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	defer s.Close()
	stdout, stderr := &capBuffer{max: c.cfg.MaxOutput}, &capBuffer{max: c.cfg.MaxOutput}
	s.Stdout, s.Stderr = stdout, stderr
	if stdin != nil {
		s.Stdin = stdin
	}
	stop := context.AfterFunc(ctx, func() { s.Close() }) // unblocks Start
	err = s.Start(Quote(argv))
	if !stop() {
		return res, fmt.Errorf("starting %s on %s: %w", argv[0], c.cfg.addr(), ctx.Err())
	}
	if err != nil {
		return res, unavailable("starting %s on %s: %w", argv[0], c.cfg.addr(), err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		s.Signal(ssh.SIGTERM) // OpenSSH >= 7.9 delivers it; then close anyway
		s.Close()
		res.Duration = time.Since(start)
		return res, fmt.Errorf("running %s on %s: %w", argv[0], c.cfg.addr(), ctx.Err())
	}
	res.Stdout, res.Stderr, res.Duration = stdout.Bytes(), stderr.Bytes(), time.Since(start)
	if stdout.over || stderr.over {
		return res, fmt.Errorf("%w: %s on %s wrote more than %d bytes to stdout or stderr; the rest was discarded",
			ErrOutputLimit, argv[0], c.cfg.addr(), c.cfg.MaxOutput)
	}
	var ee *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitStatus()
	case errors.As(err, &missing):
		return res, unavailable("%s on %s ended without an exit status (connection lost?): %w", argv[0], c.cfg.addr(), err)
	default:
		return res, unavailable("running %s on %s: %w", argv[0], c.cfg.addr(), err)
	}
	return res, nil
}

// capBuffer keeps the first max bytes written to it and discards the rest
// (still accepting them, so the remote command is not blocked), noting
// that it did. (Not an embedded bytes.Buffer: io.Copy would use its
// ReadFrom and bypass the cap.)
type capBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *capBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		b.over = true
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *capBuffer) Bytes() []byte { return b.buf.Bytes() }

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
