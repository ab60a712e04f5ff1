package policyrpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
)

// TieringClient is the host's side of a tiering plugin: a policy.Tiering.
// Its methods have no error result: when a call fails each answers the
// safe value its doc says and keeps the failure for Err.
type TieringClient struct {
	*base
	rpc pb.TieringClient
}

var _ policy.Tiering = (*TieringClient)(nil)

func newTieringClient(done context.Context, cc *grpc.ClientConn, timeout time.Duration) (*TieringClient, error) {
	rpc := pb.NewTieringClient(cc)
	b, err := dial(done, plugins.KindTiering, timeout, func(ctx context.Context) (*pb.PolicyInfo, error) {
		return rpc.Info(ctx, &pb.PolicyInfoRequest{})
	})
	if err != nil {
		return nil, err
	}
	return &TieringClient{base: b, rpc: rpc}, nil
}

// Tier implements policy.Tiering: one Tier RPC. A failed call gives
// TierNone (one copy, retried: what a job gets with no QoS rule) and says
// why.
func (c *TieringClient) Tier(d *policy.TierDemand, sites []policy.Site) (policy.Tier, string) {
	t, why, err := c.tier(d, sites)
	c.note(err)
	return t, why
}

// tier is Tier with its failure (TierNone and why then).
func (c *TieringClient) tier(d *policy.TierDemand, sites []policy.Site) (policy.Tier, string, error) {
	req := &pb.TierRequest{Demand: tierDemandToProto(d)}
	for i := range sites {
		req.Sites = append(req.Sites, plannerrpc.SiteToProto(&sites[i]))
	}
	var rep *pb.TierReply
	err := c.call("Tier", func(ctx context.Context) (err error) {
		rep, err = c.rpc.Tier(ctx, req)
		return err
	})
	if err == nil {
		err = c.remote("Tier", rep.GetError())
	}
	var t policy.Tier
	if err == nil {
		switch t = policy.Tier(rep.GetTier()); t {
		case policy.TierHigh, policy.TierLow, policy.TierNone:
		default:
			err = c.bad("Tier", fmt.Errorf("tier %q is none of high, low, none", t))
		}
	}
	if err != nil {
		return policy.TierNone, "tiering plugin failed: " + err.Error(), err
	}
	return t, rep.GetWhy(), nil
}

// Copies implements policy.Tiering: one Copies stream, on which the plugin
// asks in.Reliability (when set) and the host answers. A failed call gives
// the planner's choice as the first copy and no second (nil, nil when the
// decision has no parts).
func (c *TieringClient) Copies(in *policy.CopyInput) (first, second []policy.Part) {
	first, second, err := c.copies(in)
	c.note(err)
	return first, second
}

// copies is Copies with its failure (the planner's choice and no second
// then).
func (c *TieringClient) copies(in *policy.CopyInput) (first, second []policy.Part, err error) {
	first, second, err = c.copiesCall(in)
	if err != nil {
		return in.Decision.Chosen.Parts, nil, err
	}
	return first, second, nil
}

