package bridge

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestTakeQueuesAnotherBrokersJobsOnce: jobs another broker stored (a
// follower's submissions) join the leader's queue once and run once; a
// job the leader has, or one no longer waiting, is left out.
func TestTakeQueuesAnotherBrokersJobsOnce(t *testing.T) {
	ctx := context.Background()
	mem := NewMemStore()
	a := newFake("A", 4)
	follower := brokerOn(t, mem, a)
	leader := brokerOn(t, mem, a)
	if _, err := leader.Recover(ctx, t0); err != nil {
		t.Fatal(err)
	}
	own, err := leader.Submit(ctx, req(1), t0)
	if err != nil {
		t.Fatal(err)
	}
	var fromFollower []*Job
	for range 2 {
		j, err := follower.Submit(ctx, req(1), t0)
		if err != nil {
			t.Fatal(err)
		}
		stored, _ := mem.Get(ctx, j.ID)
		fromFollower = append(fromFollower, stored)
	}
	ended, _ := mem.Get(ctx, own.ID)
	ended.ID, ended.State = "ended-elsewhere", Completed
	ownStored, _ := mem.Get(ctx, own.ID)
	took := leader.Take(ctx, append(slices.Clone(fromFollower), ownStored, ended), t0)
	if !slices.Equal(took, []string{fromFollower[0].ID, fromFollower[1].ID}) {
		t.Fatalf("Take = %v, want the follower's two jobs only", took)
	}
	if again := leader.Take(ctx, fromFollower, t0); len(again) != 0 {
		t.Fatalf("a second Take added %v again", again)
	}
	mustCycle(t, leader, t0.Add(time.Second))
	for _, id := range append(took, own.ID) {
		j, err := leader.Job(id)
		if err != nil || j.State == Queued {
			t.Fatalf("job %s after the leader's cycle: %+v %v", id, j, err)
		}
	}
	if n := len(a.jobs); n != 3 {
		t.Fatalf("%d remote jobs, want 3 (each job once)", n)
	}
}
