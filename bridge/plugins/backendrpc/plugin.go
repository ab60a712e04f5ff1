package backendrpc

import (
	"context"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
)

// Plugin is the go-plugin glue for the backend kind: on the plugin's side
// it registers Server (built with Factory); on the host's it dispenses a
// *Client bound to the plugin's done context. gRPC only: there is no
// net/rpc implementation.
type Plugin struct {
	goplugin.NetRPCUnsupportedPlugin
	// Factory and Version are used on the plugin's side.
	Factory Factory
	Version string
	// Label names the plugin in the host's errors until it is configured.
	Label string
}

// GRPCServer implements goplugin.GRPCPlugin.
func (p *Plugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterBackendServer(s, NewServer(p.Factory, p.Version))
	return nil
}

// GRPCClient implements goplugin.GRPCPlugin. ctx is done when the plugin
// process is gone; every call of the client is joined with it.
func (p *Plugin) GRPCClient(ctx context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewClient(pb.NewBackendClient(c), ctx, p.Label), nil
}

var _ goplugin.GRPCPlugin = (*Plugin)(nil)
