package policyrpc

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc"

	"github.com/gridsub/gridsub/bridge/plugins"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
)

// TrustClient is the host's side of a trust plugin: a policy.Trust.
type TrustClient struct {
	*base
	rpc pb.TrustClient
}

var _ policy.Trust = (*TrustClient)(nil)

func newTrustClient(done context.Context, cc *grpc.ClientConn, timeout time.Duration) (*TrustClient, error) {
	rpc := pb.NewTrustClient(cc)
	b, err := dial(done, plugins.KindTrust, timeout, func(ctx context.Context) (*pb.PolicyInfo, error) {
		return rpc.Info(ctx, &pb.PolicyInfoRequest{})
	})
	if err != nil {
		return nil, err
	}
	return &TrustClient{base: b, rpc: rpc}, nil
}

// Scores implements policy.Trust: one Scores RPC.
func (c *TrustClient) Scores(in *policy.TrustInput) (map[string]float64, error) {
	req := &pb.TrustScoresRequest{Input: trustInputToProto(in)}
	var rep *pb.TrustScoresReply
	if err := c.call("Scores", func(ctx context.Context) (err error) {
		rep, err = c.rpc.Scores(ctx, req)
		return err
	}); err != nil {
		return nil, err
	}
	if err := c.remote("Scores", rep.GetError()); err != nil {
		return nil, err
	}
	out, err := scoresFromProto(rep)
	if err != nil {
		return nil, c.bad("Scores", err)
	}
	return out, nil
}

// Decay implements policy.Trust: one Decay RPC. When the call fails it
// answers o unaged and keeps the failure for Err.
func (c *TrustClient) Decay(o policy.Outcomes, elapsed, halfLife time.Duration) policy.Outcomes {
	d, err := c.decay(o, elapsed, halfLife)
	c.note(err)
	return d
}

// decay is Decay with its failure (o unaged then).
func (c *TrustClient) decay(o policy.Outcomes, elapsed, halfLife time.Duration) (policy.Outcomes, error) {
	req := &pb.TrustDecayRequest{Outcomes: outcomesToProto(o), ElapsedNs: int64(elapsed), HalfLifeNs: int64(halfLife)}
	var rep *pb.TrustDecayReply
	if err := c.call("Decay", func(ctx context.Context) (err error) {
		rep, err = c.rpc.Decay(ctx, req)
		return err
	}); err != nil {
		return o, err
	}
	return outcomesFromProto(rep.GetOutcomes()), nil
}

// trustServer is the plugin's side.
type trustServer struct {
	pb.UnimplementedTrustServer
	impl    policy.Trust
	version string
}

func registerTrust(s *grpc.Server, impl policy.Trust, version string) {
	pb.RegisterTrustServer(s, &trustServer{impl: impl, version: version})
}

func (s *trustServer) Info(context.Context, *pb.PolicyInfoRequest) (*pb.PolicyInfo, error) {
	return info(plugins.KindTrust, s.impl.Name(), s.version), nil
}

func (s *trustServer) Scores(_ context.Context, req *pb.TrustScoresRequest) (*pb.TrustScoresReply, error) {
	scores, err := s.impl.Scores(trustInputFromProto(req.GetInput()))
	if err != nil {
		return &pb.TrustScoresReply{Error: errorToProto(err)}, nil
	}
	return scoresToProto(scores), nil
}

func (s *trustServer) Decay(_ context.Context, req *pb.TrustDecayRequest) (*pb.TrustDecayReply, error) {
	o := s.impl.Decay(outcomesFromProto(req.GetOutcomes()), time.Duration(req.GetElapsedNs()), time.Duration(req.GetHalfLifeNs()))
	return &pb.TrustDecayReply{Outcomes: outcomesToProto(o)}, nil
}

// Converters. Exact both ways: a value converted there and back is equal
// (reflect.DeepEqual), nil maps and slices staying nil.

func trustNodeToProto(n policy.TrustNode) *pb.TrustNode {
	return &pb.TrustNode{Name: n.Name, Area: n.Area, Power: n.Power, Bandwidth: n.Bandwidth}
}

func trustNodeFromProto(n *pb.TrustNode) policy.TrustNode {
	return policy.TrustNode{Name: n.GetName(), Area: n.GetArea(), Power: n.GetPower(), Bandwidth: n.GetBandwidth()}
}

func outcomesToProto(o policy.Outcomes) *pb.TrustOutcomes {
	return &pb.TrustOutcomes{Completed: o.Completed, Failed: o.Failed, Unreachable: o.Unreachable}
}

func outcomesFromProto(o *pb.TrustOutcomes) policy.Outcomes {
	return policy.Outcomes{Completed: o.GetCompleted(), Failed: o.GetFailed(), Unreachable: o.GetUnreachable()}
}

// trustInputToProto sorts the outcomes by (from, to): equal inputs are
// equal bytes whatever the map's order.
func trustInputToProto(in *policy.TrustInput) *pb.TrustInput {
	if in == nil {
		return nil
	}
	out := &pb.TrustInput{Observer: trustNodeToProto(in.Observer), OutcomesSet: in.Outcomes != nil}
	if len(in.Sites) > 0 {
		out.Sites = make([]*pb.TrustNode, len(in.Sites))
		for i, n := range in.Sites {
			out.Sites[i] = trustNodeToProto(n)
		}
	}
	if len(in.Outcomes) > 0 {
		keys := make([]policy.TrustKey, 0, len(in.Outcomes))
		for k := range in.Outcomes {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b policy.TrustKey) int {
			return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
		})
		out.Outcomes = make([]*pb.TrustOutcomeEntry, len(keys))
		for i, k := range keys {
			out.Outcomes[i] = &pb.TrustOutcomeEntry{From: k.From, To: k.To, Outcomes: outcomesToProto(in.Outcomes[k])}
		}
	}
	return out
}

func trustInputFromProto(in *pb.TrustInput) *policy.TrustInput {
	if in == nil {
		return nil
	}
	out := &policy.TrustInput{Observer: trustNodeFromProto(in.GetObserver())}
	if ss := in.GetSites(); len(ss) > 0 {
		out.Sites = make([]policy.TrustNode, len(ss))
		for i, n := range ss {
			out.Sites[i] = trustNodeFromProto(n)
		}
	}
	if in.GetOutcomesSet() {
		out.Outcomes = make(map[policy.TrustKey]policy.Outcomes, len(in.GetOutcomes()))
		for _, e := range in.GetOutcomes() {
			out.Outcomes[policy.TrustKey{From: e.GetFrom(), To: e.GetTo()}] = outcomesFromProto(e.GetOutcomes())
		}
	}
	return out
}

func scoresToProto(m map[string]float64) *pb.TrustScoresReply {
	out := &pb.TrustScoresReply{ScoresSet: m != nil}
	if len(m) > 0 {
		out.Site = make([]string, 0, len(m))
		for k := range m {
			out.Site = append(out.Site, k)
		}
		slices.Sort(out.Site)
		out.Score = make([]float64, len(out.Site))
		for i, k := range out.Site {
			out.Score[i] = m[k]
		}
	}
	return out
}

func scoresFromProto(r *pb.TrustScoresReply) (map[string]float64, error) {
	if len(r.GetSite()) != len(r.GetScore()) {
		return nil, fmt.Errorf("scores: columns of %d and %d entries", len(r.GetSite()), len(r.GetScore()))
	}
	if !r.GetScoresSet() {
		return nil, nil
	}
	out := make(map[string]float64, len(r.GetSite()))
	for i, k := range r.GetSite() {
		out[k] = r.Score[i]
	}
	return out, nil
}
