package plannerrpc

import (
	"errors"
	"fmt"

	"github.com/gridsub/gridsub/bridge/plugins/wire"
)

// Errors of the planner boundary.
var (
	// ErrPluginExited: the plugin process is gone (crashed, killed, or
	// closed) while or before a call ran. It is the plugin layer's one
	// sentinel (wire.ErrPluginExited, also plugins.ErrPluginExited), so
	// errors.Is answers alike for a backend and a planner plugin.
	ErrPluginExited = wire.ErrPluginExited
	// ErrUnsupported: the plugin does not serve the RPC (e.g. the session
	// RPCs of a planner that is not a policy.Incremental). It matches
	// errors.ErrUnsupported too.
	ErrUnsupported = fmt.Errorf("planner plugin: %w", errors.ErrUnsupported)
	// ErrClosed: the session or the plugin was closed by its owner.
	ErrClosed = errors.New("planner plugin: closed")
)

// RemoteError is a failure the plugin reported (its planner's error, or a
// request it refused), or a transport failure that is neither of the
// sentinels above. It is not retryable: the same request gives the same
// answer from a deterministic planner.
type RemoteError struct {
	Plugin string // the planner's name
	Method string // the RPC: Plan, NewSession, Passes, ...
	Msg    string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("planner plugin %s: %s: %s", e.Plugin, e.Method, e.Msg)
}
