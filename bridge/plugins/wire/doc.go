// Package wire holds what every plugin shim needs on both sides of the
// boundary and that is not protobuf: the one table from error kinds to the
// sentinels they stand for (PLUGIN-STYLE §5), RemoteError (a plugin's error
// that still answers errors.Is like the original), the transport-error
// mapping of a failed gRPC call, and the time and duration codecs (a zero
// time.Time travels as 0).
//
// The kinds' numbers are the values of the protobuf enums
// (BackendErrorKind); a test holds the two in step, and another parses the
// sentinel var blocks of backends and backends/transport and fails when a
// sentinel has no kind.
package wire
