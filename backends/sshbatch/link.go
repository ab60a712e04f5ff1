package sshbatch

import (
	"context"
	"fmt"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport"
)

// Link is what a backend made by its Connect holds of its one SSH
// connection, and answers the backend's Connectivity, LinkEstimator and
// Close from. The zero Link is a backend built on a caller's Runner: no
// connection error, no estimate, Close a no-op.
type Link struct{ c *transport.Client }

// NewLink returns the Link of c.
func NewLink(c *transport.Client) Link { return Link{c: c} }

// ConnErr is why the connection is down (transport.Client.Err), nil while
// it is up or for the zero Link.
func (l Link) ConnErr() error {
	if l.c == nil {
		return nil
	}
	return l.c.Err()
}

// LinkEstimate is the connection's transfer cost as measured so far
// (transport.Estimator); ok is false for the zero Link or before the first
// transfer.
func (l Link) LinkEstimate() (secPerByte float64, latency time.Duration, ok bool) {
	if l.c == nil {
		return 0, 0, false
	}
	est := l.c.Estimator()
	if est == nil || est.Count() == 0 {
		return 0, 0, false
	}
	return est.SecPerByte(), est.Latency(), true
}

// Login logs the connection in with p answering what the site asks (a
// one-time password, a key passphrase) and keeps it (transport.Client.Login);
// the zero Link has nothing to log in to.
func (l Link) Login(ctx context.Context, p transport.Prompter) (already bool, err error) {
	if l.c == nil {
		return false, fmt.Errorf("%w: this backend was built on a caller's connection", backends.ErrUnsupported)
	}
	return l.c.Login(ctx, p)
}

// Close closes the connection (a no-op for the zero Link).
func (l Link) Close() error {
	if l.c == nil {
		return nil
	}
	return l.c.Close()
}
