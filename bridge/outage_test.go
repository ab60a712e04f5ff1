package bridge

import (
	"context"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// TestUnreachableIsUnknownNotLost: a site whose scheduler stops answering
// for longer than DownAfter has not lost its jobs (SLURM keeps them running
// while only slurmctld is down). A job without copies there is unknown, is
// not rerun elsewhere, and is reconciled by the first poll the site answers;
// only a job the site then confirms gone is retried.
func TestUnreachableIsUnknownNotLost(t *testing.T) {
	ctx := context.Background()
	a, c := &flaky{fakeSite: newFake("A", 4)}, newFake("B", 4)
	b := tierBroker(t, nil, a, c)
	r := qreq("none")
	r.Sites = nil
	j, err := b.Submit(ctx, r, t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0)
	if n, _ := a.running(); n != 1 {
		t.Fatalf("A runs %d jobs, want the job there", n)
	}
	a.set(j.ID, backends.StateRunning, 0)
	mustCycle(t, b, t0.Add(time.Second))

	a.down.Store(true)
	for s := 2; s <= 60; s += 2 { // far beyond DownAfter (10s)
		mustCycle(t, b, t0.Add(time.Duration(s)*time.Second))
	}
	got, _ := b.Job(j.ID)
	if got.State != Running || got.Comps[0].State != backends.StateUnknown || !hasEvent(got, "unknown", "not rerun") {
		t.Fatalf("job %s, component %s (%s), events %s: want running with the component unknown", got.State, got.Comps[0].State, got.Comps[0].Reason, kinds(got))
	}
	if n, tags := c.running(); n != 0 {
		t.Fatalf("the job was rerun at B while A did not answer: %v", tags)
	}

	// The site answers: the job still runs there, reconciled by one poll.
	a.down.Store(false)
	mustCycle(t, b, t0.Add(62*time.Second))
	got, _ = b.Job(j.ID)
	if got.State != Running || got.Comps[0].State != backends.StateRunning || got.Attempts != 1 {
		t.Fatalf("after the outage: job %s (attempts %d), component %s", got.State, got.Attempts, got.Comps[0].State)
	}
	if n, _ := c.running(); n != 0 {
		t.Fatal("the job runs twice")
	}
	a.set(j.ID, backends.StateCompleted, 0)
	mustCycle(t, b, t0.Add(64*time.Second))
	mustCycle(t, b, t0.Add(65*time.Second))
	if got, _ = b.Job(j.ID); got.State != Completed || got.Attempts != 1 {
		t.Fatalf("job %s after %d attempts, want completed after 1", got.State, got.Attempts)
	}
}
