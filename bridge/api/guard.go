package api

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// guardListener bounds the connections of a TCP listener by who they are
// known to be. A new connection is unauthenticated until a request on it
// carries the bearer token (the auth middleware marks it, MarkAuthenticated).
// Unauthenticated connections get a small share of their own
// (maxUnauth, and perAddr per client address); when a new connection
// would exceed a share, or the listener's cap (maxConns), the oldest
// unauthenticated connection of that share is closed to make room — the
// one that has sent nothing yet first — so that a token holder's new
// connection always gets in, however many connections clients without a
// token hold. A connection whose request is refused 401 is closed after
// that answer (the middleware sets "Connection: close"). When every
// connection is authenticated and the cap is reached, Accept waits, as
// LimitListener's does.
type guardListener struct {
	net.Listener
	maxConns, maxUnauth, perAddr int

	mu     sync.Mutex
	cond   *sync.Cond
	total  int
	unauth []*guardConn   // unauthenticated, oldest first
	byAddr map[string]int // unauthenticated connections per client IP
	closed bool
}

func newGuardListener(l net.Listener, maxConns, maxUnauth, perAddr int) *guardListener {
	g := &guardListener{Listener: l, maxConns: maxConns, maxUnauth: maxUnauth, perAddr: perAddr, byAddr: map[string]int{}}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// guardConn is one connection of a guardListener.
type guardConn struct {
	net.Conn
	g      *guardListener
	addr   string
	authed atomic.Bool
	spoke  atomic.Bool // it has sent bytes
	once   sync.Once
}

func (c *guardConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.spoke.Load() {
		c.spoke.Store(true)
	}
	return n, err
}

func (c *guardConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.g.release(c) })
	return err
}

func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	h, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return h
}

func (g *guardListener) Accept() (net.Conn, error) {
	c, err := g.Listener.Accept()
	if err != nil {
		return nil, err
	}
	gc := &guardConn{Conn: c, g: g, addr: hostOf(c.RemoteAddr())}
	var evict []*guardConn
	g.mu.Lock()
	if g.byAddr[gc.addr] >= g.perAddr {
		evict = append(evict, g.oldest(func(o *guardConn) bool { return o.addr == gc.addr }))
	}
	if len(g.unauth)-len(evict) >= g.maxUnauth {
		evict = append(evict, g.oldest(func(o *guardConn) bool { return !contains(evict, o) }))
	}
	for g.total-len(evict) >= g.maxConns {
		if o := g.oldest(func(o *guardConn) bool { return !contains(evict, o) }); o != nil {
			evict = append(evict, o)
			continue
		}
		if g.closed {
			g.mu.Unlock()
			c.Close()
			return nil, net.ErrClosed
		}
		// Every slot is a token holder's: this one waits, as in
		// LimitListener, until one closes.
		g.cond.Wait()
	}
	g.total++
	g.unauth = append(g.unauth, gc)
	g.byAddr[gc.addr]++
	g.mu.Unlock()
	for _, o := range evict {
		if o != nil && !o.authed.Load() {
			o.Close()
		}
	}
	return gc, nil
}

func contains(l []*guardConn, c *guardConn) bool {
	for _, o := range l {
		if o == c {
			return true
		}
	}
	return false
}

// oldest is the oldest unauthenticated connection that ok accepts, one
// that has sent nothing yet before any other; nil if none. g.mu held.
func (g *guardListener) oldest(ok func(*guardConn) bool) *guardConn {
	var first *guardConn
	for _, o := range g.unauth {
		if !ok(o) || o.authed.Load() {
			continue
		}
		if !o.spoke.Load() {
			return o
		}
		if first == nil {
			first = o
		}
	}
	return first
}

// dropUnauth removes c from the unauthenticated share. g.mu held.
func (g *guardListener) dropUnauth(c *guardConn) bool {
	for i, o := range g.unauth {
		if o == c {
			g.unauth = append(g.unauth[:i], g.unauth[i+1:]...)
			if g.byAddr[c.addr]--; g.byAddr[c.addr] <= 0 {
				delete(g.byAddr, c.addr)
			}
			return true
		}
	}
	return false
}

// promote moves c out of the unauthenticated share.
func (g *guardListener) promote(c *guardConn) {
	if c.authed.Swap(true) {
		return
	}
	g.mu.Lock()
	g.dropUnauth(c)
	g.mu.Unlock()
}

// release forgets a closed connection.
func (g *guardListener) release(c *guardConn) {
	g.mu.Lock()
	g.dropUnauth(c)
	g.total--
	g.cond.Broadcast()
	g.mu.Unlock()
}

func (g *guardListener) Close() error {
	g.mu.Lock()
	g.closed = true
	g.cond.Broadcast()
	g.mu.Unlock()
	return g.Listener.Close()
}

// connKey holds a request's connection in its context (NewHTTPServer's
// ConnContext).
type connKey struct{}

// connContext keeps the connection in its requests' context, and, for a
// unix socket's, its peer's Principal (who.go).
func connContext(ctx context.Context, c net.Conn) context.Context {
	ctx = context.WithValue(ctx, connKey{}, c)
	if lc, ok := c.(*limitConn); ok {
		c = lc.Conn
	} else {
		c = withPeer(c) // a unix socket served without LimitListener
	}
	if p, ok := peerPrincipal(c); ok {
		ctx = context.WithValue(ctx, peerKey{}, p)
	}
	return ctx
}

// guarded is the guardConn under a request's connection (through TLS), or
// nil on a listener without a guard (a unix socket).
func guarded(ctx context.Context) *guardConn {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	gc, _ := c.(*guardConn)
	return gc
}

// MarkAuthenticated records that the request r carried a valid token: its
// connection leaves the share of unauthenticated connections of its TCP
// listener (a no-op on a unix socket). Every handler that checks a token
// calls it on success, and Refuse on failure.
func MarkAuthenticated(r *http.Request) {
	if gc := guarded(r.Context()); gc != nil {
		gc.g.promote(gc)
	}
}

// Refuse prepares the answer to a request without a valid token: its
// connection is closed once the answer is sent, so a refused client holds
// nothing of the server. Call it before writing the status.
func Refuse(w http.ResponseWriter, r *http.Request) {
	if guarded(r.Context()) != nil {
		w.Header().Set("Connection", "close")
	}
}
