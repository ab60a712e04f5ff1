package bridge

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// land puts a remote job under tag at site f, as a submission sent before
// a crash that reaches the site only now.
func land(f *fakeSite, id backends.JobID, tag string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs[id] = &backends.JobStatus{ID: id, GridID: tag, State: backends.StatePending}
	f.specs[id] = &backends.JobSpec{GridID: tag, Nodes: 1}
}

// storedDuties reads the duty record from the store.
func storedDuties(t *testing.T, mem *MemStore) dutyRecord {
	t.Helper()
	var r dutyRecord
	raw, ok, err := mem.Value(context.Background(), DutiesKey)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// TestLateSubmissionAfterGraceCancelled: after a restart, attempt 1's tag
// is not found within Options.SubmitGrace, so the job is queued again and
// runs as attempt 2. The submission of attempt 1 sent before the crash
// lands only now: it is found under its abandoned tag and cancelled, with
// a late-submission event — also by a broker restarted once more in
// between (the watch is durable) — and only attempt 2 runs. Once the job
// has ended and the margin passed, the tag is no longer watched.
func TestLateSubmissionAfterGraceCancelled(t *testing.T) {
	const grace = time.Minute
	ctx := context.Background()
	on := func(st Store, s *fakeSite) *Broker {
		t.Helper()
		b, err := New(Options{Sites: []SiteConfig{{Name: s.name, Backend: s, H: 1}}, Planner: scriptPlanner{firstFit}, Store: st, SubmitGrace: grace})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, restartAgain := range []bool{false, true} {
		mem := NewMemStore()
		c := newFake("C", 4)
		c.submitErr = errInFlight
		b := on(&crashStore{MemStore: mem, n: 2}, c)
		k, _ := b.Submit(ctx, req(2), t0)
		mustCycle(t, b, t0)
		c.submitErr = nil
		b = on(mem, c)
		if _, err := b.Recover(ctx, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		mustCycle(t, b, t0.Add(grace+time.Second))
		mustCycle(t, b, t0.Add(grace+2*time.Second))
		got, _ := b.Job(k.ID)
		if got.State != Dispatched || got.Attempts != 2 || len(c.jobs) != 1 {
			t.Fatalf("after the grace: %s attempt %d, %d remote jobs", got.State, got.Attempts, len(c.jobs))
		}
		if want := RemoteTag(k.ID, 1) + "@C"; len(got.Abandoned) != 1 || got.Abandoned[0] != want || !hasEvent(got, "abandoned", "not found at C after the grace") {
			t.Fatalf("abandoned %v, want [%s]; events %s", got.Abandoned, want, kinds(got))
		}
		if r := storedDuties(t, mem); len(r.Watches) != 1 || r.Watches[0].Tag != RemoteTag(k.ID, 1) {
			t.Fatalf("stored duties %+v: want attempt 1's tag watched", r)
		}
		now := t0.Add(grace + 20*time.Second)
		if restartAgain {
			b = on(mem, c)
			if _, err := b.Recover(ctx, now); err != nil {
				t.Fatal(err)
			}
		}
		// Attempt 1's submission lands now, after the requeue.
		land(c, "99", RemoteTag(k.ID, 1))
		mustCycle(t, b, now)
		mustCycle(t, b, now.Add(20*time.Second))
		n, tags := c.running()
		got, _ = b.Job(k.ID)
		if n != 1 || tags[0] != RemoteTag(k.ID, 2) || c.jobs["99"].State != backends.StateCancelled {
			t.Fatalf("restart again %v: C runs %v; the late attempt 1 is %s; want it cancelled and attempt 2 alone (%s)", restartAgain, tags, c.jobs["99"].State, kinds(got))
		}
		if !hasEvent(got, EventLateSubmission, "late submission of attempt 1 found at C after the grace: cancelled") ||
			!hasEvent(got, "cancelled-remote", "late submission of attempt 1") {
			t.Fatalf("restart again %v: events %v", restartAgain, got.Events)
		}
		// Bounded: the job ends; the tag is watched for the margin more, then dropped.
		c.set(k.ID, backends.StateCompleted, 0)
		mustCycle(t, b, now.Add(time.Minute))
		if got, _ := b.Job(k.ID); got.State != Completed {
			t.Fatalf("job %s", got.State)
		}
		mustCycle(t, b, now.Add(2*time.Minute))
		if r := storedDuties(t, mem); len(r.Watches) != 1 {
			t.Fatalf("within the margin after the end: %+v", r)
		}
		mustCycle(t, b, now.Add(4*time.Minute))
		if r := storedDuties(t, mem); len(r.Watches) != 0 || len(r.Cancels) != 0 {
			t.Fatalf("past the margin: still owed %+v", r)
		}
	}
}

// TestLateCopyAfterGraceCancelled: a copy not found within the grace is
// submitted again under its own tag; the submission sent before the crash
// lands afterwards under the same tag and is cancelled, the copy the
// broker owns is kept.
func TestLateCopyAfterGraceCancelled(t *testing.T) {
	const grace = time.Minute
	ctx := context.Background()
	a, c := newFake("A", 4), newFake("B", 4)
	mem := NewMemStore()
	b := graceTierBroker(t, &crashStore{MemStore: mem, n: 2}, grace, a, c)
	j, _ := b.Submit(ctx, qreq("high"), t0)
	c.submitErr = errInFlight
	mustCycle(t, b, t0)
	c.submitErr = nil
	b = graceTierBroker(t, mem, grace, a, c)
	if _, err := b.Recover(ctx, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0.Add(grace+time.Second))
	mustCycle(t, b, t0.Add(grace+2*time.Second))
	tag := CopyTag(j.ID, 1, 1)
	if _, ts := c.running(); len(ts) != 1 || ts[0] != tag {
		t.Fatalf("B runs %v, want copy 1 submitted again", ts)
	}
	land(c, "99", tag)
	mustCycle(t, b, t0.Add(grace+20*time.Second))
	got, _ := b.Job(j.ID)
	if n, _ := c.running(); n != 1 || c.jobs["99"].State != backends.StateCancelled || !hasEvent(got, EventLateSubmission, "found at B after the grace: cancelled") {
		t.Fatalf("B runs %d; late copy %s; events %s", n, c.jobs["99"].State, kinds(got))
	}
	if k := slicesIndexComp(got.Comps, "B"); k < 0 || got.Comps[k].RemoteID == "99" || got.Comps[k].State.Final() {
		t.Fatalf("the owned copy at B: %+v", got.Comps)
	}
}

// TestPendingCancelSurvivesRestart: a high job's copy 1 wins while site A,
// which runs copy 0, does not answer; the loser's cancel cannot reach A and
// the job ends once A counts as down. The broker restarts while A is still
// down: the pending cancel is in the store, so once A answers again the
// restarted broker cancels the loser — it does not run on.
func TestPendingCancelSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	a, c := &flaky{fakeSite: newFake("A", 4)}, newFake("B", 4)
	mem := NewMemStore()
	b := tierBroker(t, mem, a, c)
	j, _ := b.Submit(ctx, qreq("high"), t0)
	mustCycle(t, b, t0)
	if n, _ := a.running(); n != 1 {
		t.Fatalf("A runs %d copies", n)
	}
	a.down.Store(true)
	c.setTag(CopyTag(j.ID, 1, 1), backends.StateCompleted, 0)
	mustCycle(t, b, t0.Add(time.Second))
	mustCycle(t, b, t0.Add(12*time.Second)) // A down for DownAfter: its copy counts as lost
	mustCycle(t, b, t0.Add(13*time.Second))
	got, _ := b.Job(j.ID)
	if got.State != Completed || !hasEvent(got, "cancel-failed", "test site down") {
		t.Fatalf("job %s: %s", got.State, kinds(got))
	}
	if r := storedDuties(t, mem); len(r.Cancels) != 1 || r.Cancels[0].Site != "A" {
		t.Fatalf("stored duties %+v: want the cancel at A", r)
	}
	// The restart, A still down; then A answers again.
	b = tierBroker(t, mem, a, c)
	if _, err := b.Recover(ctx, t0.Add(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0.Add(21*time.Second))
	if n, _ := a.running(); n != 1 {
		t.Fatalf("A down: its copy cannot have been cancelled, yet %d run", n)
	}
	a.down.Store(false)
	mustCycle(t, b, t0.Add(40*time.Second))
	if n, tags := a.running(); n != 0 {
		t.Fatalf("A back: it still runs %v; want the loser cancelled by the restarted broker", tags)
	}
	if r := storedDuties(t, mem); len(r.Cancels) != 0 {
		t.Fatalf("cancel done, still owed: %+v", r)
	}
}
