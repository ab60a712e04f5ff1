package bridge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/dependable"
	"github.com/gridsub/gridsub/policy/feasible"
	"github.com/gridsub/gridsub/policy/remap"
	"github.com/gridsub/gridsub/policy/reserve"
	"github.com/gridsub/gridsub/policy/trust"
)

// Function-field fakes of the extension points: each method calls its
// field when set, else the built-in.

type fakeFeasibility struct {
	feasible func(*policy.Demand, *policy.Snapshot) (policy.Verdict, error)
	late     func(*policy.Demand, *policy.Snapshot) (string, error)
}

func (fakeFeasibility) Name() string { return "fake" }
func (f fakeFeasibility) Feasible(d *policy.Demand, s *policy.Snapshot) (policy.Verdict, error) {
	if f.feasible != nil {
		return f.feasible(d, s)
	}
	return feasible.Check{}.Feasible(d, s)
}
func (f fakeFeasibility) Late(d *policy.Demand, s *policy.Snapshot) (string, error) {
	if f.late != nil {
		return f.late(d, s)
	}
	return feasible.Check{}.Late(d, s)
}

type fakeAdmission struct {
	newBook func([]policy.ResvResource, uint64) policy.ReservationBook
}

func (fakeAdmission) Name() string { return "fake" }
func (f fakeAdmission) NewBook(res []policy.ResvResource, seed uint64) policy.ReservationBook {
	return f.newBook(res, seed)
}

// fakeBook is a DRRM book whose Admit the test replaces.
type fakeBook struct {
	reserve.GraphBook
	admit func(policy.ResvRequest, time.Time, []policy.ResvRunning) policy.Status
}

func (b fakeBook) Admit(q policy.ResvRequest, now time.Time, running []policy.ResvRunning) policy.Status {
	return b.admit(q, now, running)
}

type fakeTrust struct{ policy.Trust }

func (fakeTrust) Name() string { return "fake" }

type fakeTiering struct {
	tier   func(*policy.TierDemand, []policy.Site) (policy.Tier, string)
	copies func(*policy.CopyInput) ([]policy.Part, []policy.Part)
}

func (fakeTiering) Name() string { return "fake" }
func (f fakeTiering) Tier(d *policy.TierDemand, s []policy.Site) (policy.Tier, string) {
	if f.tier != nil {
		return f.tier(d, s)
	}
	return dependable.Tiering{}.Tier(d, s)
}
func (f fakeTiering) Copies(in *policy.CopyInput) ([]policy.Part, []policy.Part) {
	if f.copies != nil {
		return f.copies(in)
	}
	return dependable.Tiering{}.Copies(in)
}
func (fakeTiering) Backup(in *policy.BackupInput) policy.Backup {
	return dependable.Tiering{}.Backup(in)
}

type fakeRemap struct {
	moves func(*policy.RemapInput) ([]policy.Move, error)
}

func (fakeRemap) Name() string                                         { return "fake" }
func (f fakeRemap) Moves(in *policy.RemapInput) ([]policy.Move, error) { return f.moves(in) }

var (
	_ policy.Feasibility     = fakeFeasibility{}
	_ policy.Admission       = fakeAdmission{}
	_ policy.ReservationBook = fakeBook{}
	_ policy.Trust           = fakeTrust{}
	_ policy.Tiering         = fakeTiering{}
	_ policy.Remap           = fakeRemap{}
)

func policiesBroker(t *testing.T, p Policies, tiers *TierOptions) *Broker {
	t.Helper()
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: newFake("A", 2), H: 1}, {Name: "B", Backend: newFake("B", 2), H: 1}},
		Planner: scriptPlanner{func(*policy.Snapshot, policy.Job) *policy.Decision { return nil }}, Policies: p, Tiers: tiers})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The broker refuses at submission what the configured check refuses,
// with its reasons, and rejects a waiting job the check finds late.
func TestPoliciesFeasibilityIsAsked(t *testing.T) {
	var asked *policy.Demand
	b := policiesBroker(t, Policies{Feasibility: fakeFeasibility{feasible: func(d *policy.Demand, _ *policy.Snapshot) (policy.Verdict, error) {
		asked = d
		return policy.Verdict{Status: policy.NewStatus(policy.Unresolvable, "fake", "the fake says never"), Cause: policy.CauseCapacity}, nil
	}}}, nil)
	_, err := b.Submit(context.Background(), req(1), t0)
	if !errors.Is(err, ErrInfeasible) || errors.Is(err, ErrDeadline) || !strings.Contains(err.Error(), "the fake says never") {
		t.Fatalf("Submit: %v", err)
	}
	if asked == nil || asked.Width != 1 {
		t.Fatalf("the check saw %+v", asked)
	}

	lateAsked := 0
	b = policiesBroker(t, Policies{Feasibility: fakeFeasibility{late: func(d *policy.Demand, s *policy.Snapshot) (string, error) {
		lateAsked++
		return "deadline X: the fake says too late", nil
	}}}, nil)
	r := req(1)
	r.Deadline = t0.Add(24 * time.Hour)
	j, err := b.Submit(context.Background(), r, t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0.Add(time.Second))
	if got := mustJob(t, b, j.ID); lateAsked == 0 || got.State != Rejected || !strings.Contains(got.Reason, "the fake says too late") {
		t.Fatalf("late asked %d times; job %s: %s", lateAsked, got.State, got.Reason)
	}
}

