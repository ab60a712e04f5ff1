package transport

import (
	"context"
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
	// ErrHostCertInvalid: the server offered a host certificate outside
	// its validity window (expired, or not yet valid); the message gives
	// the window.
	ErrHostCertInvalid = errors.New("ssh host certificate not valid now")
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
	// ErrSpecialFile: a remote path to stage or fetch is, or passes through,
	// something other than a regular file or a directory (a symbolic link,
	// device, FIFO or socket); the message names the path and its type.
	// Nothing is followed or read. Also matches backends.ErrInvalidSpec.
	ErrSpecialFile error = &kindErr{"not a regular file or directory", backends.ErrInvalidSpec}
	// ErrTooLarge: a file is larger than Config.MaxFileSize (or the limit
	// the caller gave); the copy stopped at the limit and the message names
	// the file and the limit. Also matches backends.ErrInvalidSpec.
	ErrTooLarge error = &kindErr{"over the staging size limit", backends.ErrInvalidSpec}
	// ErrTransferTimeout: a transfer did not finish within its deadline
	// (Config.MinTransferTime plus its size at Config.MinTransferRate) and
	// was cancelled. Also matches context.DeadlineExceeded (so
	// backends.Retryable reports it as retryable).
	ErrTransferTimeout error = &kindErr{"transfer deadline passed", context.DeadlineExceeded}
	// ErrOutputLimit: a remote command wrote more than Config.MaxOutput
	// bytes to stdout or stderr; Run keeps the first MaxOutput bytes of each
	// and discards the rest. Also matches backends.ErrBadOutput.
	ErrOutputLimit error = &kindErr{"command output over the limit", backends.ErrBadOutput}
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("ssh client closed")
	// ErrNotSent: Run failed before the command was sent (no session slot,
	// no connection, no session): the remote side never saw it, so a
	// submission that failed so is certainly not at the site. Wraps
	// nothing itself; the wrapping error carries the cause's classes too.
	ErrNotSent = errors.New("command not sent")
)

// unavailable wraps err so that it matches backends.ErrUnavailable.
func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %w", backends.ErrUnavailable, fmt.Errorf(format, args...))
}

// kindErr is a sentinel that also matches a broader class (errors.Is) without
// repeating that class's text in every message.
type kindErr struct {
	msg   string
	class error
}

func (e *kindErr) Error() string { return e.msg }
func (e *kindErr) Unwrap() error { return e.class }
