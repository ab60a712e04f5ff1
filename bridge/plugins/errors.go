package plugins

import (
	"errors"

	"github.com/gridsub/gridsub/bridge/plugins/wire"
)

// Sentinel errors of the plugin host. Test with errors.Is; the wrapping
// error names the plugin and says what to do.
var (
	// ErrPluginExited: the plugin process is gone (crashed, killed, its
	// connection broken) while a call was made or in flight. It wraps
	// backends.ErrUnavailable, so backends.Retryable reports it retryable;
	// a Submit that failed with it may have reached the site, so the
	// supervisor looks the job's tag up before anyone submits again.
	ErrPluginExited = wire.ErrPluginExited
	// ErrTransport: a plugin call failed for a reason that is neither the
	// caller's ctx, a dead plugin nor an unimplemented method. Not
	// retryable.
	ErrTransport = wire.ErrTransport
	// ErrIncompatible: the plugin speaks a protocol version this gridsub
	// does not (the error names the plugin and both versions).
	ErrIncompatible = errors.New("incompatible plugin protocol version")
	// ErrChecksum: the executable's SHA-256 differs from the configured
	// one; it was not started.
	ErrChecksum = errors.New("plugin checksum mismatch")
	// ErrHandshake: the plugin did not complete the handshake (it hung past
	// the start timeout, exited, printed something else, or is not a
	// gridsub plugin).
	ErrHandshake = errors.New("plugin handshake failed")
	// ErrNotExecutable: the configured plugin path is missing, not a
	// regular file, or not executable.
	ErrNotExecutable = errors.New("plugin is not an executable file")
	// ErrUnknownPlugin: no built-in plugin of that kind has that name.
	ErrUnknownPlugin = errors.New("unknown plugin")
	// ErrCrashLoop: the plugin kept failing and the supervisor stopped
	// restarting it; its site is down until gridsub is restarted. Wraps
	// backends.ErrUnavailable in the errors its calls return.
	ErrCrashLoop = errors.New("plugin crash loop")
)
