// Package plannerrpc carries a placement policy (policy.Planner, and
// policy.Incremental when the planner has it) across a process boundary,
// over go-plugin's gRPC transport and bridge/plugins/proto/v1/planner.proto.
//
//	host (gridsub)                                 plugin process
//	  policy.Planner ── Client ── gRPC ── server ── policy.Planner
//	  policy.Session ── session (mirror) ── Passes stream ── policy.Session
//
// Two paths, as PLUGIN-STYLE.md §3.3 lays out:
//
//   - Snapshot: one coarse Plan(snapshot) → plan RPC per cycle.
//   - Session: NewSession(snapshot) → id once, then per pass one message
//     {id, now, submits, hold changes} → plan on the session's Passes
//     stream (a message each way, not a call), or, when the plugin's Info
//     offers it, on the session's pass socket (passsock.go: a framed
//     message on an authenticated Unix socket, a third of a gRPC stream
//     message's cost), and CloseSession. Submit,
//     Hold and Release never cross the wire by themselves: the client
//     buffers them (Submit has neither error nor ctx), checks Hold and
//     Release itself, and keeps a mirror of the session's snapshot (the
//     seed, plus every change, minus the jobs each plan started or
//     rejected). When the plugin restarts, or a pass fails, the next pass
//     re-seeds a new session from the mirror. Planners are deterministic,
//     so the re-seeded session plans exactly what the old one would have.
//
// Errors: the caller's ctx done gives ctx.Err(); a plugin that exited gives
// an error wrapping ErrPluginExited; an RPC the plugin does not serve gives
// ErrUnsupported; anything else is a *RemoteError naming the plugin and the
// method. Every call is bounded by the caller's ctx joined with the
// plugin's own done ctx (NewSession, which has no ctx, by
// Config.CallTimeout).
//
// ServePlanner serves a planner from a plugin's main; Load starts a plugin
// executable (checksum verified before it starts, AutoMTLS, gRPC only, a
// start timeout, none of gridsub's environment) and returns a planner whose value survives Restart;
// WithFallback restarts a failing plugin and, when that does not help,
// falls back to a built-in planner and says so. This package installs
// Load as the plugin catalog's loader of planners (catalog.go), so
// bridge/plugins.Policy starts planner plugins the way it builds built-ins.
package plannerrpc
