package api

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"
)

// Sentinel errors of serving over TCP (ErrNoToken is declared with Serve).
var (
	// ErrShortToken: the bearer token of a TCP listener is shorter than
	// MinTokenLen.
	ErrShortToken = errors.New("the bearer token is too short")
	// ErrPlaintext: a TCP listener on a non-loopback address without TLS
	// and without the explicit override.
	ErrPlaintext = errors.New("refusing to serve the API in clear text on a non-loopback address")
	// ErrTLS: the certificate, key or CA file cannot be used.
	ErrTLS = errors.New("TLS setup")
)

// MinTokenLen is the shortest bearer token a TCP listener accepts.
const MinTokenLen = 32

// TokenAdvice says how to make a good token.
const TokenAdvice = "generate one with `openssl rand -hex 32` (64 hex characters) and pass it in GRIDSUB_TOKEN or --token-file"

// CheckToken says whether token may protect a TCP listener: set, and at
// least MinTokenLen characters. The error never contains the token.
func CheckToken(token string) error {
	switch {
	case token == "":
		return fmt.Errorf("%w; %s", ErrNoToken, TokenAdvice)
	case len(token) < MinTokenLen:
		return fmt.Errorf("%w: it has %d characters, at least %d are needed; %s", ErrShortToken, len(token), MinTokenLen, TokenAdvice)
	}
	return nil
}

// TCPOptions say how ListenTCP secures a TCP listener.
type TCPOptions struct {
	Token string      // the bearer token the server requires (CheckToken)
	TLS   *tls.Config // nil: plain HTTP (see InsecurePlaintext)
	// InsecurePlaintext allows plain HTTP on a non-loopback address: the
	// token and every request then cross the network readable by anyone on
	// the path. Plain HTTP on a loopback address is always allowed.
	InsecurePlaintext bool
	MaxConns          int // concurrent connections (0 = DefaultMaxConns)
	// MaxUnauthConns and MaxUnauthPerAddr bound the connections without a
	// token yet, in all and per client address (see Limits; 0: the
	// defaults).
	MaxUnauthConns, MaxUnauthPerAddr int
}

// ListenTCP listens on addr and returns a listener that serves TLS when
// o.TLS is set and at most o.MaxConns connections at once, of which at
// most o.MaxUnauthConns (o.MaxUnauthPerAddr per client address) have not
// yet shown the token (see Limits.MaxUnauthConns). It refuses (and
// binds nothing) when the token fails CheckToken, and refuses a
// non-loopback address without TLS unless o.InsecurePlaintext (ErrPlaintext).
// Loopback means an IP literal of the loopback range or "localhost"; ":8470"
// and "0.0.0.0:8470" (every interface) and other host names are not. A
// refused address is never bound; the address actually bound is checked
// again.
func ListenTCP(addr string, o TCPOptions) (net.Listener, error) {
	if err := CheckToken(o.Token); err != nil {
		return nil, fmt.Errorf("api: serving on TCP %s: %w", addr, err)
	}
	if o.TLS == nil && !o.InsecurePlaintext && !loopbackName(addr) {
		return nil, plaintextErr(addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("api: listening on %s: %w", addr, err)
	}
	sl, err := secureTCP(l, o)
	if err != nil {
		l.Close()
		return nil, err
	}
	return sl, nil
}

// secureTCP applies the plaintext rule, the connection cap and TLS to a
// bound TCP listener.
func secureTCP(l net.Listener, o TCPOptions) (net.Listener, error) {
	if o.TLS == nil && !o.InsecurePlaintext && !isLoopback(l.Addr()) {
		return nil, plaintextErr(l.Addr().String())
	}
	lim := Limits{MaxConns: o.MaxConns, MaxUnauthConns: o.MaxUnauthConns, MaxUnauthPerAddr: o.MaxUnauthPerAddr}.WithDefaults()
	var out net.Listener = newGuardListener(l, lim.MaxConns, lim.MaxUnauthConns, lim.MaxUnauthPerAddr)
	if o.TLS != nil {
		out = tls.NewListener(out, o.TLS)
	}
	return out, nil
}

func plaintextErr(addr string) error {
	return fmt.Errorf("api: %s: %w: the bearer token and every job would cross the network unencrypted. "+
		"Give a certificate (broker.tls_cert and broker.tls_key), listen on 127.0.0.1 only, "+
		"or set broker.insecure_plaintext: true if the network is trusted", addr, ErrPlaintext)
}

// loopbackName reports whether a listen address names the loopback
// interface: "localhost" or a loopback IP literal.
func loopbackName(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i]
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// isLoopback reports whether a bound address accepts loopback clients only.
func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// ServerTLS loads a PEM certificate (chain) and its private key for a TCP
// listener and returns a configuration that speaks TLS 1.2 or newer. The
// key file must not be readable by group or others (like ssh, it is
// refused otherwise).
func ServerTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("%w: both a certificate file and a key file are needed (broker.tls_cert, broker.tls_key)", ErrTLS)
	}
	fi, err := os.Stat(keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: key file: %w", ErrTLS, err)
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return nil, fmt.Errorf("%w: key file %s has mode %04o: a private key must be readable by its owner only; chmod 600 %s",
			ErrTLS, keyFile, m, keyFile)
	}
	certPEM, err := readPEM("certificate file", certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readPEM("key file", keyFile)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate %s with key %s: %w", ErrTLS, certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// maxCAFile bounds a PEM file read by ServerTLS and ClientTLS (a CA
// bundle, a certificate chain, a key).
const maxCAFile = 4 << 20

// readPEM reads a PEM file: a regular file of at most maxCAFile bytes,
// opened without blocking (a FIFO would hang the reader; a device such as
// /dev/zero never ends).
func readPEM(what, path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrTLS, what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrTLS, what, err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxCAFile {
		return nil, fmt.Errorf("%w: %s %s must be a regular file of at most %d bytes", ErrTLS, what, path, maxCAFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCAFile+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", ErrTLS, what, path, err)
	}
	if len(b) > maxCAFile {
		return nil, fmt.Errorf("%w: %s %s grew past %d bytes while being read", ErrTLS, what, path, maxCAFile)
	}
	return b, nil
}

// ClientTLS returns a client TLS configuration (TLS 1.2 or newer) that
// trusts the PEM certificates in caFile; caFile "" trusts the system's
// roots. Use it with HTTPClient for a daemon whose certificate is
// self-signed or from a private CA.
func ClientTLS(caFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return c, nil
	}
	pem, err := readPEM("CA file", caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: CA file %s holds no PEM certificate", ErrTLS, caFile)
	}
	c.RootCAs = pool
	return c, nil
}

// HTTPClient returns an *http.Client for NewClient that speaks TLS with
// tc (nil: the defaults) and gives up on a request after timeout (0: no
// limit beyond the request's context).
func HTTPClient(tc *tls.Config, timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tc != nil {
		tr.TLSClientConfig = tc
	}
	return &http.Client{Transport: tr, Timeout: timeout}
}