// Reservations go through the configured mechanism's book.
func TestPoliciesAdmissionIsAsked(t *testing.T) {
	admits := 0
	b := policiesBroker(t, Policies{Admission: fakeAdmission{newBook: func(res []policy.ResvResource, seed uint64) policy.ReservationBook {
		return fakeBook{GraphBook: reserve.GraphBook{Graph: reserve.New(res)}, admit: func(q policy.ResvRequest, now time.Time, _ []policy.ResvRunning) policy.Status {
			admits++
			if !now.Equal(t0) {
				t.Errorf("Admit at %v, want %v", now, t0)
			}
			return policy.NewStatus(policy.Unresolvable, "fake", "the fake book is full")
		}}
	}}}, nil)
	r := req(1)
	r.Estimate = time.Hour
	r.Window = &Window{Earliest: t0.Add(time.Hour), Latest: t0.Add(3 * time.Hour)}
	j, err := b.Submit(context.Background(), r, t0)
	if err != nil {
		t.Fatal(err)
	}
	if admits != 1 || j.State != Rejected || !strings.Contains(j.Reason, "the fake book is full") {
		t.Fatalf("%d admissions; job %s: %s", admits, j.State, j.Reason)
	}
}

// The daemon's trust task asks the broker for its trust policy.
func TestPoliciesTrustIsTheConfiguredOne(t *testing.T) {
	f := fakeTrust{trust.Policy{Model: trust.DefaultModel()}}
	if got := policiesBroker(t, Policies{Trust: f}, nil).TrustPolicy(); got.Name() != "fake" {
		t.Fatalf("TrustPolicy = %s", got.Name())
	}
	if got := policiesBroker(t, Policies{}, nil).TrustPolicy(); got.Name() != trust.BuiltinName {
		t.Fatalf("default TrustPolicy = %s", got.Name())
	}
}

// Tiers come from the configured rule, and copies from its plan.
func TestPoliciesTieringIsAsked(t *testing.T) {
	copies := 0
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: newFake("A", 2), H: 1}, {Name: "B", Backend: newFake("B", 2), H: 1}},
		Planner: scriptPlanner{firstFit}, Tiers: &TierOptions{}, Policies: Policies{Tiering: fakeTiering{
			tier: func(d *policy.TierDemand, sites []policy.Site) (policy.Tier, string) {
				if len(sites) != 2 || d.Lambda != DefaultLambda {
					t.Errorf("tier rule saw %d sites, λ %v", len(sites), d.Lambda)
				}
				return policy.TierHigh, "the fake says high"
			},
			copies: func(in *policy.CopyInput) ([]policy.Part, []policy.Part) {
				copies++
				return dependable.Tiering{}.Copies(in)
			}}}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := b.Submit(context.Background(), req(1), t0)
	if err != nil {
		t.Fatal(err)
	}
	if j.Tier != TierHigh || j.TierWhy != "the fake says high" {
		t.Fatalf("tier %q: %q", j.Tier, j.TierWhy)
	}
	mustCycle(t, b, t0)
	if got := mustJob(t, b, j.ID); copies != 1 || len(got.Comps) != 2 {
		t.Fatalf("copy plan asked %d times; %d components at %s", copies, len(got.Comps), got.Sites())
	}
}

// Remapping passes ask the configured policy with the waiting jobs.
func TestPoliciesRemapIsAsked(t *testing.T) {
	now := t0
	clock := func() time.Time { return now }
	a, bb := newQueueSite("A", 2, clock), newQueueSite("B", 2, clock)
	a.foreign = []backends.Allocation{{Nodes: 2, Until: t0.Add(2 * time.Hour)}}
	var saw []string
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a, H: 1}, {Name: "B", Backend: bb, H: 1}},
		Planner: scriptPlanner{onSite(0)}, Remap: &RemapOptions{}, Policies: Policies{Remap: fakeRemap{func(in *policy.RemapInput) ([]policy.Move, error) {
			for _, w := range in.Waiting {
				saw = append(saw, w.Job.ID)
			}
			return remap.Gain{}.Moves(in)
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := req(2)
	r.Estimate = 30 * time.Minute
	j, err := b.Submit(context.Background(), r, now)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, now)
	now = t0.Add(time.Minute)
	mustCycle(t, b, now)
	if len(saw) == 0 || saw[len(saw)-1] != j.ID {
		t.Fatalf("the remap policy saw %v, want %s waiting", saw, j.ID)
	}
	if got := mustJob(t, b, j.ID); got.Moving == nil && got.Sites() != "B:2" {
		t.Fatalf("B is free: the built-in rule behind the fake moves the job, got %s\n%s", got.Sites(), eventsOf(got))
	}
}
