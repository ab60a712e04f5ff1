package plannerrpc

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
)

const (
	defaultInfoTimeout = 10 * time.Second
	defaultCallTimeout = 30 * time.Second
	// deadlineSkew is how early the plugin may see the caller's deadline
	// pass (gRPC sends the time left in whole units, rounded down).
	deadlineSkew = 50 * time.Millisecond
)

// Client is the host's side of one plugin connection: a policy.Planner.
// Name is answered from the Info the plugin gave when it was dispensed,
// never from an RPC (it has no ctx).
type Client struct {
	rpc         pb.PlannerClient
	done        context.Context // cancelled when the plugin exits
	name        string
	incremental bool
	passSocket  bool // the plugin offers a pass socket (PlannerInfo.pass_socket)
	callTimeout time.Duration
}

// IncrementalClient is a Client whose plugin serves sessions: a
// policy.Incremental.
type IncrementalClient struct{ *Client }

var (
	_ policy.Planner     = (*Client)(nil)
	_ policy.Incremental = IncrementalClient{}
)

func newClient(done context.Context, rpc pb.PlannerClient, infoTimeout, callTimeout time.Duration) (*Client, error) {
	if infoTimeout <= 0 {
		infoTimeout = defaultInfoTimeout
	}
	if callTimeout <= 0 {
		callTimeout = defaultCallTimeout
	}
	c := &Client{rpc: rpc, done: done, callTimeout: callTimeout, name: "(unknown)"}
	ctx, cancel := context.WithTimeout(context.Background(), infoTimeout)
	defer cancel()
	var info *pb.PlannerInfo
	err := c.call(ctx, "Info", func(ctx context.Context) (err error) {
		info, err = rpc.Info(ctx, &pb.PlannerInfoRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	if info.GetName() == "" {
		return nil, fmt.Errorf("planner plugin: Info: the plugin gave no name")
	}
	c.name, c.incremental = info.GetName(), info.GetIncremental()
	c.passSocket = c.incremental && info.GetPassSocket()
	return c, nil
}

// Planner is c as the host should hold it: an IncrementalClient when the
// plugin serves sessions, else c (a plain policy.Planner, so that a type
// assertion to policy.Incremental answers truthfully).
func (c *Client) Planner() policy.Planner {
	if c.incremental {
		return IncrementalClient{c}
	}
	return c
}

// Name implements policy.Planner: the name the plugin's planner gave.
func (c *Client) Name() string { return c.name }

// Plan implements policy.Planner: one Plan RPC with the whole snapshot.
func (c *Client) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	req := &pb.PlanRequest{Snapshot: snapshotToProto(s)}
	var rep *pb.PlanReply
	if err := c.call(ctx, "Plan", func(ctx context.Context) (err error) {
		rep, err = c.rpc.Plan(ctx, req)
		return err
	}); err != nil {
		return nil, err
	}
	plan, err := planFromProto(rep.GetPlan())
	if err != nil {
		return nil, &RemoteError{Plugin: c.name, Method: "Plan", Msg: "bad plan: " + err.Error()}
	}
	return plan, nil
}

// NewSession implements policy.Incremental: a session seeded with s, whose
// changes the client buffers until the next Plan. The plugin's session is
// opened now (bounded by the call timeout, as NewSession has no ctx), so a
// snapshot the planner refuses fails here.
func (c IncrementalClient) NewSession(s *policy.Snapshot) (policy.Session, error) {
	return newSession(s, func() (*Client, uint64) { return c.Client, 0 })
}

// openSession opens a plugin session on s and returns its id, and its
// pass socket when the plugin offers one.
func (c *Client) openSession(ctx context.Context, s *policy.Snapshot) (*pb.NewPlannerSessionReply, error) {
	req := &pb.NewPlannerSessionRequest{Snapshot: snapshotToProto(s), PassSocket: c.passSocket}
	var rep *pb.NewPlannerSessionReply
	if err := c.call(ctx, "NewSession", func(ctx context.Context) (err error) {
		rep, err = c.rpc.NewSession(ctx, req)
		return err
	}); err != nil {
		return nil, err
	}
	if rep.GetSession() == 0 {
		return nil, &RemoteError{Plugin: c.name, Method: "NewSession", Msg: "the plugin gave session id 0"}
	}
	if rep.GetPassSocket() != "" && !c.passSocket {
		c.closeSession(ctx, rep.GetSession())
		return nil, &RemoteError{Plugin: c.name, Method: "NewSession", Msg: "the plugin gave a pass socket the host did not ask for"}
	}
	return rep, nil
}

// closeSession frees a plugin session, best effort.
func (c *Client) closeSession(ctx context.Context, id uint64) {
	_ = c.call(ctx, "CloseSession", func(ctx context.Context) error {
		_, err := c.rpc.CloseSession(ctx, &pb.ClosePlannerSessionRequest{Session: id})
		return err
	})
}

// call runs f bounded by ctx joined with the plugin's done ctx, and gives
// its error the identity PLUGIN-STYLE.md §5 asks for.
func (c *Client) call(ctx context.Context, method string, f func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.done.Err() != nil {
		return fmt.Errorf("%w: planner %s: %s", ErrPluginExited, c.name, method)
	}
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.done, cancel)
	err := f(cctx)
	stop()
	cancel()
	if err == nil {
		return nil
	}
	return c.classify(ctx, method, err)
}

// classify gives the error of a call made with ctx the identity
// PLUGIN-STYLE.md §5 asks for.
func (c *Client) classify(ctx context.Context, method string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	st, _ := status.FromError(err)
	switch {
	case c.done.Err() != nil, st.Code() == codes.Unavailable:
		return fmt.Errorf("%w: planner %s: %s: %s", ErrPluginExited, c.name, method, st.Message())
	case st.Code() == codes.Unimplemented:
		return fmt.Errorf("%w: planner %s: %s: %s", ErrUnsupported, c.name, method, st.Message())
	case st.Code() == codes.DeadlineExceeded:
		// gRPC gives the plugin the caller's deadline: the plugin may see
		// it pass a moment before the caller's own timer fires.
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d.Add(-deadlineSkew)) {
			return context.DeadlineExceeded
		}
	}
	// Canceled or DeadlineExceeded while the caller's ctx is live is the
	// plugin's doing: not the caller's cancellation, so not ctx.Err().
	return &RemoteError{Plugin: c.name, Method: method, Msg: st.Message()}
}
