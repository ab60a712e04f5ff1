package plannerrpc

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
)

// TestConvertRoundTrip: a snapshot and a plan with every field set (and
// the nil/empty distinctions the policy types make: nil Allowed is every
// site, empty is none; nil Links is free transfer) come back equal after
// the converters and the protobuf wire.
func TestConvertRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := randSnapshot(r, 4, 30)
	s.Quiet = true
	s.Sites[1].Down = true
	s.Queue[0].Allowed = []int{}
	s.Queue[1].Allowed = []int{2, 0}
	s.Queue[2].Deadline = time.Time{}
	s.Queue[3].Submit = time.Unix(0, 0).UTC() // the Unix epoch is not the zero time
	// What a job asks per node crosses, and what a site's nodes have.
	s.Queue[4].PerNode = policy.NodeShape{Cores: 4, MemBytes: 8 << 30, GPUs: 2}
	s.Sites[2].Shape = policy.NodeShape{Cores: 16, MemBytes: 64 << 30, GPUs: 4}
	s.Queue[4].Worth = policy.Worth{Shape: policy.Linear, A: 100, B: 0.8, C: 0.05} // the benefit planner's inputs
	s.Queue[5].Worth = policy.Worth{Shape: policy.Step, A: 1, B: 0.5, C: 1}
	s.Queue[5].BestEffort = true
	s.Queue[6] = policy.Job{ID: s.Queue[6].ID, Width: 1, Origin: -1, BestEffort: true} // the only rare field set
	b, err := proto.Marshal(snapshotToProto(s))
	if err != nil {
		t.Fatal(err)
	}
	var m pb.PlannerSnapshot
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	got, err := snapshotFromProto(&m)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("snapshot round trip:\n%+v\nwant\n%+v", got, s)
	}
	for _, links := range [][][]policy.Link{nil, {}} {
		s2 := &policy.Snapshot{Links: links}
		back, _ := snapshotFromProto(snapshotToProto(s2))
		if (back.Links == nil) != (links == nil) {
			t.Fatalf("Links %#v came back %#v", links, back.Links)
		}
	}

	opt := policy.Option{Parts: []policy.Part{{Site: 0, Nodes: 3}, {Site: 2, Nodes: 5}}, Start: t0.Add(time.Hour),
		Runtime: 90 * time.Minute, Transfer: 1500 * time.Millisecond, Immediate: true}
	plan := &policy.Plan{
		Decisions: []policy.Decision{
			{Job: "a", Action: policy.Start, Chosen: opt, Backfilled: true, Beaten: []policy.Option{opt, {Parts: []policy.Part{{Site: 1, Nodes: 8}}}},
				Status: policy.NewStatus(policy.Success, "greedy", "fits now")},
			{Job: "b", Action: policy.Reserve, Chosen: opt, Status: policy.NewStatus(policy.Wait, "easy")},
			{Job: "c", Action: policy.Reject, Status: policy.NewStatus(policy.Unresolvable, "admit", "too wide", "no site")},
			{Job: "d", Action: policy.Replicate, Chosen: opt, Status: policy.NewStatus(policy.Error, "sabin")},
		},
		Pending: []policy.Pending{{Job: "e", Status: policy.NewStatus(policy.Unschedulable, "easy", "blocked")}},
	}
	b, err = proto.Marshal(planToProto(plan))
	if err != nil {
		t.Fatal(err)
	}
	var mp pb.PlannerPlan
	if err := proto.Unmarshal(b, &mp); err != nil {
		t.Fatal(err)
	}
	back, err := planFromProto(&mp)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, plan) {
		t.Fatalf("plan round trip:\n%+v\nwant\n%+v", back, plan)
	}
}

