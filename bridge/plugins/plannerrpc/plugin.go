package plannerrpc

import (
	"context"
	"fmt"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/gridsub/gridsub/bridge/plugins"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
)

// GRPCPlugin is the go-plugin glue for the "planner" kind: on the plugin's
// side it serves Impl, on the host's side it dispenses a policy.Planner
// (*Client), or a policy.Incremental (*IncrementalClient) when the plugin
// declares sessions in its Info.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl policy.Planner // the plugin's side only
	// StreamPasses (the plugin's side) offers no pass socket: the
	// session's passes go on the Passes stream, as with a plugin built
	// before the socket.
	StreamPasses bool

	// InfoTimeout bounds the Info call made when the host dispenses the
	// plugin (0: 10 s).
	InfoTimeout time.Duration
	// CallTimeout bounds NewSession, which has no ctx (0: 30 s).
	CallTimeout time.Duration
}

var _ goplugin.GRPCPlugin = (*GRPCPlugin)(nil)

// GRPCServer implements goplugin.GRPCPlugin.
func (p *GRPCPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return fmt.Errorf("plannerrpc: no planner to serve")
	}
	srv := newServer(p.Impl)
	srv.side = srv.side && !p.StreamPasses
	pb.RegisterPlannerServer(s, srv)
	return nil
}

// GRPCClient implements goplugin.GRPCPlugin. done is the plugin's done
// ctx: cancelled when the plugin process exits.
func (p *GRPCPlugin) GRPCClient(done context.Context, _ *goplugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	c, err := newClient(done, pb.NewPlannerClient(cc), p.InfoTimeout, p.CallTimeout)
	if err != nil {
		return nil, err
	}
	return c.Planner(), nil
}

// MaxMessage bounds one message either way (a snapshot, a plan): a queue
// of a million jobs fits, a runaway peer does not exhaust memory.
const MaxMessage = 256 << 20

// The transport's buffers and flow-control windows are sized for the
// planner's traffic (a snapshot of a thousand jobs is ~60 KB): fewer reads,
// writes and window updates per call, each of which is a system call.
const (
	ioBuffer = 256 << 10
	window   = 4 << 20
)

// DialOptions are the gRPC options of a host's connection to a planner
// plugin (go-plugin's ClientConfig.GRPCDialOptions).
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessage), grpc.MaxCallSendMsgSize(MaxMessage)),
		grpc.WithReadBufferSize(ioBuffer), grpc.WithWriteBufferSize(ioBuffer),
		grpc.WithInitialWindowSize(window), grpc.WithInitialConnWindowSize(window),
	}
}

// NewGRPCServer is the gRPC server a planner plugin serves on (for
// go-plugin's ServeConfig.GRPCServer): go-plugin's options plus the
// planner's sizes.
func NewGRPCServer(opts []grpc.ServerOption) *grpc.Server {
	return goplugin.DefaultGRPCServer(append(opts,
		grpc.MaxRecvMsgSize(MaxMessage), grpc.MaxSendMsgSize(MaxMessage),
		grpc.ReadBufferSize(ioBuffer), grpc.WriteBufferSize(ioBuffer),
		grpc.InitialWindowSize(window), grpc.InitialConnWindowSize(window)))
}

// PluginMap is the plugin map a planner plugin serves and a host dispenses.
func PluginMap(impl policy.Planner) goplugin.PluginSet {
	return goplugin.PluginSet{plugins.KindPlanner: &GRPCPlugin{Impl: impl}}
}

// ServePlanner serves p as a planner plugin on this process's stdio
// handshake and never returns (go-plugin's Serve exits the process when the
// host goes away). When p is a policy.Incremental the session RPCs are
// served; otherwise they answer Unimplemented and hosts see a plain
// planner. For a plugin's main and `gridsub plugin serve planner NAME`.
func ServePlanner(p policy.Planner) {
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: plugins.Handshake,
		Plugins:         PluginMap(p),
		GRPCServer:      NewGRPCServer,
	})
}
