// Package policyrpc carries the policy extension points other than
// placement (plannerrpc has that one) across a process boundary, over
// go-plugin's gRPC transport and bridge/plugins/proto/v1's
// feasibility.proto, admission.proto, trust.proto, tiering.proto,
// remap.proto and order.proto:
//
//	host (gridsub)                                     plugin process
//	  policy.Feasibility ── FeasibilityClient ══gRPC══ feasibilityServer ── policy.Feasibility
//	  policy.Admission   ── AdmissionClient   ══gRPC══ admissionServer   ── policy.Admission
//	    ReservationBook  ──   book (by id)                (books by id)  ──   ReservationBook
//	  policy.Trust       ── TrustClient       ══gRPC══ trustServer       ── policy.Trust
//	  policy.Tiering     ── TieringClient     ══gRPC══ tieringServer     ── policy.Tiering
//	  policy.Remap       ── RemapClient       ══gRPC══ remapServer       ── policy.Remap
//	  policy.Order       ── OrderClient       ══gRPC══ orderServer       ── policy.Order
//
// Each kind's file holds its client and server shims side by side and its
// converters; the policy types stay free of protobuf. Every shim is a
// value of the policy interface it carries (var _ checks), so the host
// holds a plugin exactly as it holds a built-in.
//
// Calls. The policy interfaces take no ctx (their contract is pure
// computation), so every call is bounded by the client's CallTimeout
// joined with the plugin's done context. Name is answered from the Info
// the plugin gave when it was dispensed, never from an RPC.
//
// Errors keep their identity (PLUGIN-STYLE §5): a policy's error travels in
// the reply as PolicyError{kinds, message}, and the client returns a
// *wire.RemoteError that unwraps to the sentinels of its kinds
// (wire.PolicyCodec: policy.ErrResv*, trust.ErrModel, ...), so errors.Is
// answers as it does in process. Transport failures map as for every
// plugin: a dead plugin → wire.ErrPluginExited, an RPC it does not serve →
// backends.ErrUnsupported, anything else → wire.ErrTransport. The methods
// whose interface has no error to return (Trust.Decay, the Tiering
// methods, most ReservationBook methods) answer a safe value (documented
// on each) and keep the failure for Err.
//
// Serve serves a policy from a plugin's main or from `gridsub plugin serve
// KIND NAME`; Load starts a plugin executable (checksum verified before it
// starts, AutoMTLS, gRPC only, a start timeout, none of gridsub's
// environment) and dispenses its policy as a value that survives the
// process (handle.go): a call that finds it dead or hung restarts it and
// is made again, an admission book is rebuilt from its calls, and a plugin
// that keeps failing hands over to Config.Fallback. Open resolves a
// configured name (a built-in, plugin:/path, plugin:builtin:NAME).
package policyrpc
