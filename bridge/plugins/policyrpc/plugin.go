package policyrpc

import (
	"context"
	"fmt"
	"slices"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	"github.com/gridsub/gridsub/policy"
)

// GRPCPlugin is the go-plugin glue for one policy kind. On the plugin's
// side Impl is served (a value of the kind's interface); on the host's it
// dispenses the kind's client (*TrustClient, ...), after checking the
// plugin's Info. gRPC only.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Kind    string // plugins.KindTrust, ...
	Impl    any    // the plugin's side only
	Version string // the plugin's side: reported in Info
	// CallTimeout bounds each call (the policy interfaces take no ctx;
	// 0: DefaultCallTimeout).
	CallTimeout time.Duration
}

var _ goplugin.GRPCPlugin = (*GRPCPlugin)(nil)

// GRPCServer implements goplugin.GRPCPlugin.
func (p *GRPCPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	return register(s, p.Kind, p.Impl, p.Version)
}

// GRPCClient implements goplugin.GRPCPlugin; done is cancelled when the
// plugin process exits.
func (p *GRPCPlugin) GRPCClient(done context.Context, _ *goplugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return dispense(done, p.Kind, cc, p.CallTimeout)
}

// Kinds are the kinds this package carries, in `gridsub plugins` order.
func Kinds() []string {
	return []string{plugins.KindFeasibility, plugins.KindAdmission, plugins.KindTrust, plugins.KindTiering, plugins.KindRemap, plugins.KindOrder}
}

// register registers impl's server for kind on s.
func register(s *grpc.Server, kind string, impl any, version string) error {
	bad := func() error { return fmt.Errorf("policyrpc: a %T is not a %s policy", impl, kind) }
	switch kind {
	case plugins.KindFeasibility:
		x, ok := impl.(policy.Feasibility)
		if !ok {
			return bad()
		}
		registerFeasibility(s, x, version)
	case plugins.KindAdmission:
		x, ok := impl.(policy.Admission)
		if !ok {
			return bad()
		}
		registerAdmission(s, x, version)
	case plugins.KindTrust:
		x, ok := impl.(policy.Trust)
		if !ok {
			return bad()
		}
		registerTrust(s, x, version)
	case plugins.KindTiering:
		x, ok := impl.(policy.Tiering)
		if !ok {
			return bad()
		}
		registerTiering(s, x, version)
	case plugins.KindRemap:
		x, ok := impl.(policy.Remap)
		if !ok {
			return bad()
		}
		registerRemap(s, x, version)
	case plugins.KindOrder:
		x, ok := impl.(policy.Order)
		if !ok {
			return bad()
		}
		registerOrder(s, x, version)
	default:
		return fmt.Errorf("policyrpc: unknown policy kind %q", kind)
	}
	return nil
}

// isKind reports whether v is a policy of kind.
func isKind(kind string, v any) bool {
	var ok bool
	switch kind {
	case plugins.KindFeasibility:
		_, ok = v.(policy.Feasibility)
	case plugins.KindAdmission:
		_, ok = v.(policy.Admission)
	case plugins.KindTrust:
		_, ok = v.(policy.Trust)
	case plugins.KindTiering:
		_, ok = v.(policy.Tiering)
	case plugins.KindRemap:
		_, ok = v.(policy.Remap)
	case plugins.KindOrder:
		_, ok = v.(policy.Order)
	}
	return ok
}

// dispense builds the host's client of kind on cc.
func dispense(done context.Context, kind string, cc *grpc.ClientConn, timeout time.Duration) (any, error) {
	switch kind {
	case plugins.KindFeasibility:
		return newFeasibilityClient(done, cc, timeout)
	case plugins.KindAdmission:
		return newAdmissionClient(done, cc, timeout)
	case plugins.KindTrust:
		return newTrustClient(done, cc, timeout)
	case plugins.KindTiering:
		return newTieringClient(done, cc, timeout)
	case plugins.KindRemap:
		return newRemapClient(done, cc, timeout)
	case plugins.KindOrder:
		return newOrderClient(done, cc, timeout)
	}
	return nil, fmt.Errorf("policyrpc: unknown policy kind %q", kind)
}

// PluginMap is the plugin map a policy plugin of kind serves impl in.
func PluginMap(kind string, impl any, version string) goplugin.PluginSet {
	return goplugin.PluginSet{kind: &GRPCPlugin{Kind: kind, Impl: impl, Version: version}}
}

// HostPlugins is the plugin map a host dispenses every policy kind from.
func HostPlugins(callTimeout time.Duration) goplugin.PluginSet {
	m := goplugin.PluginSet{}
	for _, k := range Kinds() {
		m[k] = &GRPCPlugin{Kind: k, CallTimeout: callTimeout}
	}
	return m
}

// Serve serves impl as a policy plugin of kind on this process's stdio
// handshake and returns when the host is done with it (go-plugin's Serve
// exits the process when the host goes away). For a plugin's main and
// `gridsub plugin serve KIND NAME`. It fails at once when impl is not a
// policy of kind.
func Serve(kind string, impl any, version string) error {
	if !slices.Contains(Kinds(), kind) {
		return fmt.Errorf("policyrpc: unknown policy kind %q", kind)
	}
	if !isKind(kind, impl) {
		return fmt.Errorf("policyrpc: a %T is not a %s policy", impl, kind)
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: plugins.Handshake,
		Plugins:         PluginMap(kind, impl, version),
		GRPCServer:      plannerrpc.NewGRPCServer,
	})
	return nil
}
