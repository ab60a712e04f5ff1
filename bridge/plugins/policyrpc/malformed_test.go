package policyrpc

import (
	"context"
	"errors"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/gridsub/gridsub/bridge/plugins"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/bridge/plugins/wire"
	"github.com/gridsub/gridsub/policy"
)

// badFeasibility answers what no well-behaved plugin sends.
type badFeasibility struct {
	pb.UnimplementedFeasibilityServer
	info *pb.PolicyInfo
	rep  *pb.FeasibleReply
}

func (b *badFeasibility) Info(context.Context, *pb.PolicyInfoRequest) (*pb.PolicyInfo, error) {
	return b.info, nil
}

func (b *badFeasibility) Feasible(context.Context, *pb.FeasibilityRequest) (*pb.FeasibleReply, error) {
	return b.rep, nil
}

// rawPlugin serves srv on the plugin's side and dispenses a feasibility
// client on the host's.
type rawPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	srv pb.FeasibilityServer
}

func (p *rawPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterFeasibilityServer(s, p.srv)
	return nil
}

func (p *rawPlugin) GRPCClient(done context.Context, _ *goplugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return dispense(done, plugins.KindFeasibility, cc, 0)
}

func rawConn(t *testing.T, srv pb.FeasibilityServer) (any, error) {
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{plugins.KindFeasibility: &rawPlugin{srv: srv}})
	t.Cleanup(func() { client.Close() })
	return client.Dispense(plugins.KindFeasibility)
}

// TestMalformed: a plugin of another kind or protocol, or one with no name,
// is refused at dispense; a reply with a cause or a status code policy
// does not have is a transport error naming the method, not a verdict.
func TestMalformed(t *testing.T) {
	good := &pb.PolicyInfo{Name: "bad", Kind: plugins.KindFeasibility, Protocol: plugins.ProtocolVersion}
	for _, info := range []*pb.PolicyInfo{
		{Name: "bad", Kind: plugins.KindTrust, Protocol: plugins.ProtocolVersion},
		{Name: "bad", Kind: plugins.KindFeasibility, Protocol: 2},
		{Kind: plugins.KindFeasibility, Protocol: plugins.ProtocolVersion},
	} {
		if _, err := rawConn(t, &badFeasibility{info: info}); err == nil {
			t.Errorf("Info %v was accepted", info)
		}
	}
	if _, err := rawConn(t, &badFeasibility{info: &pb.PolicyInfo{Name: "bad", Kind: plugins.KindFeasibility, Protocol: 2}}); !errors.Is(err, plugins.ErrIncompatible) {
		t.Errorf("another protocol: %v", err)
	}
	for _, rep := range []*pb.FeasibleReply{
		{Status: &pb.PlannerStatus{Code: pb.PlannerCode_PLANNER_CODE_SUCCESS}},                                // no cause
		{Status: &pb.PlannerStatus{}, Cause: pb.FeasibilityCause_FEASIBILITY_CAUSE_NONE},                      // no code
		{Status: &pb.PlannerStatus{Code: pb.PlannerCode_PLANNER_CODE_SUCCESS}, Cause: pb.FeasibilityCause(9)}, // a cause from elsewhere
	} {
		raw, err := rawConn(t, &badFeasibility{info: good, rep: rep})
		if err != nil {
			t.Fatal(err)
		}
		v, err := raw.(*FeasibilityClient).Feasible(&policy.Demand{Width: 1}, &policy.Snapshot{})
		if !errors.Is(err, wire.ErrTransport) || v.Feasible() {
			t.Errorf("reply %v: %+v, %v", rep, v, err)
		}
	}
}