// TestConvertRefusesUnknownEnums: a decision without an action, or with a
// status code policy does not have, is refused rather than acted on.
func TestConvertRefusesUnknownEnums(t *testing.T) {
	for _, d := range []*pb.PlannerDecision{
		{Job: "x", Status: &pb.PlannerStatus{Code: pb.PlannerCode_PLANNER_CODE_SUCCESS}},
		{Job: "x", Action: 9, Status: &pb.PlannerStatus{Code: pb.PlannerCode_PLANNER_CODE_SUCCESS}},
		{Job: "x", Action: pb.PlannerAction_PLANNER_ACTION_START},
		{Job: "x", Action: pb.PlannerAction_PLANNER_ACTION_START, Status: &pb.PlannerStatus{Code: 17}},
	} {
		if _, err := planFromProto(&pb.PlannerPlan{Decisions: []*pb.PlannerDecision{d}}); err == nil || !strings.Contains(err.Error(), `job "x"`) {
			t.Errorf("decision %v: err = %v, want a refusal naming the job", d, err)
		}
	}
	if _, err := snapshotFromProto(nil); err == nil {
		t.Error("a missing snapshot was accepted")
	}
}

// TestShimPlan: Plan through the shim gives the planner exactly the
// snapshot the host sent and the host exactly the plan the planner made,
// and Name is the planner's. A planner that is not an Incremental is
// dispensed as a plain Planner.
func TestShimPlan(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	s := randSnapshot(r, 5, 40)
	ref := builtin(t, "greedy-easy")
	var seen *policy.Snapshot
	mock := &mockPlanner{name: "mock", plan: func(ctx context.Context, got *policy.Snapshot) (*policy.Plan, error) {
		seen = got
		return ref.Plan(ctx, got)
	}}
	p, _ := dial(t, mock)
	if p.Name() != "mock" {
		t.Fatalf("Name() = %q, want mock", p.Name())
	}
	if _, ok := p.(policy.Incremental); ok {
		t.Fatal("a plain planner was dispensed as a policy.Incremental")
	}
	got, err := p.Plan(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(seen, s) {
		t.Fatalf("the planner saw\n%+v\nthe host sent\n%+v", seen, s)
	}
	want, err := builtin(t, "greedy-easy").Plan(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Decisions) == 0 {
		t.Fatal("the test snapshot starts nothing: it tests nothing")
	}
	samePlan(t, "Plan", want, got)
}

// TestShimErrors: a planner's error is a *RemoteError naming the plugin
// and the method; the caller's ctx ending is ctx.Err() (also while the
// plugin is busy); the session RPCs of a plain planner are ErrUnsupported;
// a plugin that is gone is ErrPluginExited.
func TestShimErrors(t *testing.T) {
	s := randSnapshot(rand.New(rand.NewPCG(5, 6)), 3, 5)
	mock := &mockPlanner{name: "mock", plan: func(ctx context.Context, got *policy.Snapshot) (*policy.Plan, error) {
		if got.MultiSite == 42 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return nil, errors.New("the model diverged")
	}}
	p, srv := dial(t, mock)

	_, err := p.Plan(context.Background(), s)
	var re *RemoteError
	if !errors.As(err, &re) || re.Plugin != "mock" || re.Method != "Plan" || !strings.Contains(re.Msg, "the model diverged") {
		t.Fatalf("err = %v, want a RemoteError from mock's Plan with its message", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Plan(ctx, s); err != context.Canceled {
		t.Fatalf("cancelled ctx: err = %v, want context.Canceled", err)
	}
	slow := *s
	slow.MultiSite = 42
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.Plan(ctx, &slow); err != context.DeadlineExceeded {
		t.Fatalf("deadline while the plugin plans: err = %v, want context.DeadlineExceeded", err)
	}

	c := p.(*Client)
	if _, err := c.openSession(context.Background(), s); !errors.Is(err, ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("NewSession on a plain planner: err = %v, want ErrUnsupported", err)
	}

	srv.Stop()
	if _, err := p.Plan(context.Background(), s); !errors.Is(err, ErrPluginExited) {
		t.Fatalf("plugin gone: err = %v, want ErrPluginExited", err)
	}
}
