package bridge

import (
	"context"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// TestRecoverWaitsForSubmissionInFlight: the broker dies while its submit
// command is still on its way; the restarted broker does not find the tag
// yet. Within Options.SubmitGrace the job stays in submitting and is
// looked up again each cycle, so when the late submission lands it is
// adopted — never submitted a second time. Past the grace a tag still
// missing means the submission never arrived: queued again.
func TestRecoverWaitsForSubmissionInFlight(t *testing.T) {
	const grace = time.Minute
	on := func(st Store, sites ...*fakeSite) *Broker {
		t.Helper()
		var sc []SiteConfig
		for _, s := range sites {
			sc = append(sc, SiteConfig{Name: s.name, Backend: s, H: 1})
		}
		b, err := New(Options{Sites: sc, Planner: scriptPlanner{firstFit}, Store: st, SubmitGrace: grace})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ctx := context.Background()

	// The late landing: adopted, one remote job in all.
	mem := NewMemStore()
	a := newFake("A", 4)
	a.submitErr = errInFlight // the crash: the call never returned
	b1 := on(&crashStore{MemStore: mem, n: 2}, a)
	j, err := b1.Submit(ctx, req(2), t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b1, t0)
	a.submitErr = nil
	b2 := on(mem, a)
	rep, err := b2.Recover(ctx, t0.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Queued != 0 || rep.NeverReached != 0 || rep.Unresolved != 1 {
		t.Fatalf("recover %+v: want the job held unresolved within the grace", rep)
	}
	if got, _ := b2.Job(j.ID); got.State != Submitting || !hasEvent(got, "reconcile-wait", "looking again until") {
		t.Fatalf("after recover: %s %v", got.State, got.Events)
	}
	mustCycle(t, b2, t0.Add(5*time.Second)) // still not there: still waiting
	if got, _ := b2.Job(j.ID); got.State != Submitting || len(a.jobs) != 0 {
		t.Fatalf("second look: %s, %d remote jobs", got.State, len(a.jobs))
	}
	// The submission sent before the crash lands now, under the intent's tag.
	a.mu.Lock()
	a.jobs["7"] = &backends.JobStatus{ID: "7", GridID: RemoteTag(j.ID, 1), State: backends.StatePending}
	a.mu.Unlock()
	mustCycle(t, b2, t0.Add(10*time.Second))
	got, _ := b2.Job(j.ID)
	if got.State != Dispatched || got.Attempts != 1 || got.Comps[0].RemoteID != "7" || len(a.jobs) != 1 {
		t.Fatalf("after the late landing: %s attempt %d %+v, %d remote jobs; want adopted, not resubmitted", got.State, got.Attempts, got.Comps, len(a.jobs))
	}

	// Never arrived: queued again once the grace is over, attempt 2.
	mem = NewMemStore()
	c := newFake("C", 4)
	c.submitErr = errInFlight
	b3 := on(&crashStore{MemStore: mem, n: 2}, c)
	k, _ := b3.Submit(ctx, req(2), t0)
	mustCycle(t, b3, t0)
	c.submitErr = nil
	b4 := on(mem, c)
	if _, err := b4.Recover(ctx, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b4, t0.Add(grace-time.Second))
	if got, _ := b4.Job(k.ID); got.State != Submitting {
		t.Fatalf("inside the grace: %s", got.State)
	}
	mustCycle(t, b4, t0.Add(grace+time.Second))
	mustCycle(t, b4, t0.Add(grace+2*time.Second))
	if got, _ := b4.Job(k.ID); got.State != Dispatched || got.Attempts != 2 || len(c.jobs) != 1 {
		t.Fatalf("after the grace: %s attempt %d, %d remote jobs; want queued again and dispatched once", got.State, got.Attempts, len(c.jobs))
	}
}

var errInFlight = &inFlightErr{}

type inFlightErr struct{}

func (*inFlightErr) Error() string { return "the process died before this call returned" }
