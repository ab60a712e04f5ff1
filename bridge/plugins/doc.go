// Package plugins is gridsub's plugin host: it loads backends (batch
// systems) and planners (placement policies) through hashicorp/go-plugin,
// either in process (the built-ins' fast path) or as a separate executable
// speaking gRPC, checksummed, over AutoMTLS.
//
// The layout follows go-plugin's examples and Nomad's plugins/: the
// Handshake and protocol version here, protobuf under proto/v1, and one
// sub-package per kind with its client and server shims side by side
// (backendrpc, plannerrpc). Domain types (backends, policy) never import
// protobuf or go-plugin.
package plugins
