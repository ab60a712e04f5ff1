package plugins

import (
	goplugin "github.com/hashicorp/go-plugin"
)

// ProtocolVersion is the plugin protocol this gridsub speaks: the major
// version of the protobuf services under proto/v1. Within a version changes
// are additive; a break gets proto/v2 and a new number here.
const ProtocolVersion = 1

// The plugin kinds a plugin executable may serve (keys of the plugin map).
const (
	KindBackend = "backend" // a batch system: backends.Backend and its capabilities
	KindPlanner = "planner" // a placement policy: policy.Planner (and policy.Incremental)
)

// Handshake is what gridsub and its plugins check before anything else. The
// magic cookie only stops a plugin executable run by hand from waiting for a
// host that is not there; it is not a security measure (the checksum is).
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "GRIDSUB_PLUGIN",
	MagicCookieValue: "d6b1c0de-gridsub-plugin-v1",
}
