package policyrpc

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
)

// FeasibilityClient is the host's side of a feasibility plugin: a
// policy.Feasibility.
type FeasibilityClient struct {
	*base
	rpc pb.FeasibilityClient
}

var _ policy.Feasibility = (*FeasibilityClient)(nil)

func newFeasibilityClient(done context.Context, cc *grpc.ClientConn, timeout time.Duration) (*FeasibilityClient, error) {
	rpc := pb.NewFeasibilityClient(cc)
	b, err := dial(done, plugins.KindFeasibility, timeout, func(ctx context.Context) (*pb.PolicyInfo, error) {
		return rpc.Info(ctx, &pb.PolicyInfoRequest{})
	})
	if err != nil {
		return nil, err
	}
	return &FeasibilityClient{base: b, rpc: rpc}, nil
}

// feasibilityView is what of s a Feasibility may read (its contract: Now,
// Sites' Name, Nodes, H and Shape, Links, MultiSite; and what
// Snapshot.Runtime and Transfer read): s without its queue and the sites'
// running jobs, which are most of a cycle's snapshot and would be encoded
// for nothing on every call.
func feasibilityView(s *policy.Snapshot) *policy.Snapshot {
	if s == nil {
		return nil
	}
	v := *s
	v.Queue = nil
	v.Sites = make([]policy.Site, len(s.Sites))
	for i, st := range s.Sites {
		st.Busy = nil
		v.Sites[i] = st
	}
	return &v
}

// Feasible implements policy.Feasibility: one Feasible RPC carrying the
// demand and the part of s the contract lets it read (feasibilityView).
func (c *FeasibilityClient) Feasible(d *policy.Demand, s *policy.Snapshot) (policy.Verdict, error) {
	v, err := c.feasible(d, s)
	if err != nil {
		// Never the zero Verdict, whose code is Success: a caller that
		// looked at the verdict first would accept the request.
		return policy.Verdict{Status: policy.NewStatus(policy.Error, c.name, err.Error())}, err
	}
	return v, nil
}

func (c *FeasibilityClient) feasible(d *policy.Demand, s *policy.Snapshot) (policy.Verdict, error) {
	req := &pb.FeasibilityRequest{Demand: demandToProto(d), Snapshot: snapToProto(feasibilityView(s))}
	var rep *pb.FeasibleReply
	if err := c.call("Feasible", func(ctx context.Context) (err error) {
		rep, err = c.rpc.Feasible(ctx, req)
		return err
	}); err != nil {
		return policy.Verdict{}, err
	}
	if err := c.remote("Feasible", rep.GetError()); err != nil {
		return policy.Verdict{}, err
	}
	v, err := verdictFromProto(rep)
	if err != nil {
		return policy.Verdict{}, c.bad("Feasible", err)
	}
	return v, nil
}

// Late implements policy.Feasibility: one Late RPC (as Feasible, with the
// part of s the contract lets it read).
func (c *FeasibilityClient) Late(d *policy.Demand, s *policy.Snapshot) (string, error) {
	req := &pb.FeasibilityRequest{Demand: demandToProto(d), Snapshot: snapToProto(feasibilityView(s))}
	var rep *pb.LateReply
	if err := c.call("Late", func(ctx context.Context) (err error) {
		rep, err = c.rpc.Late(ctx, req)
		return err
	}); err != nil {
		return "", err
	}
	if err := c.remote("Late", rep.GetError()); err != nil {
		return "", err
	}
	return rep.GetReason(), nil
}

type feasibilityServer struct {
	pb.UnimplementedFeasibilityServer
	impl    policy.Feasibility
	version string
}

func registerFeasibility(s *grpc.Server, impl policy.Feasibility, version string) {
	pb.RegisterFeasibilityServer(s, &feasibilityServer{impl: impl, version: version})
}

func (s *feasibilityServer) Info(context.Context, *pb.PolicyInfoRequest) (*pb.PolicyInfo, error) {
	return info(plugins.KindFeasibility, s.impl.Name(), s.version), nil
}

func (s *feasibilityServer) decode(req *pb.FeasibilityRequest) (*policy.Demand, *policy.Snapshot, error) {
	snap, err := snapFromProto(req.GetSnapshot())
	if err != nil {
		return nil, nil, invalid(fmt.Errorf("snapshot: %w", err))
	}
	return demandFromProto(req.GetDemand()), snap, nil
}

func (s *feasibilityServer) Feasible(_ context.Context, req *pb.FeasibilityRequest) (*pb.FeasibleReply, error) {
	d, snap, err := s.decode(req)
	if err != nil {
		return nil, err
	}
	v, err := s.impl.Feasible(d, snap)
	if err != nil {
		return &pb.FeasibleReply{Error: errorToProto(err)}, nil
	}
	return &pb.FeasibleReply{Status: plannerrpc.StatusToProto(v.Status), Cause: pb.FeasibilityCause(v.Cause + 1), Warning: v.Warning}, nil
}

func (s *feasibilityServer) Late(_ context.Context, req *pb.FeasibilityRequest) (*pb.LateReply, error) {
	d, snap, err := s.decode(req)
	if err != nil {
		return nil, err
	}
	why, err := s.impl.Late(d, snap)
	if err != nil {
		return &pb.LateReply{Error: errorToProto(err)}, nil
	}
	return &pb.LateReply{Reason: why}, nil
}

func demandToProto(d *policy.Demand) *pb.FeasibilityDemand {
	if d == nil {
		return nil
	}
	out := &pb.FeasibilityDemand{Width: int64(d.Width), EstimateNs: int64(d.Estimate), DataSize: d.DataSize, Origin: d.Origin,
		SitesSet: d.Sites != nil, Sites: d.Sites, PerNodeCores: int64(d.PerNode.Cores), PerNodeMemBytes: d.PerNode.MemBytes,
		PerNodeGpus: int64(d.PerNode.GPUs), NoSplit: d.NoSplit, BestEffort: d.BestEffort, Window: d.Window}
	out.DeadlineSec, out.DeadlineNanos = tw(d.Deadline)
	return out
}

func demandFromProto(d *pb.FeasibilityDemand) *policy.Demand {
	if d == nil {
		return nil
	}
	return &policy.Demand{Width: int(d.GetWidth()), Estimate: time.Duration(d.GetEstimateNs()), DataSize: d.GetDataSize(), Origin: d.GetOrigin(),
		Sites:   stringsOrNil(d.GetSitesSet(), d.GetSites()),
		PerNode: policy.NodeShape{Cores: int(d.GetPerNodeCores()), MemBytes: d.GetPerNodeMemBytes(), GPUs: int(d.GetPerNodeGpus())},
		NoSplit: d.GetNoSplit(), Deadline: tf(d.GetDeadlineSec(), d.GetDeadlineNanos()), BestEffort: d.GetBestEffort(), Window: d.GetWindow()}
}

func verdictFromProto(r *pb.FeasibleReply) (policy.Verdict, error) {
	st, err := plannerrpc.StatusFromProto(r.GetStatus())
	if err != nil {
		return policy.Verdict{}, err
	}
	c := r.GetCause()
	if c < pb.FeasibilityCause_FEASIBILITY_CAUSE_NONE || c > pb.FeasibilityCause_FEASIBILITY_CAUSE_DEADLINE {
		return policy.Verdict{}, fmt.Errorf("cause %d is not one of policy's", int32(c))
	}
	return policy.Verdict{Status: st, Cause: policy.Cause(c - 1), Warning: r.GetWarning()}, nil
}
