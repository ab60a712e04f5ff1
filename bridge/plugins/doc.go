// Package plugins is gridsub's plugin host: it loads backends (batch
// systems) and planners (placement policies) through hashicorp/go-plugin,
// either in process (the built-ins' fast path) or as a separate executable
// speaking gRPC, checksummed, over AutoMTLS.
//
//	broker ─Backend─▶ Supervisor ─▶ backendrpc.Client ══gRPC══▶ backendrpc.Server ─▶ slurm | pbs | sim | external
//	                  (ping, restart,                           (gridsub plugin serve backend NAME,
//	                   crash loop, adopt)                        or a main calling ServeBackend)
//
// The layout follows go-plugin's examples and Nomad's plugins/: the
// Handshake and protocol version here, protobuf under proto/v1, and one
// sub-package per kind with its client and server shims side by side
// (backendrpc, plannerrpc, and policyrpc for the six policy kinds beside
// placement: feasibility, admission, trust, tiering, remap); wire holds
// the error kinds and codecs they share. Domain types (backends, policy) never import protobuf or
// go-plugin.
//
// The catalog (catalog.go) is the one way a backend or a policy is built.
// A site is described once, as a BackendSpec (its BackendConfig and its
// mode); Build makes its backend in process (the default: the built-in's
// value, a simulated site on the host's engine), isolated (the same built-in
// served by `gridsub plugin serve backend NAME`) or external (an executable,
// checksummed), and Resolve says, without I/O, the configuration the
// built-in will be built with on whichever side of the wire it runs. Each
// built-in resolves its own configuration (slurm.Config, pbs.Config,
// transport.Config, simbackend.SiteConfig) from a BackendConfig by one
// function, whether that arrived as a Go value or as the plugin's JSON, and
// declares its capabilities. Policy builds a policy by kind and reference
// (a built-in's name, plugin:builtin:NAME, plugin:/path ARGS) from a table
// of kinds; planner is the first, and a kind's out-of-process loader is
// installed by its shim package (plannerrpc), which imports this one.
//
// LoadBackend loads one site's backend: a built-in in process, a built-in
// isolated (gridsub re-executes itself), or an external executable whose
// SHA-256 is verified before it starts. Supervise keeps an out-of-process
// one alive behind one stable backends.Backend. Errors keep their identity
// across the boundary (see wire); the host's own sentinels are in
// errors.go. docs/plugins.md has the whole story and the numbers.
package plugins
