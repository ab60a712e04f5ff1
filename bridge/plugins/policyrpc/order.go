package policyrpc

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/gridsub/gridsub/bridge/plugins"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
)

// OrderClient is the host's side of a queue-order plugin: a policy.Order.
type OrderClient struct {
	*base
	rpc pb.OrderClient
}

var _ policy.Order = (*OrderClient)(nil)

func newOrderClient(done context.Context, cc *grpc.ClientConn, timeout time.Duration) (*OrderClient, error) {
	rpc := pb.NewOrderClient(cc)
	b, err := dial(done, plugins.KindOrder, timeout, func(ctx context.Context) (*pb.PolicyInfo, error) {
		return rpc.Info(ctx, &pb.PolicyInfoRequest{})
	})
	if err != nil {
		return nil, err
	}
	return &OrderClient{base: b, rpc: rpc}, nil
}

// Order implements policy.Order: one Order RPC. A reply that is not a
// permutation of the queue is a bad reply (wire.ErrTransport).
func (c *OrderClient) Order(in *policy.OrderInput) ([]int, error) {
	req := orderInputToProto(in)
	var rep *pb.OrderReply
	if err := c.call("Order", func(ctx context.Context) (err error) {
		rep, err = c.rpc.Order(ctx, req)
		return err
	}); err != nil {
		return nil, err
	}
	if err := c.remote("Order", rep.GetError()); err != nil {
		return nil, err
	}
	n := len(req.GetQueue())
	pos := rep.GetPositions()
	if len(pos) != n {
		return nil, c.bad("Order", fmt.Errorf("%d positions for %d queued jobs", len(pos), n))
	}
	out := make([]int, n)
	seen := make([]bool, n)
	for i, p := range pos {
		if p < 0 || p >= int64(n) || seen[p] {
			return nil, c.bad("Order", fmt.Errorf("position %d is %d: not a permutation of %d jobs", i, p, n))
		}
		seen[p] = true
		out[i] = int(p)
	}
	return out, nil
}

type orderServer struct {
	pb.UnimplementedOrderServer
	impl    policy.Order
	version string
}

func registerOrder(s *grpc.Server, impl policy.Order, version string) {
	pb.RegisterOrderServer(s, &orderServer{impl: impl, version: version})
}

func (s *orderServer) Info(context.Context, *pb.PolicyInfoRequest) (*pb.PolicyInfo, error) {
	return info(plugins.KindOrder, s.impl.Name(), s.version), nil
}

func (s *orderServer) Order(_ context.Context, req *pb.OrderRequest) (*pb.OrderReply, error) {
	in, err := orderInputFromProto(req)
	if err != nil {
		return nil, invalid(err)
	}
	perm, err := s.impl.Order(in)
	if err != nil {
		return &pb.OrderReply{Error: errorToProto(err)}, nil
	}
	out := make([]int64, len(perm))
	for i, p := range perm {
		out[i] = int64(p)
	}
	return &pb.OrderReply{Positions: out}, nil
}

func orderInputToProto(in *policy.OrderInput) *pb.OrderRequest {
	if in == nil {
		return &pb.OrderRequest{}
	}
	out := &pb.OrderRequest{DefaultShares: in.DefaultShares, HalfLifeNs: int64(in.HalfLife), SharesSet: in.Shares != nil}
	out.NowSec, out.NowNanos = tw(in.Now)
	for _, q := range in.Queue {
		x := &pb.OrderQueued{Id: q.ID, User: q.User, Nodes: int64(q.Nodes)}
		x.SubmitSec, x.SubmitNanos = tw(q.Submit)
		out.Queue = append(out.Queue, x)
	}
	for _, r := range in.Usage {
		x := &pb.OrderUsage{User: r.User, Nodes: int64(r.Nodes)}
		x.StartSec, x.StartNanos = tw(r.Start)
		x.EndSec, x.EndNanos = tw(r.End)
		out.Usage = append(out.Usage, x)
	}
	for _, a := range in.Accounted {
		x := &pb.OrderAccounted{User: a.User, NodeSeconds: a.NodeSeconds}
		x.AtSec, x.AtNanos = tw(a.At)
		out.Accounted = append(out.Accounted, x)
	}
	// Sorted by user: the map's iteration order must not reach the wire.
	users := make([]string, 0, len(in.Shares))
	for u := range in.Shares {
		users = append(users, u)
	}
	slices.SortFunc(users, strings.Compare)
	for _, u := range users {
		out.Shares = append(out.Shares, &pb.OrderShare{User: u, Shares: in.Shares[u]})
	}
	return out
}

func orderInputFromProto(r *pb.OrderRequest) (*policy.OrderInput, error) {
	in := &policy.OrderInput{Now: tf(r.GetNowSec(), r.GetNowNanos()), DefaultShares: r.GetDefaultShares(), HalfLife: time.Duration(r.GetHalfLifeNs())}
	if in.HalfLife < 0 {
		return nil, fmt.Errorf("half-life %s is negative", in.HalfLife)
	}
	for i, q := range r.GetQueue() {
		if q.GetNodes() < 0 || q.GetNodes() > math.MaxInt32 {
			return nil, fmt.Errorf("queued job %d (%q): %d nodes", i, q.GetId(), q.GetNodes())
		}
		in.Queue = append(in.Queue, policy.QueuedJob{ID: q.GetId(), User: q.GetUser(), Submit: tf(q.GetSubmitSec(), q.GetSubmitNanos()), Nodes: int(q.GetNodes())})
	}
	for i, u := range r.GetUsage() {
		if u.GetNodes() < 0 || u.GetNodes() > math.MaxInt32 {
			return nil, fmt.Errorf("usage %d (user %q): %d nodes", i, u.GetUser(), u.GetNodes())
		}
		in.Usage = append(in.Usage, policy.UsageRecord{User: u.GetUser(), Nodes: int(u.GetNodes()),
			Start: tf(u.GetStartSec(), u.GetStartNanos()), End: tf(u.GetEndSec(), u.GetEndNanos())})
	}
	for _, a := range r.GetAccounted() {
		in.Accounted = append(in.Accounted, policy.AccountedUse{User: a.GetUser(), NodeSeconds: a.GetNodeSeconds(), At: tf(a.GetAtSec(), a.GetAtNanos())})
	}
	if r.GetSharesSet() || len(r.GetShares()) > 0 {
		in.Shares = make(map[string]float64, len(r.GetShares()))
		for _, s := range r.GetShares() {
			if _, dup := in.Shares[s.GetUser()]; dup {
				return nil, fmt.Errorf("shares: user %q given twice", s.GetUser())
			}
			in.Shares[s.GetUser()] = s.GetShares()
		}
	}
	return in, nil
}
