package bridge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
)

func deadlineBroker(t *testing.T, dec func(*policy.Snapshot, policy.Job) *policy.Decision) (*Broker, *fakeSite, *fakeSite) {
	t.Helper()
	a, bs := newFake("A", 1), newFake("B", 1)
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a, H: 2}, {Name: "B", Backend: bs, H: 0.5}}, Planner: scriptPlanner{dec}})
	if err != nil {
		t.Fatal(err)
	}
	return b, a, bs
}

func events(j *Job, kind string) []Event {
	var out []Event
	for _, e := range j.Events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// A deadline no site can meet even idle is refused at once (strict) with
// the fastest site and the predicted end; nothing is stored. Best-effort
// accepts it with a deadline-missed event.
func TestSubmitRefusesAnImpossibleDeadline(t *testing.T) {
	b, _, _ := deadlineBroker(t, firstFit)
	r := req(1)
	r.Estimate = 2 * time.Hour // 1 h on B (h 0.5), 4 h on A
	r.Deadline = t0.Add(50 * time.Minute)
	_, err := b.Submit(context.Background(), r, t0)
	if !errors.Is(err, ErrDeadline) || !errors.Is(err, ErrInfeasible) || errors.Is(err, ErrBadRequest) {
		t.Fatalf("Submit: %v, want ErrDeadline and ErrInfeasible (one error type: exit 1, HTTP 422), not ErrBadRequest", err)
	}
	for _, want := range []string{"deadline", "B:1 (h 0.5)", "10m0s late", "best-effort"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n := len(b.Jobs()); n != 0 {
		t.Fatalf("%d jobs stored after a refusal", n)
	}
	// Restricted to the slow site, a deadline the fast site could meet is refused too.
	r.Deadline = t0.Add(90 * time.Minute)
	if _, err := b.Submit(context.Background(), r, t0); err != nil {
		t.Fatalf("feasible on B: %v", err)
	}
	r.Sites = []string{"A"}
	if _, err := b.Submit(context.Background(), r, t0); !errors.Is(err, ErrDeadline) || !strings.Contains(err.Error(), "A:1 (h 2)") {
		t.Fatalf("only A allowed: %v", err)
	}
	r.DeadlinePolicy = DeadlineBestEffort
	j, err := b.Submit(context.Background(), r, t0)
	if err != nil {
		t.Fatalf("best-effort: %v", err)
	}
	if ev := events(j, EventDeadlineMissed); len(ev) != 1 || !strings.Contains(ev[0].Msg, "best-effort") || !j.DeadlineMissed {
		t.Fatalf("best-effort job events %+v", j.Events)
	}
}

// The deadline fields are checked: a policy name, a benefit function with
// a deadline and sane numbers.
func TestSubmitChecksDeadlineFields(t *testing.T) {
	b, _, _ := deadlineBroker(t, firstFit)
	r := req(1)
	r.DeadlinePolicy = "lenient"
	r.Worth = &policy.Worth{Shape: policy.Linear, A: -1, B: 1, C: 1}
	_, err := b.Submit(context.Background(), r, t0)
	var re RequestError
	if !errors.As(err, &re) || len(re) != 3 {
		t.Fatalf("Submit: %v, want 3 field errors", err)
	}
	for _, want := range []string{"DeadlinePolicy", `"lenient"`, "Worth: needs a deadline", "Worth.A"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// A queued job that can no longer meet its deadline is rejected (strict)
// before the planner sees it, or reported once and kept (best-effort); a
// dispatched job still pending at its site is reported once.
func TestDeadlineMissedWhileWaiting(t *testing.T) {
	hold := true
	b, _, _ := deadlineBroker(t, func(s *policy.Snapshot, j policy.Job) *policy.Decision {
		if hold {
			return nil // every site busy: nothing starts
		}
		return firstFit(s, j)
	})
	strict, best := req(1), req(1)
	strict.Estimate, strict.Deadline = time.Hour, t0.Add(time.Hour) // 30 min on B: 30 min of slack
	best.Estimate, best.Deadline, best.DeadlinePolicy = time.Hour, t0.Add(time.Hour), DeadlineBestEffort
	js, _ := b.Submit(context.Background(), strict, t0)
	jb, _ := b.Submit(context.Background(), best, t0)
	mustCycle(t, b, t0.Add(20*time.Minute))
	for _, id := range []string{js.ID, jb.ID} {
		if j, _ := b.Job(id); j.State != Queued || len(events(j, EventDeadlineMissed)) != 0 {
			t.Fatalf("%s at +20m: %s %+v", id, j.State, j.Events)
		}
	}
	rep := mustCycle(t, b, t0.Add(31*time.Minute))
	j, _ := b.Job(js.ID)
	if j.State != Rejected || !strings.Contains(j.Reason, "deadline missed while queued") || !strings.Contains(j.Reason, "1m0s late") || rep.Rejected != 1 {
		t.Fatalf("strict job at +31m: %s %q (rejected %d)", j.State, j.Reason, rep.Rejected)
	}
	j, _ = b.Job(jb.ID)
	if j.State != Queued || len(events(j, EventDeadlineMissed)) != 1 {
		t.Fatalf("best-effort job at +31m: %s %+v", j.State, j.Events)
	}
	hold = false
	mustCycle(t, b, t0.Add(32*time.Minute))
	j, _ = b.Job(jb.ID)
	if j.State != Dispatched || len(events(j, EventDeadlineMissed)) != 1 {
		t.Fatalf("best-effort job dispatched late: %s, %d deadline events", j.State, len(events(j, EventDeadlineMissed)))
	}
}

// A job dispatched to a site but still pending there when it can no
// longer meet its deadline is reported once (not withdrawn).
func TestDeadlineMissedWhilePendingAtASite(t *testing.T) {
	b, _, _ := deadlineBroker(t, firstFit)
	r := req(1)
	r.Estimate, r.Deadline, r.Sites = time.Hour, t0.Add(time.Hour), []string{"B"} // 30 min on B
	j, err := b.Submit(context.Background(), r, t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0)
	mustCycle(t, b, t0.Add(29*time.Minute))
	if j, _ = b.Job(j.ID); j.State != Dispatched || len(events(j, EventDeadlineMissed)) != 0 {
		t.Fatalf("at +29m: %s %+v", j.State, j.Events)
	}
	mustCycle(t, b, t0.Add(31*time.Minute))
	mustCycle(t, b, t0.Add(40*time.Minute))
	j, _ = b.Job(j.ID)
	ev := events(j, EventDeadlineMissed)
	if j.State != Dispatched || len(ev) != 1 || !strings.Contains(ev[0].Msg, "site's queue") {
		t.Fatalf("pending at B past its deadline: %s %+v", j.State, j.Events)
	}
}

// TestDeadlineRuleWithSitesNotKnown: one rule whatever the broker knows.
// With Options.CheckFeasible and no site answering (sizes not known, as a
// real site before its first answer) a strict job that cannot meet its
// deadline is refused as infeasible — not as a field error — with the
// answer Feasible gives from the same knowledge; a job too wide for the
// configured sites is not refused then (nothing is known of their size).
func TestDeadlineRuleWithSitesNotKnown(t *testing.T) {
	a := &flaky{fakeSite: newFake("A", 1)}
	a.down.Store(true)
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a, H: 2}}, Planner: scriptPlanner{firstFit}, CheckFeasible: true})
	if err != nil {
		t.Fatal(err)
	}
	r := req(1)
	r.Estimate, r.Deadline = time.Hour, t0.Add(90*time.Minute) // 2 h at A
	_, err = b.Submit(context.Background(), r, t0)
	_, want := Feasible(&r, &policy.Snapshot{Now: t0, Sites: []policy.Site{{Name: "A", H: 2}}})
	if !errors.Is(err, ErrInfeasible) || !errors.Is(err, ErrDeadline) || errors.Is(err, ErrBadRequest) || want == nil || err.Error() != want.Error() {
		t.Fatalf("Submit: %v\nFeasible: %v", err, want)
	}
	wide := req(50)
	if _, err := b.Submit(context.Background(), wide, t0); err != nil {
		t.Fatalf("size not known: %v", err)
	}
}

