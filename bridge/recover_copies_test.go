package bridge

import (
	"context"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// graceTierBroker is tierBroker with Options.SubmitGrace set.
func graceTierBroker(t *testing.T, store Store, grace time.Duration, sites ...backends.Backend) *Broker {
	t.Helper()
	var sc []SiteConfig
	for i, s := range sites {
		sc = append(sc, SiteConfig{Name: string(rune('A' + i)), Backend: s, H: 1})
	}
	b, err := New(Options{Sites: sc, Planner: scriptPlanner{fitAllowed}, Store: store, SubmitGrace: grace,
		Tiers: &TierOptions{DownAfter: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRecoverCopyWaitsForSubmissionInFlight is
// TestRecoverWaitsForSubmissionInFlight for a copy of a QoS-tiered job:
// the broker dies while copy 1's submit command is on its way to B. The
// restarted broker adopts copy 0 and does not find copy 1's tag yet;
// within Options.SubmitGrace the job stays submitting and copy 1 is not
// submitted again, so when the late submission lands it is adopted: one
// remote job at B. Past the grace a copy still missing is submitted again,
// once.
func TestRecoverCopyWaitsForSubmissionInFlight(t *testing.T) {
	const grace = time.Minute
	ctx := context.Background()
	crash := func() (a, c *fakeSite, mem *MemStore, id string) {
		a, c = newFake("A", 4), newFake("B", 4)
		mem = NewMemStore()
		b := graceTierBroker(t, &crashStore{MemStore: mem, n: 2}, grace, a, c) // the submission and the intent
		j, err := b.Submit(ctx, qreq("high"), t0)
		if err != nil {
			t.Fatal(err)
		}
		c.submitErr = errInFlight // the crash: B's submit call never returned
		mustCycle(t, b, t0)
		c.submitErr = nil
		if got, _ := mem.Get(ctx, j.ID); got.State != Submitting || got.Intent.IsZero() {
			t.Fatalf("stored %s, intent %v: want the copies' intent with its time", got.State, got.Intent)
		}
		return a, c, mem, j.ID
	}

	a, c, mem, id := crash()
	b := graceTierBroker(t, mem, grace, a, c)
	rep, err := b.Recover(ctx, t0.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Adopted != 1 || rep.NeverReached != 0 || rep.Unresolved != 1 {
		t.Fatalf("recover %+v: want copy 0 adopted and copy 1 waited for", rep)
	}
	if got, _ := b.Job(id); got.State != Submitting || !hasEvent(got, "reconcile-wait", "looking again until") {
		t.Fatalf("after recover: %s %s", got.State, kinds(got))
	}
	mustCycle(t, b, t0.Add(5*time.Second))
	if got, _ := b.Job(id); got.State != Submitting || len(c.jobs) != 0 {
		t.Fatalf("inside the grace: %s, %d remote jobs at B; want copy 1 not submitted again", got.State, len(c.jobs))
	}
	// The submission sent before the crash lands now, under copy 1's tag.
	c.mu.Lock()
	c.jobs["9"] = &backends.JobStatus{ID: "9", GridID: CopyTag(id, 1, 1), State: backends.StatePending}
	c.specs["9"] = &backends.JobSpec{GridID: CopyTag(id, 1, 1), Nodes: 1}
	c.mu.Unlock()
	mustCycle(t, b, t0.Add(10*time.Second))
	mustCycle(t, b, t0.Add(11*time.Second))
	got, _ := b.Job(id)
	if got.State != Dispatched || got.Attempts != 1 || len(a.jobs) != 1 || len(c.jobs) != 1 {
		t.Fatalf("after the late landing: %s attempt %d, %d jobs at A, %d at B; want copy 1 adopted, not resubmitted (%s)",
			got.State, got.Attempts, len(a.jobs), len(c.jobs), kinds(got))
	}
	if k := slicesIndexComp(got.Comps, "B"); k < 0 || got.Comps[k].RemoteID != "9" {
		t.Fatalf("copy 1 not adopted: %+v", got.Comps)
	}

	// Never arrived: past the grace copy 1 is submitted again, once.
	a, c, mem, id = crash()
	b = graceTierBroker(t, mem, grace, a, c)
	if _, err := b.Recover(ctx, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0.Add(grace-time.Second))
	if got, _ := b.Job(id); got.State != Submitting || len(c.jobs) != 0 {
		t.Fatalf("inside the grace: %s, %d jobs at B", got.State, len(c.jobs))
	}
	mustCycle(t, b, t0.Add(grace+time.Second))
	mustCycle(t, b, t0.Add(grace+2*time.Second))
	if got, _ := b.Job(id); got.State != Dispatched || len(c.jobs) != 1 || len(a.jobs) != 1 {
		t.Fatalf("after the grace: %s, %d jobs at A, %d at B; want copy 1 submitted again once (%s)", got.State, len(a.jobs), len(c.jobs), kinds(got))
	}
}

func slicesIndexComp(cs []Component, site string) int {
	for k, c := range cs {
		if c.Site == site {
			return k
		}
	}
	return -1
}