func (c *TieringClient) copiesCall(in *policy.CopyInput) (first, second []policy.Part, err error) {
	up := &pb.CopyInput{Snapshot: snapToProto(in.Snapshot), Job: jobToProto(in.Job),
		Decision: plannerrpc.PlanToProto(&policy.Plan{Decisions: []policy.Decision{in.Decision}}), Reliability: in.Reliability != nil}
	var res *pb.CopiesResult
	err = c.call("Copies", func(ctx context.Context) error {
		st, err := c.rpc.Copies(ctx)
		if err != nil {
			return err
		}
		if err := st.Send(&pb.CopiesUp{Msg: &pb.CopiesUp_Input{Input: up}}); err != nil {
			return err
		}
		for {
			m, err := st.Recv()
			if err != nil {
				return err
			}
			switch x := m.GetMsg().(type) {
			case *pb.CopiesDown_Rc:
				if in.Reliability == nil {
					return errors.New("the plugin asked a reliability model the host does not have")
				}
				rc := in.Reliability.RC(x.Rc.GetSite(), time.Duration(x.Rc.GetCtNs()))
				if err := st.Send(&pb.CopiesUp{Msg: &pb.CopiesUp_Rc{Rc: rc}}); err != nil {
					return err
				}
			case *pb.CopiesDown_Result:
				res = x.Result
				return st.CloseSend()
			default:
				return errors.New("an empty message on the Copies stream")
			}
		}
	})
	if err != nil {
		return nil, nil, err
	}
	if err := c.remote("Copies", res.GetError()); err != nil {
		return nil, nil, err
	}
	if first, err = partsFromProto(res.GetFirst()); err == nil {
		second, err = partsFromProto(res.GetSecond())
	}
	if err != nil {
		return nil, nil, c.bad("Copies", err)
	}
	return first, second, nil
}

// Backup implements policy.Tiering: one Backup RPC. A failed call gives a
// passive backup (submitted only if the primary fails: nothing runs twice
// on a broken rule) and says why.
func (c *TieringClient) Backup(in *policy.BackupInput) policy.Backup {
	b, err := c.backup(in)
	c.note(err)
	return b
}

// backup is Backup with its failure (a passive backup then).
func (c *TieringClient) backup(in *policy.BackupInput) (policy.Backup, error) {
	req := &pb.BackupRequest{Snapshot: snapToProto(in.Snapshot), Job: jobToProto(in.Job), Primary: optionToProto(in.Primary), Backup: partsToProto(in.Backup)}
	req.NowSec, req.NowNanos = tw(in.Now)
	var rep *pb.BackupReply
	err := c.call("Backup", func(ctx context.Context) (err error) {
		rep, err = c.rpc.Backup(ctx, req)
		return err
	})
	if err == nil {
		err = c.remote("Backup", rep.GetError())
	}
	if err != nil {
		return policy.Backup{Passive: true, Why: "passive: the tiering plugin failed: " + err.Error()}, err
	}
	return policy.Backup{Passive: rep.GetPassive(), Due: tf(rep.GetDueSec(), rep.GetDueNanos()), Why: rep.GetWhy()}, nil
}

type tieringServer struct {
	pb.UnimplementedTieringServer
	impl    policy.Tiering
	version string
}

func registerTiering(s *grpc.Server, impl policy.Tiering, version string) {
	pb.RegisterTieringServer(s, &tieringServer{impl: impl, version: version})
}

func (s *tieringServer) Info(context.Context, *pb.PolicyInfoRequest) (*pb.PolicyInfo, error) {
	return info(plugins.KindTiering, s.impl.Name(), s.version), nil
}

func (s *tieringServer) Tier(_ context.Context, req *pb.TierRequest) (*pb.TierReply, error) {
	var sites []policy.Site
	for i, x := range req.GetSites() {
		st, err := plannerrpc.SiteFromProto(x)
		if err != nil {
			return nil, invalid(fmt.Errorf("site %d: %w", i, err))
		}
		sites = append(sites, st)
	}
	t, why := s.impl.Tier(tierDemandFromProto(req.GetDemand()), sites)
	return &pb.TierReply{Tier: string(t), Why: why}, nil
}

// streamRC is the plugin's side of the host's reliability model: each RC
// is a question on the Copies stream and its answer.
type streamRC struct {
	st  pb.Tiering_CopiesServer
	err error // the first failure; later RCs answer 0 without asking
}

func (r *streamRC) RC(site string, ct time.Duration) float64 {
	if r.err != nil {
		return 0
	}
	if r.err = r.st.Send(&pb.CopiesDown{Msg: &pb.CopiesDown_Rc{Rc: &pb.RCQuestion{Site: site, CtNs: int64(ct)}}}); r.err != nil {
		return 0
	}
	m, err := r.st.Recv()
	if err != nil {
		r.err = err
		return 0
	}
	x, ok := m.GetMsg().(*pb.CopiesUp_Rc)
	if !ok {
		r.err = invalid(errors.New("the host sent something other than an RC answer"))
		return 0
	}
	return x.Rc
}

