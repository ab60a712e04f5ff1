package backendrpc_test

import (
	"context"
	"errors"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/plugins/backendrpc"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
)

// oldServer is a plugin built against an older v1 that knows Configure
// only: every other RPC answers gRPC Unimplemented.
type oldServer struct{ pb.UnimplementedBackendServer }

func (oldServer) Configure(context.Context, *pb.BackendConfigureRequest) (*pb.BackendHello, error) {
	return &pb.BackendHello{Name: "old", Version: "0.1.0"}, nil
}

type oldPlugin struct{ backendrpc.Plugin }

func (oldPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterBackendServer(s, oldServer{})
	return nil
}

// TestUnimplementedIsUnsupported: an RPC the plugin does not implement is
// backends.ErrUnsupported (not retryable), never a hang or a transport
// failure.
func TestUnimplementedIsUnsupported(t *testing.T) {
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{"backend": &oldPlugin{}})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense("backend")
	if err != nil {
		t.Fatal(err)
	}
	c := raw.(*backendrpc.Client)
	if _, err := c.Configure(context.Background(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	for name, call := range methods(c) {
		err := call(context.Background())
		if !errors.Is(err, backends.ErrUnsupported) || backends.Retryable(err) {
			t.Errorf("%s on a plugin without it: %v, want ErrUnsupported", name, err)
		}
	}
	if err := c.Ping(context.Background()); !errors.Is(err, backends.ErrUnsupported) {
		t.Errorf("Ping: %v", err)
	}
}
