package bridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy/coalloc"
)

// shapedSite is a fakeSite whose nodes have a number of cores.
type shapedSite struct {
	*fakeSite
	cores int
}

func (s shapedSite) Info(ctx context.Context) (*backends.SiteInfo, error) {
	in, err := s.fakeSite.Info(ctx)
	if in != nil {
		in.CoresPerNode = s.cores
	}
	return in, err
}

func greedyBroker(t *testing.T, store Store, check bool, sites ...backends.Backend) *Broker {
	t.Helper()
	pl, err := coalloc.ByName("greedy-easy")
	if err != nil {
		t.Fatal(err)
	}
	var sc []SiteConfig
	for _, s := range sites {
		sc = append(sc, SiteConfig{Name: s.Name(), Backend: s, H: 1})
	}
	b, err := New(Options{Sites: sc, Planner: pl, Store: store, CheckFeasible: check})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func hasEvent(j *Job, kind, text string) bool {
	for _, e := range j.Events {
		if e.Kind == kind && strings.Contains(e.Msg, text) {
			return true
		}
	}
	return false
}

// A site whose batch system refuses the job for good is left out from
// then on, durably: the job runs at the other site, and a broker recovered
// from the store does not go back to the refusing site. When every allowed
// site refuses, the job fails naming each refusal; a retryable error
// refuses nothing.
func TestRefusedSiteFallsThrough(t *testing.T) {
	ctx := context.Background()
	a, bs := newFake("a", 4), newFake("b", 4)
	a.submitErr = fmt.Errorf("%w: sbatch: error: invalid partition specified: nosuch", backends.ErrRejected)
	st := NewMemStore()
	b := greedyBroker(t, st, false, a, bs)
	j, err := b.Submit(ctx, req(2), t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0)
	got, _ := b.Job(j.ID)
	if got.State != Queued || len(got.Refused) != 1 || got.Refused[0].Site != "a" || !hasEvent(got, "refused", "a refused the job") {
		t.Fatalf("after a's refusal: %+v", got)
	}
	// A broker recovered from the store keeps the refusal.
	b2 := greedyBroker(t, st, false, a, bs)
	if _, err := b2.Recover(ctx, t0); err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b2, t0.Add(time.Second))
	got, _ = b2.Job(j.ID)
	if got.State != Dispatched || got.Sites() != "b:2" || got.Attempts != 2 {
		t.Fatalf("after recovery: %s on %s, attempts %d; events %+v", got.State, got.Sites(), got.Attempts, got.Events)
	}

	// Every allowed site refuses: the job fails with both reasons.
	bs.submitErr = fmt.Errorf("%w: sbatch: error: Requested node configuration is not available", backends.ErrRejected)
	j2, _ := b2.Submit(ctx, req(1), t0.Add(2*time.Second))
	for k := range 3 {
		mustCycle(t, b2, t0.Add(time.Duration(3+k)*time.Second))
	}
	got, _ = b2.Job(j2.ID)
	if got.State != Failed || !strings.Contains(got.Reason, "every allowed site refused the job: a: ") ||
		!strings.Contains(got.Reason, "b: ") || !strings.Contains(got.Reason, "node configuration") {
		t.Fatalf("all refused: %s %q", got.State, got.Reason)
	}

	// A site that is only unreachable refuses nothing.
	c, d := newFake("c", 4), newFake("d", 4)
	c.submitErr = fmt.Errorf("%w: ssh: connection refused", backends.ErrUnavailable)
	b3 := greedyBroker(t, nil, false, c, d)
	j3, _ := b3.Submit(ctx, req(1), t0)
	mustCycle(t, b3, t0)
	got, _ = b3.Job(j3.ID)
	if got.State != Queued || len(got.Refused) != 0 || !hasEvent(got, "retry-later", "connection refused") {
		t.Fatalf("unavailable: %+v", got)
	}
}

