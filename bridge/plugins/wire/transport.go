package wire

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gridsub/gridsub/backends"
)

// Sentinels of the boundary itself (the plugins package re-exports them in
// its var block).
var (
	// ErrPluginExited: the plugin process is gone (crashed, killed, or the
	// connection to it broke) while a call was made or in flight. It wraps
	// backends.ErrUnavailable: retryable, and a Submit that failed with it
	// may have reached the site, so the caller looks the tag up first.
	ErrPluginExited = fmt.Errorf("plugin exited: %w", backends.ErrUnavailable)
	// ErrTransport: the gRPC call failed for a reason that is neither the
	// caller's context, a dead plugin nor an unimplemented method (a
	// protocol bug, a message too large). Not retryable.
	ErrTransport = errors.New("plugin call failed")
)

// Join returns a context done when ctx or the plugin's done context is
// done; its cause is ErrPluginExited when the plugin went first. Call
// stop when the call returns.
func Join(ctx, pluginDone context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(pluginDone, func() { cancel(ErrPluginExited) })
	return c, func() { stop(); cancel(nil) }
}

// CallError maps the error of a gRPC call (not a domain error: those travel
// in the reply) to what the caller sees, per PLUGIN-STYLE §5: the caller's
// ctx done → ctx.Err(); the plugin gone → ErrPluginExited; Unimplemented →
// backends.ErrUnsupported; the caller's deadline passed on the plugin's
// side first → context.DeadlineExceeded; anything else → ErrTransport
// naming the method.
// ctx is the caller's context, joined the joined one.
func CallError(plugin, method string, ctx, joined context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("plugin %s: %s: %w", plugin, method, ctx.Err())
	}
	if errors.Is(context.Cause(joined), ErrPluginExited) {
		return fmt.Errorf("plugin %s: %s: %w", plugin, method, ErrPluginExited)
	}
	switch status.Code(err) {
	case codes.Unavailable:
		return fmt.Errorf("plugin %s: %s: %w (%s)", plugin, method, ErrPluginExited, status.Convert(err).Message())
	case codes.Unimplemented:
		return fmt.Errorf("plugin %s: %s: %w", plugin, method, backends.ErrUnsupported)
	case codes.DeadlineExceeded:
		// gRPC gives the plugin the caller's deadline: it can pass there a
		// hair before it passes here.
		return fmt.Errorf("plugin %s: %s: %w", plugin, method, context.DeadlineExceeded)
	case codes.Canceled:
		// The plugin's side was cancelled while the caller's ctx was not:
		// the host is shutting the plugin down.
		return fmt.Errorf("plugin %s: %s: %w", plugin, method, ErrPluginExited)
	}
	return fmt.Errorf("plugin %s: %s: %w: %s", plugin, method, ErrTransport, status.Convert(err).Message())
}

// TimeToWire encodes t as Unix nanoseconds; the zero time is 0.
func TimeToWire(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// TimeFromWire is the inverse of TimeToWire (in UTC).
func TimeFromWire(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
