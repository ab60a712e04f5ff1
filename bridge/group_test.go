package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// runAll moves every unfinished job at the fake site to state s (exit code
// exit), and returns how many it moved.
func (f *fakeSite) runAll(s backends.State, exit int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, st := range f.jobs {
		if !st.State.Final() {
			st.State, st.ExitCode = s, exit
			n++
		}
	}
	return n
}

func (f *fakeSite) unfinished() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, st := range f.jobs {
		if !st.State.Final() {
			n++
		}
	}
	return n
}

// env returns the environment of the remote job carrying a grid id.
func (f *fakeSite) envOf(gid string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, st := range f.jobs {
		if strings.HasPrefix(st.GridID, gid+"-a") {
			return f.specs[id].Env
		}
	}
	return nil
}

// allowedFit is firstFit over the job's allowed sites.
func allowedFit(s *policy.Snapshot, j policy.Job) *policy.Decision {
	for i, st := range s.Sites {
		if st.Free >= j.Width && (len(j.Allowed) == 0 || slices.Contains(j.Allowed, i)) {
			return &policy.Decision{Job: j.ID, Action: policy.Start, Chosen: policy.Option{Parts: []policy.Part{{Site: i, Nodes: j.Width}}}}
		}
	}
	return nil
}

func mustJob(t *testing.T, b *Broker, id string) *Job {
	t.Helper()
	j, err := b.Job(id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestArrayRespectsLimitAndCompletes(t *testing.T) {
	a := newFake("A", 100)
	b := newTestBroker(t, firstFit, a)
	r := req(1)
	r.Array = "1-25%4"
	p, err := b.Submit(context.Background(), r, t0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Group == nil || p.Group.Total != 25 || p.Group.Limit != 4 || p.State != Running {
		t.Fatalf("parent %+v group %+v", p.State, p.Group)
	}
	now := t0
	for i := 0; i < 40 && mustJob(t, b, p.ID).State == Running; i++ {
		now = now.Add(time.Second)
		mustCycle(t, b, now)
		if n := a.unfinished(); n > 4 {
			t.Fatalf("cycle %d: %d elements at the site at once, limit 4", i, n)
		}
		a.runAll(backends.StateCompleted, 0)
	}
	p = mustJob(t, b, p.ID)
	if p.State != Completed || p.Group.Made != 25 || p.Group.Counts[Completed] != 25 {
		t.Fatalf("parent %s %q %+v", p.State, p.Reason, p.Group)
	}
	e := mustJob(t, b, ElementID(p.ID, 17))
	if e.Parent != p.ID || e.Index != 17 || e.State != Completed {
		t.Fatalf("element %+v", e)
	}
	if env := a.envOf(e.ID); env["GRIDSUB_ARRAY_INDEX"] != "17" || env["GRIDSUB_ARRAY_JOB_ID"] != p.ID {
		t.Fatalf("element env %v", env)
	}
	if els, _ := b.store.List(context.Background(), Filter{Parent: p.ID}); len(els) != 25 {
		t.Fatalf("%d elements stored", len(els))
	}
}

func TestSweepEnvAndFailureCounts(t *testing.T) {
	a := newFake("A", 100)
	b := newTestBroker(t, firstFit, a)
	r := req(1)
	r.Sweep = &Sweep{Params: []SweepParam{{"LR", []string{"0.1", "0.01"}}, {"DEPTH", []string{"2", "4", "8"}}}}
	p, err := b.Submit(context.Background(), r, t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0.Add(time.Second))
	// Element 4 = LR[1], DEPTH[1] (the last parameter varies fastest).
	if env := a.envOf(ElementID(p.ID, 4)); env["LR"] != "0.01" || env["DEPTH"] != "4" || env["GRIDSUB_ARRAY_INDEX"] != "4" {
		t.Fatalf("element 4 env %v", env)
	}
	a.set(ElementID(p.ID, 2), backends.StateFailed, 3)
	a.runAll(backends.StateCompleted, 0)
	mustCycle(t, b, t0.Add(2*time.Second))
	mustCycle(t, b, t0.Add(3*time.Second))
	p = mustJob(t, b, p.ID)
	if p.State != Failed || !strings.Contains(p.Reason, "1 of 6 elements did not complete") || !strings.Contains(p.Reason, ElementID(p.ID, 2)) {
		t.Fatalf("parent %s: %s", p.State, p.Reason)
	}
}

func TestGroupRequestsRefused(t *testing.T) {
	b := newTestBroker(t, firstFit, newFake("A", 4))
	for _, c := range []struct {
		mod  func(r *Request)
		want string
	}{
		{func(r *Request) { r.Array = "1-20000" }, "more than 10000"},
		{func(r *Request) { r.Array = "5-1" }, "backwards"},
		{func(r *Request) { r.Array = "1-10%0" }, "limit"},
		{func(r *Request) { r.Array = "1,1" }, "twice"},
		{func(r *Request) { r.Array = "1-3"; r.Sweep = &Sweep{Params: []SweepParam{{"X", []string{"1"}}}} }, "not several"},
		{func(r *Request) { r.Sweep = &Sweep{Params: []SweepParam{{"GRIDSUB_X", []string{"1"}}}} }, "reserved"},
		{func(r *Request) {
			r.Sweep = &Sweep{Params: []SweepParam{{"A", make([]string, 200)}, {"B", make([]string, 200)}}}
			for i := range 200 {
				r.Sweep.Params[0].Values[i], r.Sweep.Params[1].Values[i] = fmt.Sprint(i), fmt.Sprint(i)
			}
		}, "more than 10000"},
		{func(r *Request) { r.AfterOK = []string{"g999999"} }, `no job "g999999"`},
		{func(r *Request) {
			*r = Request{Name: "p", Steps: []Request{req(1), req(1)}}
			r.Steps[0].Name, r.Steps[1].Name = "x", "x"
		}, "unique"},
		{func(r *Request) { r.Steps = []Request{req(1)}; r.Steps[0].Name = "x" }, "a pipeline's own fields"},
		{func(r *Request) {
			*r = Request{Name: "p", Steps: []Request{req(1), req(1)}}
			r.Steps[0].Name, r.Steps[1].Name = "a", "b"
			r.Steps[0].AfterOK = []string{"b"}
		}, "comes later"},
	} {
		r := req(1)
		c.mod(&r)
		_, err := b.Submit(context.Background(), r, t0)
		if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want ErrBadRequest containing %q", r, err, c.want)
		}
	}
	if js := b.Jobs(); len(js) != 0 {
		t.Fatalf("refused requests left %d jobs", len(js))
	}
}

func TestDependencyHeldAcrossSitesAndFailureCancels(t *testing.T) {
	a, c := newFake("A", 1), newFake("C", 1)
	b := newTestBroker(t, firstFit, a, c)
	ctx := context.Background()
	first, _ := b.Submit(ctx, req(1), t0)
	r := req(1)
	r.AfterOK = []string{first.ID}
	second, err := b.Submit(ctx, r, t0)
	if err != nil {
		t.Fatal(err)
	}
	r.AfterOK = []string{second.ID}
	third, err := b.Submit(ctx, r, t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0.Add(time.Second))
	if s := mustJob(t, b, second.ID); s.State != Held || !strings.Contains(s.Waiting, first.ID) {
		t.Fatalf("second %s waiting %q", s.State, s.Waiting)
	}
	a.runAll(backends.StateCompleted, 0)
	mustCycle(t, b, t0.Add(2*time.Second))
	if s := mustJob(t, b, second.ID); s.State != Dispatched {
		t.Fatalf("second %s after its dependency completed", s.State)
	}
	a.runAll(backends.StateFailed, 2)
	mustCycle(t, b, t0.Add(3*time.Second))
	mustCycle(t, b, t0.Add(4*time.Second))
	th := mustJob(t, b, third.ID)
	if th.State != Cancelled || !strings.Contains(th.Reason, second.ID) || !strings.Contains(th.Reason, "afterok") {
		t.Fatalf("third %s: %s", th.State, th.Reason)
	}
	// A dependency that can never be met is refused at submission.
	r.AfterOK = []string{second.ID}
	if _, err := b.Submit(ctx, r, t0.Add(5*time.Second)); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "could never run") {
		t.Fatalf("afterok on a failed job: %v", err)
	}
}

func TestPipelineStepsInOrderAndCancel(t *testing.T) {
	a, c := newFake("A", 1), newFake("C", 1)
	b := newTestBroker(t, allowedFit, a, c)
	ctx := context.Background()
	steps := []Request{req(1), req(1), req(1)}
	steps[0].Name, steps[1].Name, steps[2].Name = "prep", "run", "post"
	steps[1].AfterOK, steps[2].AfterOK = []string{"prep"}, []string{"run"}
	steps[1].Sites = []string{"C"}
	p, err := b.Submit(ctx, Request{Name: "pipe", Steps: steps}, t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0.Add(time.Second))
	if s := mustJob(t, b, ElementID(p.ID, 2)); s.State != Held || s.Req.AfterOK[0] != ElementID(p.ID, 1) {
		t.Fatalf("step 2 %s deps %v", s.State, s.Req.AfterOK)
	}
	a.runAll(backends.StateCompleted, 0)
	mustCycle(t, b, t0.Add(2*time.Second))
	if s := mustJob(t, b, ElementID(p.ID, 2)); s.State != Dispatched || s.Comps[0].Site != "C" {
		t.Fatalf("step 2 %s %v", s.State, s.Comps)
	}
	if err := b.Cancel(ctx, p.ID, t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if c.unfinished() != 0 {
		t.Fatal("cancelling the pipeline left step 2 at its site")
	}
	for k := 2; k <= 3; k++ {
		if s := mustJob(t, b, ElementID(p.ID, k)); s.State != Cancelled {
			t.Fatalf("step %d %s after cancel", k, s.State)
		}
	}
	mustCycle(t, b, t0.Add(4*time.Second))
	if !b.Idle() {
		t.Fatal("broker not idle after the pipeline was cancelled")
	}
}

// TestGroupRecoverMakesEachElementOnce: a broker that crashes at every
// store write in turn while an array runs; a new broker recovers from
// what was stored, and in the end every element exists once and ran once.
func TestGroupRecoverMakesEachElementOnce(t *testing.T) {
	for crashAt := 1; crashAt < 30; crashAt += 3 {
		mem := NewMemStore()
		a := newFake("A", 100)
		b1 := brokerOn(t, &crashStore{MemStore: mem, n: crashAt}, a)
		r := req(1)
		r.Array = "0-9%3"
		p, err := b1.Submit(context.Background(), r, t0)
		if err != nil {
			continue // crashed before the submission was stored
		}
		now := t0
		for range 5 {
			now = now.Add(time.Second)
			_, _ = b1.Cycle(context.Background(), now)
			a.runAll(backends.StateCompleted, 0)
		}
		b2 := brokerOn(t, mem, a)
		if _, err := b2.Recover(context.Background(), now); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 40 && mustJob(t, b2, p.ID).State == Running; i++ {
			now = now.Add(time.Second)
			mustCycle(t, b2, now)
			if n := a.unfinished(); n > 3 {
				t.Fatalf("crash at %d: %d at once", crashAt, n)
			}
			a.runAll(backends.StateCompleted, 0)
		}
		if st := mustJob(t, b2, p.ID); st.State != Completed || st.Group.Made != 10 || st.Group.Counts[Completed] != 10 {
			t.Fatalf("crash at %d: parent %s %+v %s", crashAt, st.State, st.Group, st.Reason)
		}
		els, _ := mem.List(context.Background(), Filter{Parent: p.ID})
		if len(els) != 10 {
			t.Fatalf("crash at %d: %d elements", crashAt, len(els))
		}
	}
}

// prunedStore forgets the ended elements, as the daemon's history cleanup
// may while a long array still runs.
type prunedStore struct{ *MemStore }

func (p prunedStore) List(ctx context.Context, f Filter) ([]*Job, error) {
	js, err := p.MemStore.List(ctx, f)
	if f.Parent == "" {
		return js, err
	}
	var out []*Job
	for _, j := range js {
		if !j.State.Final() {
			out = append(out, j)
		}
	}
	return out, err
}

// TestGroupRecoverAfterPrune: elements deleted by the history cleanup are
// not made again after a restart, and keep their recorded counts.
func TestGroupRecoverAfterPrune(t *testing.T) {
	mem := NewMemStore()
	a := newFake("A", 100)
	b1 := brokerOn(t, mem, a)
	r := req(1)
	r.Array = "1-6%2"
	p, err := b1.Submit(context.Background(), r, t0)
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	for range 3 { // two waves complete, the third is made
		now = now.Add(time.Second)
		mustCycle(t, b1, now)
		if mustJob(t, b1, p.ID).Group.Made < 6 {
			a.runAll(backends.StateCompleted, 0)
		}
	}
	b2 := brokerOn(t, prunedStore{mem}, a)
	if _, err := b2.Recover(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	if g := mustJob(t, b2, p.ID).Group; g.Made != 6 || g.Counts[Completed] != 4 {
		t.Fatalf("after the restart: %+v", g)
	}
	for i := 0; i < 10 && mustJob(t, b2, p.ID).State == Running; i++ {
		now = now.Add(time.Second)
		a.runAll(backends.StateCompleted, 0)
		mustCycle(t, b2, now)
	}
	if st := mustJob(t, b2, p.ID); st.State != Completed || st.Group.Counts[Completed] != 6 {
		t.Fatalf("parent %s %+v %s", st.State, st.Group, st.Reason)
	}
	if n := len(a.jobs); n != 6 {
		t.Fatalf("%d remote jobs for 6 elements", n)
	}
}

// TestDependencyDurableAcrossRestart: a held job is stored held; after a
// restart the broker checks it against the stored states of its
// dependencies (which ended before the crash and are not loaded again):
// released when the dependency completed, cancelled with the reason when
// it failed.
func TestDependencyDurableAcrossRestart(t *testing.T) {
	ctx := context.Background()
	mem := NewMemStore()
	a := newFake("A", 4)
	b1 := brokerOn(t, mem, a)
	ok, _ := b1.Submit(ctx, req(1), t0)
	bad, _ := b1.Submit(ctx, req(1), t0)
	r := req(1)
	r.AfterOK = []string{ok.ID}
	waitsOK, err := b1.Submit(ctx, r, t0)
	if err != nil {
		t.Fatal(err)
	}
	r.AfterOK = nil
	r.AfterAny = []string{ok.ID}
	r.After = []string{bad.ID}
	r.AfterOK = []string{bad.ID}
	waitsBad, err := b1.Submit(ctx, r, t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b1, t0.Add(time.Second))
	// Both dependencies end and are stored so; the crash comes before the
	// cycle that would check the held jobs.
	for id, st := range map[string]JobState{ok.ID: Completed, bad.ID: Failed} {
		j, _ := mem.Get(ctx, id)
		j.State, j.Reason, j.Start, j.End = st, "exit 9", t0.Add(time.Second), t0.Add(2*time.Second)
		if err := mem.Put(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := mem.Get(ctx, waitsOK.ID); st.State != Held {
		t.Fatalf("stored %s, want held", st.State)
	}
	b2 := brokerOn(t, mem, a) // the crash: a new broker on the same store
	if _, err := b2.Recover(ctx, t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := b2.Job(ok.ID); err == nil {
		t.Fatal("an ended job was loaded again; the test would not reach the store")
	}
	mustCycle(t, b2, t0.Add(4*time.Second))
	if j := mustJob(t, b2, waitsOK.ID); j.State != Dispatched {
		t.Fatalf("after the restart the job waiting for a completed one is %s", j.State)
	}
	j := mustJob(t, b2, waitsBad.ID)
	if j.State != Cancelled || !strings.Contains(j.Reason, bad.ID+" (afterok) ended failed") {
		t.Fatalf("after the restart the job waiting for a failed one is %s: %s", j.State, j.Reason)
	}
	if st, _ := mem.Get(ctx, waitsBad.ID); st.State != Cancelled {
		t.Fatalf("stored %s", st.State)
	}
}

// TestCancelReachesDependents: cancelling a job cancels the jobs held for
// it with afterok (they could never run), and releases those with afterany.
func TestCancelReachesDependents(t *testing.T) {
	ctx := context.Background()
	b := newTestBroker(t, firstFit, newFake("A", 1), newFake("C", 1))
	first, _ := b.Submit(ctx, req(1), t0)
	r := req(1)
	r.AfterOK = []string{first.ID}
	ok, _ := b.Submit(ctx, r, t0)
	r.AfterOK, r.AfterAny = nil, []string{first.ID}
	anyj, err := b.Submit(ctx, r, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Cancel(ctx, first.ID, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0.Add(2*time.Second))
	if j := mustJob(t, b, ok.ID); j.State != Cancelled || !strings.Contains(j.Reason, first.ID+" (afterok) ended cancelled") {
		t.Fatalf("afterok dependent: %s %s", j.State, j.Reason)
	}
	if j := mustJob(t, b, anyj.ID); j.State != Dispatched {
		t.Fatalf("afterany dependent: %s", j.State)
	}
}

// TestLargeArrayMadeInBoundedBatches: an array of 10,000 elements without
// a limit is made MakePerCycle elements per cycle, not all at once.
func TestLargeArrayMadeInBoundedBatches(t *testing.T) {
	b := newTestBroker(t, func(*policy.Snapshot, policy.Job) *policy.Decision { return nil }, newFake("A", 1))
	r := req(1)
	r.Array = "0-9999"
	p, err := b.Submit(context.Background(), r, t0)
	if err != nil {
		t.Fatal(err)
	}
	for c := 1; c <= 3; c++ {
		mustCycle(t, b, t0.Add(time.Duration(c)*time.Second))
		if g := mustJob(t, b, p.ID).Group; g.Made != c*MakePerCycle || g.Total != 10000 {
			t.Fatalf("after cycle %d: %+v", c, g)
		}
	}
}

// TestArrayElementRetriedUnderItsTier: an element is a job of its own
// QoS tier (its request's, as for a single job): under "none" an element
// whose command fails is queued again and completes at the next attempt,
// and the array completes.
func TestArrayElementRetriedUnderItsTier(t *testing.T) {
	a := newFake("A", 100)
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a, H: 1}}, Planner: scriptPlanner{firstFit}, Tiers: &TierOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	r := req(1)
	r.Array, r.QoS = "0-2", TierNone
	p, err := b.Submit(context.Background(), r, t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0.Add(time.Second))
	el := ElementID(p.ID, 1)
	if e := mustJob(t, b, el); e.Tier != TierNone {
		t.Fatalf("element tier %q, want %q", e.Tier, TierNone)
	}
	a.set(el, backends.StateFailed, 3)
	now := t0.Add(time.Second)
	for i := 0; i < 10 && mustJob(t, b, p.ID).State == Running; i++ {
		now = now.Add(time.Second)
		mustCycle(t, b, now)
		if i > 0 {
			a.runAll(backends.StateCompleted, 0)
		}
	}
	if e := mustJob(t, b, el); e.State != Completed || e.Attempts != 2 {
		t.Fatalf("element %s after %d attempts, want completed at the second", e.State, e.Attempts)
	}
	if p = mustJob(t, b, p.ID); p.State != Completed {
		t.Fatalf("array %s: %s", p.State, p.Reason)
	}
}
