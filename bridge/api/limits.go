package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Limits bound what one client can hold of a server: how long it may take
// to send its headers and its request, how long the answer may take, how
// long an idle keep-alive connection stays open, how large its headers may
// be, and how many connections one listener serves at once. A zero field
// takes its default (DefaultLimits).
//
// No route of the API streams (every answer is one JSON document), so
// WriteTimeout bounds every response; a future streaming route must set
// its own deadline with http.ResponseController.SetWriteDeadline.
type Limits struct {
	// ReadHeaderTimeout bounds the request line and headers. It is what cuts
	// off a client that never authenticates: the token is only checked once
	// the headers are in.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the whole request, body included (a body trickled
	// in a byte at a time is cut off when it runs out).
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of the request headers to
	// the end of the response.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no new request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers.
	MaxHeaderBytes int
	// MaxConns caps the connections one listener serves at once; further
	// clients wait in the kernel's accept queue until one closes.
	MaxConns int
	// MaxUnauthConns caps, on a TCP listener, the connections that have
	// not yet sent a request with the bearer token (default MaxConns/8, at
	// least 4); MaxUnauthPerAddr caps them per client IP address (default
	// MaxUnauthConns/4, at least 2). A new connection over either cap (or
	// over MaxConns) closes the oldest unauthenticated one of that share
	// instead of waiting, so clients without a token can never hold the
	// slots of token holders; a request refused 401 closes its
	// connection. The unix socket has no token and no such share.
	MaxUnauthConns   int
	MaxUnauthPerAddr int
}

// Defaults of Limits and of ServerOptions.MaxBody.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConns          = 256
	DefaultMaxBody           = 1 << 20
)

// DefaultLimits are the limits of a server whose Limits are zero.
func DefaultLimits() Limits {
	return Limits{ReadHeaderTimeout: DefaultReadHeaderTimeout, ReadTimeout: DefaultReadTimeout,
		WriteTimeout: DefaultWriteTimeout, IdleTimeout: DefaultIdleTimeout,
		MaxHeaderBytes: DefaultMaxHeaderBytes, MaxConns: DefaultMaxConns}
}

// WithDefaults returns l with every zero (or negative) field set to its
// default.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = d.ReadHeaderTimeout
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = d.ReadTimeout
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = d.WriteTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.MaxConns <= 0 {
		l.MaxConns = d.MaxConns
	}
	if l.MaxUnauthConns <= 0 {
		l.MaxUnauthConns = max(4, l.MaxConns/8)
	}
	l.MaxUnauthConns = min(l.MaxUnauthConns, l.MaxConns)
	if l.MaxUnauthPerAddr <= 0 {
		l.MaxUnauthPerAddr = max(2, l.MaxUnauthConns/4)
	}
	l.MaxUnauthPerAddr = min(l.MaxUnauthPerAddr, l.MaxUnauthConns)
	return l
}

// NewHTTPServer returns an http.Server for h bounded by lim (defaults for
// its zero fields). Serve it on a listener from LimitListener (or
// ListenTCP, which applies MaxConns itself) so that MaxConns holds too.
func NewHTTPServer(h http.Handler, lim Limits, log *slog.Logger) *http.Server {
	lim = lim.WithDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnContext:       connContext, // MarkAuthenticated and Refuse find the connection
	}
}

// LimitListener caps the connections l serves at once at n (n <= 0: the
// default, DefaultMaxConns). Accept waits while n are open.
func LimitListener(l net.Listener, n int) net.Listener {
	if n <= 0 {
		n = DefaultMaxConns
	}
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

// limitListener holds at most cap(sem) connections open at once, and
// reads the peer's credentials of each unix-socket connection it accepts
// (who.go). It keeps the inner listener's Addr (a *unixListener reports
// its path, which tells Serve that it is a socket).
type limitListener struct {
	net.Listener
	sem  chan struct{}
	done chan struct{}
	once sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: withPeer(c), release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back when closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// bodyLimit reads the whole request body, at most max bytes, before next
// runs, so that every handler sees a body that is complete and bounded. A
// body over the limit is answered 413 with an ErrorBody naming the limit; a
// body that does not arrive in time (ReadTimeout) gets 408. It runs after
// authentication: an unauthenticated body is never read.
func (s *Server) bodyLimit(next http.Handler) http.Handler {
	max := s.opts.MaxBody
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > max {
			s.tooLarge(w, r, max)
			return
		}
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			s.tooLarge(w, r, max)
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			s.fail(w, r, http.StatusRequestTimeout, CodeTimeout, "the request body did not arrive in time; send it at once")
			return
		case err != nil:
			w.Header().Set("Connection", "close")
			s.fail(w, r, http.StatusBadRequest, CodeBadRequest, "reading the request body: "+err.Error())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		next.ServeHTTP(w, r)
	})
}

func (s *Server) tooLarge(w http.ResponseWriter, r *http.Request, max int64) {
	w.Header().Set("Connection", "close")
	s.fail(w, r, http.StatusRequestEntityTooLarge, CodeTooLarge,
		fmt.Sprintf("request body larger than the limit of %d bytes (ServerOptions.MaxBody)", max))
}