// An array (or a sweep, or a job with dependencies) with a strict deadline
// no site can meet is refused at submission exactly as a single job is
// (and as `gridsub validate` refuses it): ErrDeadline, nothing stored —
// not accepted and then every element rejected in the cycles.
func TestSubmitRefusesAnArrayWithAnImpossibleDeadline(t *testing.T) {
	b, _, _ := deadlineBroker(t, firstFit)
	r := req(1)
	r.Estimate = 2 * time.Hour // 1 h on B (h 0.5), 4 h on A
	r.Deadline = t0.Add(50 * time.Minute)
	r.Array = "1-4"
	_, single := b.Submit(context.Background(), func() Request { s := r; s.Array = ""; return s }(), t0)
	_, err := b.Submit(context.Background(), r, t0)
	if !errors.Is(err, ErrDeadline) || !errors.Is(err, ErrInfeasible) || errors.Is(err, ErrBadRequest) {
		t.Fatalf("Submit of an array: %v, want ErrDeadline and ErrInfeasible", err)
	}
	if single == nil || err.Error() != single.Error() {
		t.Fatalf("array refused with %q, a single job with %q: want one rule, one answer", err, single)
	}
	r.Array, r.Sweep = "", &Sweep{Params: []SweepParam{{"X", []string{"1", "2"}}}}
	if _, err := b.Submit(context.Background(), r, t0); !errors.Is(err, ErrDeadline) {
		t.Fatalf("Submit of a sweep: %v, want ErrDeadline", err)
	}
	if n := len(b.Jobs()); n != 0 {
		t.Fatalf("%d jobs stored after refusals", n)
	}
	// A deadline that can be met is accepted.
	r.Sweep, r.Array = nil, "1-4"
	r.Deadline = t0.Add(90 * time.Minute)
	if _, err := b.Submit(context.Background(), r, t0); err != nil {
		t.Fatalf("a feasible array: %v", err)
	}
}
