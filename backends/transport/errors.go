package transport

import (
	"errors"
	"fmt"

	"github.com/gridsub/gridsub/backends"
)

// Sentinel errors of the transport. Every error returned by this package
// that falls into one of these classes wraps the sentinel (test with
// errors.Is); the wrapping error carries the detail (host, port, file, what
// to do).
//
// Connection-level failures (dial refused or timed out, connection lost,
// missing exit status, session limit) also match backends.ErrUnavailable, so
// backends.Retryable reports them as retryable. Host-key and authentication
// failures do not: they need a human and retrying them unchanged is useless.
var (
	// ErrHostKeyChanged: the server offered a host key that differs from the
	// key(s) known_hosts lists for that host (possible man-in-the-middle).
	ErrHostKeyChanged = errors.New("ssh host key changed")
	// ErrHostKeyUnknown: known_hosts has no entry (and no @cert-authority)
	// for the host.
	ErrHostKeyUnknown = errors.New("ssh host key unknown")
	// ErrHostKeyRevoked: the offered host key is marked @revoked in
	// known_hosts.
	ErrHostKeyRevoked = errors.New("ssh host key revoked")
	// ErrAuth: the server accepted none of the credentials offered (key
	// files, agent keys), or there were no credentials to offer.
	ErrAuth = errors.New("ssh authentication failed")
	// ErrSessionLimit: no session could be had before the context ended:
	// the server kept refusing new sessions on the connection (sshd
	// MaxSessions), or all of Config.MaxSessions slots stayed busy. Also
	// matches backends.ErrUnavailable.
	ErrSessionLimit = fmt.Errorf("ssh server refused new sessions (session limit): %w", backends.ErrUnavailable)
	// ErrPathEscape: a remote path given to a Stager is absolute or leaves
	// the stager's root via "..". Also matches backends.ErrInvalidSpec.
	ErrPathEscape = fmt.Errorf("remote path escapes the staging root: %w", backends.ErrInvalidSpec)
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("ssh client closed")
)

// unavailable wraps err so that it matches backends.ErrUnavailable.
func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %w", backends.ErrUnavailable, fmt.Errorf(format, args...))
}
