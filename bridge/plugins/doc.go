// Package plugins is gridsub's plugin host: it loads backends (batch
// systems) and planners (placement policies) through hashicorp/go-plugin,
// either in process (the built-ins' fast path) or as a separate executable
// speaking gRPC, checksummed, over AutoMTLS.
//
//	broker ─Backend─▶ Supervisor ─▶ backendrpc.Client ══gRPC══▶ backendrpc.Server ─▶ slurm | sim | external
//	                  (ping, restart,                           (gridsub plugin serve backend NAME,
//	                   crash loop, adopt)                        or a main calling ServeBackend)
//
// The layout follows go-plugin's examples and Nomad's plugins/: the
// Handshake and protocol version here, protobuf under proto/v1, and one
// sub-package per kind with its client and server shims side by side
// (backendrpc, plannerrpc, and policyrpc for the five policy kinds beside
// placement: feasibility, admission, trust, tiering, remap); wire holds
// the error kinds and codecs they share. Domain types (backends, policy) never import protobuf or
// go-plugin.
//
// LoadBackend loads one site's backend: a built-in in process, a built-in
// isolated (gridsub re-executes itself), or an external executable whose
// SHA-256 is verified before it starts. Supervise keeps an out-of-process
// one alive behind one stable backends.Backend. Errors keep their identity
// across the boundary (see wire); the host's own sentinels are in
// errors.go. docs/plugins.md has the whole story and the numbers.
package plugins