// The planner never picks a site whose nodes lack the cores asked, the
// dry run says why, and Submit with CheckFeasible refuses a job no site
// can hold (ErrInfeasible, nothing stored).
func TestNodeShapeAndExplain(t *testing.T) {
	ctx := context.Background()
	a := shapedSite{newFake("a", 8), 2}
	bs := shapedSite{newFake("b", 4), 4}
	b := greedyBroker(t, nil, true, a, bs)
	r := req(1)
	r.CoresPerNode = 4
	e, err := b.Explain(ctx, r, t0)
	if err != nil {
		t.Fatal(err)
	}
	if e.Action != "start" || e.Chosen == nil || e.Chosen.Parts[0].Site != "b" || len(e.Excluded) != 1 ||
		e.Excluded[0].Site != "a" || !strings.Contains(e.Excluded[0].Why, "2 cores per node, the job asks 4") {
		t.Fatalf("explain: %+v", e)
	}
	if len(b.Jobs()) != 0 {
		t.Fatalf("the dry run stored a job")
	}
	j, err := b.Submit(ctx, r, t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0)
	if got, _ := b.Job(j.ID); got.Sites() != "b:1" || bs.specs["1"].CoresPerNode != 4 {
		t.Fatalf("placed on %s", got.Sites())
	}
	r.CoresPerNode = 8
	if _, err := b.Submit(ctx, r, t0); !errors.Is(err, ErrInfeasible) || !strings.Contains(err.Error(), "a: 2 cores per node, the job asks 8") {
		t.Fatalf("8 cores: %v", err)
	}
	// A queued job's explanation: b, the only site with the cores, has 3
	// nodes free and the fake reports no end for the job holding the
	// fourth, so the planner leaves it waiting and says why.
	r.CoresPerNode = 4
	r.Nodes = 4
	j2, _ := b.Submit(ctx, r, t0.Add(time.Second))
	e, err = b.ExplainJob(ctx, j2.ID, t0.Add(time.Second))
	if err != nil || e.Job != j2.ID || e.Action != "wait" || e.Chosen != nil || len(e.Reasons) == 0 || !strings.Contains(e.Reasons[0], "(b 3)") {
		t.Fatalf("explain queued: %+v, %v", e, err)
	}
	if _, err := b.ExplainJob(ctx, j.ID, t0.Add(time.Second)); !errors.Is(err, ErrBadRequest) {
		t.Errorf("explain of a dispatched job: %v", err)
	}
	if _, err := b.ExplainJob(ctx, "nosuch", t0); !errors.Is(err, ErrNotFound) {
		t.Errorf("explain of an unknown job: %v", err)
	}
}

// An advance reservation asking cores per node is admitted only over the
// sites whose nodes have them (what binding may choose).
func TestReservationShapeAllowed(t *testing.T) {
	ctx := context.Background()
	b := greedyBroker(t, nil, true, shapedSite{newFake("a", 8), 2}, shapedSite{newFake("b", 4), 4}, shapedSite{newFake("c", 4), 8})
	r := req(1)
	r.CoresPerNode = 4
	r.Window = &Window{Earliest: t0.Add(time.Hour), Latest: t0.Add(2 * time.Hour)}
	j, err := b.Submit(ctx, r, t0)
	if err != nil || j.State != Reserved {
		t.Fatalf("%+v %v", j, err)
	}
	b.mu.Lock()
	got := b.shapeAllowed(b.jobs[j.ID])
	b.mu.Unlock()
	if strings.Join(got, ",") != "b,c" {
		t.Fatalf("allowed %v, want b,c", got)
	}
	r.Sites = []string{"a", "c"}
	j2, _ := b.Submit(ctx, r, t0)
	b.mu.Lock()
	got = b.shapeAllowed(b.jobs[j2.ID])
	b.mu.Unlock()
	if strings.Join(got, ",") != "c" {
		t.Fatalf("allowed %v, want c", got)
	}
}
