package plannerrpc

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
)

// TestConvertRefusesMalformed: columns that do not line up, an extra out
// of order or out of range, links that are not a square matrix, and
// string indices out of range are errors naming what is wrong, never a
// job given another's fields.
func TestConvertRefusesMalformed(t *testing.T) {
	jobs := func() *pb.PlannerJobs {
		return jobsToProto([]policy.Job{{ID: "a", Width: 1}, {ID: "b", Width: 2, Preferred: []int{0}}})
	}
	for name, c := range map[string]struct {
		snap *pb.PlannerSnapshot
		want string
	}{
		"short column":       {&pb.PlannerSnapshot{Queue: func() *pb.PlannerJobs { j := jobs(); j.Width = j.Width[:1]; return j }()}, "column width"},
		"extra out of range": {&pb.PlannerSnapshot{Queue: func() *pb.PlannerJobs { j := jobs(); j.Extras[0].Index = 5; return j }()}, "extra for job 5"},
		"extras out of order": {&pb.PlannerSnapshot{Queue: func() *pb.PlannerJobs {
			j := jobs()
			j.Extras = append(j.Extras, j.Extras[0])
			return j
		}()}, "extra for job 1"},
		"busy columns": {&pb.PlannerSnapshot{Sites: []*pb.PlannerSite{{Name: "x", BusyNodes: []int64{1}}}}, "site x: busy"},
		"links":        {&pb.PlannerSnapshot{Sites: []*pb.PlannerSite{{Name: "x"}, {Name: "y"}}, LinksSet: true, LinkSecPerByte: []float64{1}, LinkLatencyNs: []int64{1}}, "links"},
		"uplinks":      {&pb.PlannerSnapshot{UplinkSecPerByte: []float64{1}}, "uplinks"},
	} {
		if _, err := snapshotFromProto(c.snap); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one naming %q", name, err, c.want)
		}
	}

	ok := planToProto(&policy.Plan{Pending: []policy.Pending{
		{Job: "a", Status: policy.NewStatus(policy.Unschedulable, "easy", "blocked", "behind b")},
		{Job: "b", Status: policy.NewStatus(policy.Wait, "easy", "blocked")},
	}})
	if back, err := planFromProto(ok); err != nil || len(back.Pending) != 2 || back.Pending[1].Status.Reasons[0] != "blocked" || back.Pending[0].Status.Plugin != "easy" {
		t.Fatalf("a good pending list: %+v, %v", back, err)
	}
	if len(ok.Pending.Strings) != 3 {
		t.Fatalf("string table %q: each string should be sent once", ok.Pending.Strings)
	}
	for name, f := range map[string]func(l *pb.PlannerPendingList){
		"short column":      func(l *pb.PlannerPendingList) { l.Code = l.Code[:1] },
		"bad plugin index":  func(l *pb.PlannerPendingList) { l.Plugin[1] = 9 },
		"bad reason index":  func(l *pb.PlannerPendingList) { l.Reason[0] = -1 },
		"too many reasons":  func(l *pb.PlannerPendingList) { l.ReasonCount[1] = 5 },
		"reasons left over": func(l *pb.PlannerPendingList) { l.ReasonCount[1] = 0 },
		"unknown code":      func(l *pb.PlannerPendingList) { l.Code[0] = 0 },
	} {
		p := planToProto(&policy.Plan{Pending: []policy.Pending{
			{Job: "a", Status: policy.NewStatus(policy.Unschedulable, "easy", "blocked", "behind b")},
			{Job: "b", Status: policy.NewStatus(policy.Wait, "easy", "blocked")},
		}})
		f(p.Pending)
		if _, err := planFromProto(p); err == nil || !strings.Contains(err.Error(), "pending") {
			t.Errorf("%s: err = %v, want a refusal", name, err)
		}
	}
	bad := planToProto(&policy.Plan{Decisions: []policy.Decision{{Job: "a", Action: policy.Start, Chosen: policy.Option{Parts: []policy.Part{{Site: 0, Nodes: 2}}}}}})
	bad.Decisions[0].Chosen.PartNodes = nil
	if _, err := planFromProto(bad); err == nil || !strings.Contains(err.Error(), `job "a"`) {
		t.Errorf("parts that do not line up: err = %v", err)
	}
}

