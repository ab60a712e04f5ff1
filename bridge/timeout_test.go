package bridge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// A component killed at its walltime ends the job as Timeout at once, even
// in the none tier that retries failures: the same limit would kill it
// again, and nobody asked for the retry. It is not the site's fault.
func TestWalltimeKillIsTimeoutNotRetried(t *testing.T) {
	a, c := newFake("A", 4), newFake("B", 4)
	b := tierBroker(t, nil, a, c)
	j, _ := b.Submit(context.Background(), qreq("none"), t0)
	mustCycle(t, b, t0)
	a.mu.Lock()
	for _, st := range a.jobs {
		st.State, st.ExitCode, st.Reason = backends.StateTimeout, -1, "killed at its walltime of 1m0s"
	}
	a.mu.Unlock()
	mustCycle(t, b, t0.Add(time.Second))
	got, _ := b.Job(j.ID)
	if got.State != Timeout || got.Attempts != 1 || strings.Contains(kinds(got), "retry") {
		t.Fatalf("%s after %d attempts: %s", got.State, got.Attempts, kinds(got))
	}
	if got.Reason != "killed at its walltime of 1m0s at A" || got.SiteFault {
		t.Fatalf("reason %q, site fault %v", got.Reason, got.SiteFault)
	}
	if !strings.Contains(kinds(got), "timeout") {
		t.Fatalf("no timeout event: %s", kinds(got))
	}
}

// SiteFault is set only for a failure that is the site's: a component that
// failed without an exit code of its own (a node failure, a launch that
// never ran), not one whose command exited non-zero.
func TestSiteFaultOnlyForSiteFailures(t *testing.T) {
	for _, tc := range []struct {
		exit  int
		fault bool
	}{{3, false}, {-1, true}} {
		a := newFake("A", 4)
		b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a, H: 1}}, Planner: scriptPlanner{firstFit}})
		if err != nil {
			t.Fatal(err)
		}
		j, _ := b.Submit(context.Background(), req(1), t0)
		mustCycle(t, b, t0)
		a.set(j.ID, backends.StateFailed, tc.exit)
		mustCycle(t, b, t0.Add(time.Second))
		got, _ := b.Job(j.ID)
		if got.State != Failed || got.SiteFault != tc.fault {
			t.Errorf("exit %d: %s, site fault %v; want failed, %v", tc.exit, got.State, got.SiteFault, tc.fault)
		}
	}
}

// A dependency may be given as a unique prefix or suffix of a job's id, as
// every command takes one: the stored job names the dependency in full. An
// ambiguous one is refused with the candidates.
func TestDependencyByShortID(t *testing.T) {
	a := newFake("A", 4)
	b := newTestBroker(t, firstFit, a)
	ctx := context.Background()
	first, _ := b.Submit(ctx, req(1), t0)
	other, _ := b.Submit(ctx, req(1), t0)
	short := first.ID[len(first.ID)-2:] // "01": the suffix of the first job's id only
	if strings.HasSuffix(other.ID, short) {
		t.Fatalf("ids %s and %s share the suffix %s", first.ID, other.ID, short)
	}
	r := req(1)
	r.AfterOK = []string{short}
	given := r.AfterOK
	second, err := b.Submit(ctx, r, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJob(t, b, second.ID); len(got.Req.AfterOK) != 1 || got.Req.AfterOK[0] != first.ID {
		t.Fatalf("stored dependency %v, want %s", got.Req.AfterOK, first.ID)
	}
	if given[0] != short {
		t.Errorf("the caller's request was changed: %v", given)
	}
	prefix := first.ID[:len(first.ID)-3] // a prefix of both ids
	r.AfterOK = []string{prefix}
	_, err = b.Submit(ctx, r, t0)
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "is ambiguous: matches") || !strings.Contains(err.Error(), first.ID) {
		t.Fatalf("ambiguous dependency: %v", err)
	}
}

// Hold keeps a waiting job out of the queue until Release; Requeue stops a
// running job's attempt at its site and places the job again.
func TestHoldReleaseRequeue(t *testing.T) {
	a := newFake("A", 1)
	b := newTestBroker(t, firstFit, a)
	ctx := context.Background()
	first, _ := b.Submit(ctx, req(1), t0)
	second, _ := b.Submit(ctx, req(1), t0)
	if err := b.Hold(ctx, second.ID, t0); err != nil {
		t.Fatal(err)
	}
	if err := b.Hold(ctx, "nope", t0); !errors.Is(err, ErrNotFound) {
		t.Errorf("hold of an unknown job: %v", err)
	}
	mustCycle(t, b, t0.Add(time.Second))
	if err := b.Hold(ctx, first.ID, t0); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "requeue it first") {
		t.Errorf("hold of a dispatched job: %v", err)
	}
	a.runAll(backends.StateCompleted, 0)
	mustCycle(t, b, t0.Add(2*time.Second))
	mustCycle(t, b, t0.Add(3*time.Second))
	if s := mustJob(t, b, second.ID); s.State != Held || !s.UserHold || s.Waiting != UserHoldWaiting {
		t.Fatalf("held job %s (%q) with the site free", s.State, s.Waiting)
	}
	if err := b.Release(ctx, first.ID, t0); !errors.Is(err, ErrFinal) {
		t.Errorf("release of an ended job: %v", err)
	}
	if err := b.Release(ctx, second.ID, t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0.Add(4*time.Second))
	s := mustJob(t, b, second.ID)
	if s.State != Dispatched || s.UserHold {
		t.Fatalf("released job %s", s.State)
	}
	if err := b.Requeue(ctx, second.ID, t0.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if s := mustJob(t, b, second.ID); s.State != Queued || !strings.Contains(kinds(s), "requeued") {
		t.Fatalf("requeued job %s: %s", s.State, kinds(s))
	}
	if len(a.cancels) != 1 {
		t.Fatalf("cancels sent: %v", a.cancels)
	}
	mustCycle(t, b, t0.Add(6*time.Second))
	if s := mustJob(t, b, second.ID); s.State != Dispatched || s.Attempts != 2 {
		t.Fatalf("after the requeue: %s, attempt %d", s.State, s.Attempts)
	}
	if err := b.Requeue(ctx, first.ID, t0); !errors.Is(err, ErrFinal) {
		t.Errorf("requeue of an ended job: %v", err)
	}
}