func (s *tieringServer) Copies(st pb.Tiering_CopiesServer) error {
	m, err := st.Recv()
	if err != nil {
		return err
	}
	up := m.GetInput()
	if up == nil {
		return invalid(errors.New("the Copies stream did not start with its input"))
	}
	in := &policy.CopyInput{}
	if in.Snapshot, err = snapFromProto(up.GetSnapshot()); err != nil {
		return invalid(fmt.Errorf("snapshot: %w", err))
	}
	if in.Job, err = jobFromProto(up.GetJob()); err != nil {
		return invalid(fmt.Errorf("job: %w", err))
	}
	plan, err := plannerrpc.PlanFromProto(up.GetDecision())
	if err != nil {
		return invalid(fmt.Errorf("decision: %w", err))
	}
	if len(plan.Decisions) != 1 {
		return invalid(fmt.Errorf("%d decisions where one was expected", len(plan.Decisions)))
	}
	in.Decision = plan.Decisions[0]
	var rc *streamRC
	if up.GetReliability() {
		rc = &streamRC{st: st}
		in.Reliability = rc
	}
	first, second := s.impl.Copies(in)
	if rc != nil && rc.err != nil {
		return rc.err // the answers were lost: the copies were chosen on zeros
	}
	return st.Send(&pb.CopiesDown{Msg: &pb.CopiesDown_Result{Result: &pb.CopiesResult{First: partsToProto(first), Second: partsToProto(second)}}})
}

func (s *tieringServer) Backup(_ context.Context, req *pb.BackupRequest) (*pb.BackupReply, error) {
	in := &policy.BackupInput{Now: tf(req.GetNowSec(), req.GetNowNanos())}
	var err error
	if in.Snapshot, err = snapFromProto(req.GetSnapshot()); err != nil {
		return nil, invalid(fmt.Errorf("snapshot: %w", err))
	}
	if in.Job, err = jobFromProto(req.GetJob()); err != nil {
		return nil, invalid(fmt.Errorf("job: %w", err))
	}
	if in.Primary, err = optionFromProto(req.GetPrimary()); err != nil {
		return nil, invalid(fmt.Errorf("primary: %w", err))
	}
	if in.Backup, err = partsFromProto(req.GetBackup()); err != nil {
		return nil, invalid(fmt.Errorf("backup: %w", err))
	}
	b := s.impl.Backup(in)
	out := &pb.BackupReply{Passive: b.Passive, Why: b.Why}
	out.DueSec, out.DueNanos = tw(b.Due)
	return out, nil
}

func tierDemandToProto(d *policy.TierDemand) *pb.TierDemand {
	if d == nil {
		return nil
	}
	out := &pb.TierDemand{Asked: string(d.Asked), EstimateNs: int64(d.Estimate), SitesSet: d.Sites != nil, Sites: d.Sites, Lambda: d.Lambda}
	out.DeadlineSec, out.DeadlineNanos = tw(d.Deadline)
	out.SubmitSec, out.SubmitNanos = tw(d.Submit)
	return out
}

func tierDemandFromProto(d *pb.TierDemand) *policy.TierDemand {
	if d == nil {
		return nil
	}
	return &policy.TierDemand{Asked: policy.Tier(d.GetAsked()), Deadline: tf(d.GetDeadlineSec(), d.GetDeadlineNanos()),
		Estimate: time.Duration(d.GetEstimateNs()), Sites: stringsOrNil(d.GetSitesSet(), d.GetSites()),
		Submit: tf(d.GetSubmitSec(), d.GetSubmitNanos()), Lambda: d.GetLambda()}
}