// TestServerRefusesBadPass: a pass for a session the plugin does not have
// is NotFound; a hold change the session refuses is InvalidArgument and
// ends the session (it saw part of the changes); submits whose columns do
// not line up are refused before any change is applied.
func TestServerRefusesBadPass(t *testing.T) {
	srv := newServer(builtin(t, "greedy-easy"))
	ctx := context.Background()
	s := &policy.Snapshot{Now: t0, Quiet: true, Sites: []policy.Site{{Name: "a", Nodes: 4, Free: 4, H: 1}}}
	open := func() uint64 {
		rep, err := srv.NewSession(ctx, &pb.NewPlannerSessionRequest{Snapshot: snapshotToProto(s)})
		if err != nil {
			t.Fatal(err)
		}
		return rep.GetSession()
	}
	if _, err := srv.pass(ctx, &pb.PlannerPassRequest{Session: 99}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown session: %v", err)
	}
	id := open()
	bad := jobsToProto([]policy.Job{{ID: "x", Width: 1}})
	bad.Origin = nil
	if _, err := srv.pass(ctx, &pb.PlannerPassRequest{Session: id, Submits: bad}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad submits: %v", err)
	}
	later := &pb.PlannerPassRequest{Session: id}
	later.NowSec, later.NowNanos = timeToWire(t0.Add(time.Minute))
	if _, err := srv.pass(ctx, later); err != nil {
		t.Fatalf("the session did not survive refused submits: %v", err)
	}
	if _, err := srv.pass(ctx, &pb.PlannerPassRequest{Session: id, Holds: []*pb.PlannerHoldChange{{Release: true, Site: 0, Nodes: 2}}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad release: %v", err)
	}
	if _, err := srv.pass(ctx, &pb.PlannerPassRequest{Session: id}); status.Code(err) != codes.NotFound {
		t.Fatalf("the session survived a half-applied pass: %v", err)
	}
	if _, err := srv.NewSession(ctx, &pb.NewPlannerSessionRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("no snapshot: %v", err)
	}
}

// blocking is an Incremental planner whose session passes block until
// their ctx ends while block is set.
type blocking struct {
	policy.Incremental
	block *atomic.Bool
}

func (b blocking) NewSession(s *policy.Snapshot) (policy.Session, error) {
	ss, err := b.Incremental.NewSession(s)
	return blockingSession{ss, b.block}, err
}

type blockingSession struct {
	policy.Session
	block *atomic.Bool
}

func (b blockingSession) Plan(ctx context.Context, now time.Time) (*policy.Plan, error) {
	if b.block.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return b.Session.Plan(ctx, now)
}

// TestSessionCallerCtxEnds: when the caller's ctx ends during a pass the
// pass returns ctx.Err(); the next pass re-opens the session from the
// mirror and plans what an uninterrupted session plans.
func TestSessionCallerCtxEnds(t *testing.T) {
	block := &atomic.Bool{}
	p, _ := dial(t, blocking{builtin(t, "greedy-easy").(policy.Incremental), block})
	s := &policy.Snapshot{Now: t0, Quiet: true, Sites: []policy.Site{{Name: "a", Nodes: 4, Free: 4, H: 1}}}
	got, err := p.(policy.Incremental).NewSession(s)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := builtin(t, "greedy-easy").(policy.Incremental).NewSession(s)
	for _, ss := range []policy.Session{got, want} {
		ss.Submit(policy.Job{ID: "j1", Width: 2, Estimate: time.Hour, Submit: t0, Origin: -1})
		ss.Submit(policy.Job{ID: "j2", Width: 3, Estimate: time.Hour, Submit: t0, Origin: -1})
	}
	block.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := got.Plan(ctx, t0.Add(time.Minute)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
	block.Store(false)
	pg, err := got.Plan(context.Background(), t0.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := want.Plan(context.Background(), t0.Add(2*time.Minute))
	samePlan(t, "after an interrupted pass", pw, pg)
	if len(pg.Decisions) != 1 || pg.Decisions[0].Job != "j1" {
		t.Fatalf("decisions %+v, want j1 started", pg.Decisions)
	}
}
