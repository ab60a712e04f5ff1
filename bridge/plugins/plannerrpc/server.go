package plannerrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gridsub/gridsub/bridge/plugins"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
)

// maxSessions bounds the sessions one plugin keeps open: a host that leaks
// them gets a clear error instead of a plugin that grows without bound.
const maxSessions = 1024

// server is the plugin's side: it serves a policy.Planner, and its
// sessions when the planner is a policy.Incremental. A session is not safe
// for concurrent use, so each has its own lock; different sessions and
// snapshot Plans run concurrently.
type server struct {
	pb.UnimplementedPlannerServer
	impl policy.Planner
	inc  policy.Incremental // nil: the session RPCs answer Unimplemented
	// side: NewSession offers a pass socket when the host asks.
	side bool

	mu       sync.Mutex
	next     uint64
	sessions map[uint64]*serverSession
}

type serverSession struct {
	mu   sync.Mutex
	s    policy.Session
	side *sideServer // the session's pass socket, or nil
}

func newServer(p policy.Planner) *server {
	s := &server{impl: p, sessions: map[uint64]*serverSession{}}
	s.inc, _ = p.(policy.Incremental)
	s.side = s.inc != nil && passSocketSupported
	return s
}

// planError turns a planner's error into a gRPC status: the caller's ctx
// keeps its code, anything else is Unknown with the planner's message.
func planError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Unknown, err.Error())
}

func (s *server) Info(context.Context, *pb.PlannerInfoRequest) (*pb.PlannerInfo, error) {
	return &pb.PlannerInfo{Name: s.impl.Name(), Incremental: s.inc != nil, Protocol: plugins.ProtocolVersion, PassSocket: s.side}, nil
}

func (s *server) Plan(ctx context.Context, req *pb.PlanRequest) (*pb.PlanReply, error) {
	snap, err := snapshotFromProto(req.GetSnapshot())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	plan, err := s.impl.Plan(ctx, snap)
	if err != nil {
		return nil, planError(err)
	}
	return &pb.PlanReply{Plan: planToProto(plan)}, nil
}

func (s *server) NewSession(_ context.Context, req *pb.NewPlannerSessionRequest) (*pb.NewPlannerSessionReply, error) {
	if s.inc == nil {
		return nil, status.Errorf(codes.Unimplemented, "planner %s has no sessions (not a policy.Incremental)", s.impl.Name())
	}
	snap, err := snapshotFromProto(req.GetSnapshot())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	ss, err := s.inc.NewSession(snap)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sessions) >= maxSessions {
		return nil, status.Errorf(codes.ResourceExhausted, "%d sessions open; close some (CloseSession) first", len(s.sessions))
	}
	s.next++
	sss := &serverSession{s: ss}
	rep := &pb.NewPlannerSessionReply{Session: s.next}
	if req.GetPassSocket() && s.side {
		if sss.side, err = s.openSide(s.next); err != nil {
			return nil, status.Errorf(codes.Internal, "pass socket: %v", err)
		}
		rep.PassSocket, rep.PassToken = sss.side.path, sss.side.token
	}
	s.sessions[s.next] = sss
	return rep, nil
}

// Passes serves a session's passes, one reply per request, until the host
// ends the stream or a pass fails (which ends it with the pass's error).
func (s *server) Passes(stream pb.Planner_PassesServer) error {
	if s.inc == nil {
		return status.Errorf(codes.Unimplemented, "planner %s has no sessions (not a policy.Incremental)", s.impl.Name())
	}
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if req.GetBind() {
			return s.bind(stream, req.GetSession())
		}
		plan, err := s.pass(stream.Context(), req)
		if err != nil {
			return err
		}
		if err := stream.Send(&pb.PlanReply{Plan: planToProto(plan)}); err != nil {
			return err
		}
	}
}

// pass applies one pass's changes to its session and plans.
func (s *server) pass(ctx context.Context, req *pb.PlannerPassRequest) (*policy.Plan, error) {
	s.mu.Lock()
	ss := s.sessions[req.GetSession()]
	s.mu.Unlock()
	if ss == nil {
		return nil, status.Errorf(codes.NotFound, "no session %d", req.GetSession())
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	jobs, err := jobsFromProto(req.GetSubmits())
	if err != nil {
		// Nothing was applied: the session stays as it was.
		return nil, status.Error(codes.InvalidArgument, "submits: "+err.Error())
	}
	for _, j := range jobs {
		ss.s.Submit(j)
	}
	for i, h := range req.GetHolds() {
		until := timeFromWire(h.GetUntilSec(), h.GetUntilNanos())
		var err error
		if h.GetRelease() {
			err = ss.s.Release(int(h.GetSite()), int(h.GetNodes()), until)
		} else {
			err = ss.s.Hold(int(h.GetSite()), int(h.GetNodes()), until)
		}
		if err != nil {
			// The session saw part of the changes: it is of no more use.
			s.drop(req.GetSession())
			return nil, status.Error(codes.InvalidArgument, fmt.Sprintf("hold change %d: %v", i, err))
		}
	}
	plan, err := ss.s.Plan(ctx, timeFromWire(req.GetNowSec(), req.GetNowNanos()))
	if err != nil {
		return nil, planError(err)
	}
	return plan, nil
}

func (s *server) CloseSession(_ context.Context, req *pb.ClosePlannerSessionRequest) (*pb.ClosePlannerSessionReply, error) {
	if ss := s.drop(req.GetSession()); ss != nil && ss.side != nil {
		ss.side.close()
	}
	return &pb.ClosePlannerSessionReply{}, nil
}

// drop forgets session id and returns it. Its pass socket, if any, stays
// open for the error reply; serveSide closes it after.
func (s *server) drop(id uint64) *serverSession {
	s.mu.Lock()
	ss := s.sessions[id]
	delete(s.sessions, id)
	s.mu.Unlock()
	return ss
}

// bind holds session id's pass socket open while stream is: when the
// stream ends (the host dropped the session, the gRPC server stopped), the
// socket closes. The stream carries nothing else.
func (s *server) bind(stream pb.Planner_PassesServer, id uint64) error {
	s.mu.Lock()
	ss := s.sessions[id]
	s.mu.Unlock()
	if ss == nil || ss.side == nil {
		return status.Errorf(codes.NotFound, "no session %d with a pass socket", id)
	}
	defer ss.side.close()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			if _, err := stream.Recv(); err != nil {
				return
			}
		}
	}()
	select {
	case <-ended:
	case <-ss.side.done:
	case <-stream.Context().Done():
	}
	return nil
}
