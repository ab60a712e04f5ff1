package policyrpc

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/gridsub/gridsub/bridge/plugins"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
)

// RemapClient is the host's side of a remapping plugin: a policy.Remap.
type RemapClient struct {
	*base
	rpc pb.RemapClient
}

var _ policy.Remap = (*RemapClient)(nil)

func newRemapClient(done context.Context, cc *grpc.ClientConn, timeout time.Duration) (*RemapClient, error) {
	rpc := pb.NewRemapClient(cc)
	b, err := dial(done, plugins.KindRemap, timeout, func(ctx context.Context) (*pb.PolicyInfo, error) {
		return rpc.Info(ctx, &pb.PolicyInfoRequest{})
	})
	if err != nil {
		return nil, err
	}
	return &RemapClient{base: b, rpc: rpc}, nil
}

// Moves implements policy.Remap: one Moves RPC.
func (c *RemapClient) Moves(in *policy.RemapInput) ([]policy.Move, error) {
	req := remapInputToProto(in)
	var rep *pb.RemapReply
	if err := c.call("Moves", func(ctx context.Context) (err error) {
		rep, err = c.rpc.Moves(ctx, req)
		return err
	}); err != nil {
		return nil, err
	}
	if err := c.remote("Moves", rep.GetError()); err != nil {
		return nil, err
	}
	out, err := movesFromProto(rep.GetMoves())
	if err != nil {
		return nil, c.bad("Moves", err)
	}
	return out, nil
}

type remapServer struct {
	pb.UnimplementedRemapServer
	impl    policy.Remap
	version string
}

func registerRemap(s *grpc.Server, impl policy.Remap, version string) {
	pb.RegisterRemapServer(s, &remapServer{impl: impl, version: version})
}

func (s *remapServer) Info(context.Context, *pb.PolicyInfoRequest) (*pb.PolicyInfo, error) {
	return info(plugins.KindRemap, s.impl.Name(), s.version), nil
}

func (s *remapServer) Moves(_ context.Context, req *pb.RemapRequest) (*pb.RemapReply, error) {
	in, err := remapInputFromProto(req)
	if err != nil {
		return nil, invalid(err)
	}
	moves, err := s.impl.Moves(in)
	if err != nil {
		return &pb.RemapReply{Error: errorToProto(err)}, nil
	}
	return &pb.RemapReply{Moves: movesToProto(moves)}, nil
}

func remapInputToProto(in *policy.RemapInput) *pb.RemapRequest {
	if in == nil {
		return &pb.RemapRequest{}
	}
	out := &pb.RemapRequest{Snapshot: snapToProto(in.Snapshot), MinGainNs: int64(in.MinGain)}
	out.NowSec, out.NowNanos = tw(in.Now)
	for _, f := range in.Free {
		out.Free = append(out.Free, int64(f))
	}
	for i := range in.Waiting {
		w := &in.Waiting[i]
		x := &pb.RemapWaiting{Job: jobToProto(&w.Job), Where: partsToProto(w.Parts)}
		for _, e := range w.Estimates {
			s, n := tw(e)
			x.EstimateSec, x.EstimateNanos = append(x.EstimateSec, s), append(x.EstimateNanos, n)
		}
		out.Waiting = append(out.Waiting, x)
	}
	return out
}

func remapInputFromProto(r *pb.RemapRequest) (*policy.RemapInput, error) {
	snap, err := snapFromProto(r.GetSnapshot())
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	in := &policy.RemapInput{Now: tf(r.GetNowSec(), r.GetNowNanos()), Snapshot: snap, MinGain: time.Duration(r.GetMinGainNs())}
	for _, f := range r.GetFree() {
		in.Free = append(in.Free, int(f))
	}
	for i, w := range r.GetWaiting() {
		j, err := jobFromProto(w.GetJob())
		if err != nil || j == nil {
			return nil, fmt.Errorf("waiting %d: job: %v", i, err)
		}
		parts, err := partsFromProto(w.GetWhere())
		if err != nil {
			return nil, fmt.Errorf("waiting %d: parts: %w", i, err)
		}
		x := policy.Waiting{Job: *j, Parts: parts}
		if len(w.GetEstimateSec()) != len(w.GetEstimateNanos()) {
			return nil, fmt.Errorf("waiting %d: estimate columns of %d and %d", i, len(w.GetEstimateSec()), len(w.GetEstimateNanos()))
		}
		for k, s := range w.GetEstimateSec() {
			x.Estimates = append(x.Estimates, tf(s, w.EstimateNanos[k]))
		}
		in.Waiting = append(in.Waiting, x)
	}
	return in, nil
}

func movesToProto(ms []policy.Move) []*pb.RemapMove {
	out := make([]*pb.RemapMove, len(ms))
	for i, m := range ms {
		x := &pb.RemapMove{Job: m.Job, To: optionToProto(m.To), GainNs: int64(m.Gain)}
		x.FromStartSec, x.FromStartNanos = tw(m.FromStart)
		out[i] = x
	}
	return out
}

func movesFromProto(ms []*pb.RemapMove) ([]policy.Move, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	out := make([]policy.Move, len(ms))
	for i, m := range ms {
		to, err := optionFromProto(m.GetTo())
		if err != nil {
			return nil, fmt.Errorf("move %d (job %q): %w", i, m.GetJob(), err)
		}
		out[i] = policy.Move{Job: m.GetJob(), To: to, FromStart: tf(m.GetFromStartSec(), m.GetFromStartNanos()), Gain: time.Duration(m.GetGainNs())}
	}
	return out, nil
}
