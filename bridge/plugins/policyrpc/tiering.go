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
	// The contract: Tier sees the configured sites' Name and H, nothing else.
	req := &pb.TierRequest{Demand: tierDemandToProto(d)}
	for _, st := range sites {
		req.Sites = append(req.Sites, &pb.PlannerSite{Name: st.Name, H: st.H})
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

// Copies implements policy.Tiering: one Copies RPC (the sites'
// reliability costs travel as data, in.RC). A failed call gives the
// planner's choice as the first copy and no second (nil, nil when the
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
	req := &pb.CopyInput{Snapshot: snapToProto(in.Snapshot), Job: jobToProto(in.Job),
		Decision: plannerrpc.PlanToProto(&policy.Plan{Decisions: []policy.Decision{in.Decision}}), RcSet: in.RC != nil, Rc: in.RC}
	var res *pb.CopiesResult
	if err = c.call("Copies", func(ctx context.Context) (err error) {
		res, err = c.rpc.Copies(ctx, req)
		return err
	}); err != nil {
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

func (s *tieringServer) Copies(_ context.Context, req *pb.CopyInput) (*pb.CopiesResult, error) {
	in := &policy.CopyInput{}
	var err error
	if in.Snapshot, err = snapFromProto(req.GetSnapshot()); err != nil {
		return nil, invalid(fmt.Errorf("snapshot: %w", err))
	}
	if in.Job, err = jobFromProto(req.GetJob()); err != nil {
		return nil, invalid(fmt.Errorf("job: %w", err))
	}
	plan, err := plannerrpc.PlanFromProto(req.GetDecision())
	if err != nil {
		return nil, invalid(fmt.Errorf("decision: %w", err))
	}
	if len(plan.Decisions) != 1 {
		return nil, invalid(fmt.Errorf("%d decisions where one was expected", len(plan.Decisions)))
	}
	in.Decision = plan.Decisions[0]
	if req.GetRcSet() {
		in.RC = req.GetRc()
		if in.RC == nil {
			in.RC = []float64{}
		}
	}
	first, second := s.impl.Copies(in)
	return &pb.CopiesResult{First: partsToProto(first), Second: partsToProto(second)}, nil
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
