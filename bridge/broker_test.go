package bridge

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// fakeSite is a backend whose jobs change state only when the test says so.
type fakeSite struct {
	mu        sync.Mutex
	name      string
	nodes     int
	jobs      map[backends.JobID]*backends.JobStatus
	specs     map[backends.JobID]*backends.JobSpec
	next      int
	submitErr error
	findErr   error
	cancels   []backends.JobID
	statusN   int // Status calls
}

func newFake(name string, nodes int) *fakeSite {
	return &fakeSite{name: name, nodes: nodes, jobs: map[backends.JobID]*backends.JobStatus{}, specs: map[backends.JobID]*backends.JobSpec{}}
}

func (f *fakeSite) Name() string { return f.name }
func (f *fakeSite) Info(context.Context) (*backends.SiteInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	used := 0
	for id, st := range f.jobs {
		if !st.State.Final() {
			used += f.specs[id].Nodes
		}
	}
	return &backends.SiteInfo{Name: f.name, Nodes: f.nodes, FreeNodes: f.nodes - used}, nil
}
func (f *fakeSite) Submit(_ context.Context, s *backends.JobSpec) (backends.JobID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.submitErr != nil {
		return "", f.submitErr
	}
	f.next++
	id := backends.JobID(fmt.Sprint(f.next))
	f.jobs[id] = &backends.JobStatus{ID: id, GridID: s.GridID, State: backends.StatePending}
	f.specs[id] = s
	return id, nil
}
func (f *fakeSite) Status(_ context.Context, ids []backends.JobID) ([]backends.JobStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statusN++
	out := make([]backends.JobStatus, len(ids))
	for i, id := range ids {
		if st, ok := f.jobs[id]; ok {
			out[i] = *st
		} else {
			out[i] = backends.JobStatus{ID: id, State: backends.StateLost}
		}
	}
	return out, nil
}
func (f *fakeSite) Cancel(_ context.Context, id backends.JobID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels = append(f.cancels, id)
	if st, ok := f.jobs[id]; ok && !st.State.Final() {
		st.State = backends.StateCancelled
	}
	return nil
}

// set moves every job of grid job gid at this site to state s.
func (f *fakeSite) set(gid string, s backends.State, exit int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, st := range f.jobs {
		if strings.HasPrefix(st.GridID, gid+"-a") && !st.State.Final() {
			st.State, st.ExitCode = s, exit
		}
	}
}

// scriptPlanner returns the decisions the test gives it for the queue's jobs.
type scriptPlanner struct {
	decide func(s *policy.Snapshot, j policy.Job) *policy.Decision
}

func (p scriptPlanner) Name() string { return "script" }
func (p scriptPlanner) Plan(_ context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	plan := &policy.Plan{}
	view := *s // decisions see the nodes earlier starts took (the Planner contract)
	view.Sites = append([]policy.Site(nil), s.Sites...)
	for _, j := range s.Queue {
		if d := p.decide(&view, j); d != nil {
			plan.Decisions = append(plan.Decisions, *d)
			if d.Action == policy.Start {
				for _, pt := range d.Chosen.Parts {
					view.Sites[pt.Site].Free -= pt.Nodes
				}
			}
		}
	}
	return plan, nil
}

// firstFit starts a job on the first site with room, else splits over all.
func firstFit(s *policy.Snapshot, j policy.Job) *policy.Decision {
	for i, st := range s.Sites {
		if st.Free >= j.Width {
			return &policy.Decision{Job: j.ID, Action: policy.Start, Chosen: policy.Option{Parts: []policy.Part{{Site: i, Nodes: j.Width}}}}
		}
	}
	total, left := 0, j.Width
	var parts []policy.Part
	for i, st := range s.Sites {
		total += st.Nodes
		if left > 0 && st.Free > 0 {
			n := min(st.Free, left)
			parts = append(parts, policy.Part{Site: i, Nodes: n})
			left -= n
		}
	}
	if j.Width > total {
		return &policy.Decision{Job: j.ID, Action: policy.Reject, Status: policy.NewStatus(policy.Unresolvable, "test", fmt.Sprintf("needs %d nodes, all sites have %d", j.Width, total))}
	}
	if left > 0 {
		return nil
	}
	return &policy.Decision{Job: j.ID, Action: policy.Start, Chosen: policy.Option{Parts: parts}}
}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func newTestBroker(t *testing.T, dec func(*policy.Snapshot, policy.Job) *policy.Decision, sites ...*fakeSite) *Broker {
	t.Helper()
	var sc []SiteConfig
	for _, s := range sites {
		sc = append(sc, SiteConfig{Name: s.name, Backend: s, H: 1})
	}
	b, err := New(Options{Sites: sc, Planner: scriptPlanner{dec}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func req(nodes int) Request {
	return Request{Name: "t", Command: []string{"true"}, Nodes: nodes, Estimate: time.Minute}
}

func mustCycle(t *testing.T, b *Broker, now time.Time) CycleReport {
	t.Helper()
	rep, err := b.Cycle(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestSingleSiteLifecycle(t *testing.T) {
	a := newFake("A", 4)
	b := newTestBroker(t, firstFit, a)
	j, err := b.Submit(context.Background(), req(2), t0)
	if err != nil {
		t.Fatal(err)
	}
	if rep := mustCycle(t, b, t0); rep.Started != 1 {
		t.Fatalf("started %d, want 1", rep.Started)
	}
	got, _ := b.Job(j.ID)
	if got.State != Dispatched || got.Sites() != "A:2" {
		t.Fatalf("after dispatch: %s on %s", got.State, got.Sites())
	}
	if spec := a.specs["1"]; spec.GridID != RemoteTag(j.ID, 1) || spec.Env["GRIDSUB_JOB_ID"] != j.ID || spec.Walltime != time.Minute {
		t.Fatalf("spec not tagged/scaled: %+v", spec)
	}
	a.set(j.ID, backends.StateRunning, 0)
	mustCycle(t, b, t0.Add(time.Second))
	if got, _ = b.Job(j.ID); got.State != Running || !got.Start.Equal(t0.Add(time.Second)) {
		t.Fatalf("want running since t0+1s, got %s %v", got.State, got.Start)
	}
	a.set(j.ID, backends.StateCompleted, 0)
	mustCycle(t, b, t0.Add(time.Minute))
	got, _ = b.Job(j.ID)
	if got.State != Completed || got.ExitCode != 0 {
		t.Fatalf("want completed/0, got %s/%d", got.State, got.ExitCode)
	}
	kinds := []string{}
	for _, e := range got.Events {
		kinds = append(kinds, e.Kind)
	}
	if want := "submitted dispatch submitted-remote running completed"; strings.Join(kinds, " ") != want {
		t.Fatalf("events %v, want %s", kinds, want)
	}
	if !b.Idle() {
		t.Fatal("broker should be idle")
	}
}

func TestCoAllocationFailureCancelsSibling(t *testing.T) {
	a, c := newFake("A", 4), newFake("B", 4)
	b := newTestBroker(t, firstFit, a, c)
	j, _ := b.Submit(context.Background(), req(6), t0)
	mustCycle(t, b, t0)
	got, _ := b.Job(j.ID)
	if got.Sites() != "A:4+B:2" {
		t.Fatalf("placement %s, want A:4+B:2", got.Sites())
	}
	if a.specs["1"].Components != 2 || c.specs["1"].Component != 1 {
		t.Fatal("components not numbered")
	}
	a.set(j.ID, backends.StateRunning, 0)
	c.set(j.ID, backends.StateFailed, 3)
	mustCycle(t, b, t0.Add(time.Second))
	got, _ = b.Job(j.ID)
	if got.State != Failed || got.ExitCode != 3 || !strings.Contains(got.Reason, "B ended failed with exit code 3") {
		t.Fatalf("got %s exit %d reason %q", got.State, got.ExitCode, got.Reason)
	}
	if len(a.cancels) != 1 {
		t.Fatalf("sibling at A not cancelled: %v", a.cancels)
	}
}

func TestOnePollPerSite(t *testing.T) {
	a := newFake("A", 100)
	b := newTestBroker(t, firstFit, a)
	for range 50 {
		if _, err := b.Submit(context.Background(), req(1), t0); err != nil {
			t.Fatal(err)
		}
	}
	mustCycle(t, b, t0)
	a.statusN = 0
	rep := mustCycle(t, b, t0.Add(time.Second))
	if a.statusN != 1 || rep.Polled != 50 {
		t.Fatalf("status calls %d polled %d; want 1 call for 50 jobs", a.statusN, rep.Polled)
	}
}

func TestRejectAndUnknownSite(t *testing.T) {
	a := newFake("A", 4)
	b := newTestBroker(t, firstFit, a)
	j, _ := b.Submit(context.Background(), req(9), t0)
	if rep := mustCycle(t, b, t0); rep.Rejected != 1 {
		t.Fatal("wide job not rejected")
	}
	got, _ := b.Job(j.ID)
	if got.State != Rejected || !strings.Contains(got.Reason, "needs 9 nodes") {
		t.Fatalf("got %s %q", got.State, got.Reason)
	}
	r := req(1)
	r.Sites = []string{"Nowhere"}
	if _, err := b.Submit(context.Background(), r, t0); !errors.Is(err, ErrUnknownSite) || !strings.Contains(err.Error(), "known sites: A") {
		t.Fatalf("unknown site: %v", err)
	}
	if _, err := b.Submit(context.Background(), req(0), t0); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("zero nodes: %v", err)
	}
}

func TestSubmitFailureUndoesPartialDispatch(t *testing.T) {
	a, c := newFake("A", 4), newFake("B", 4)
	c.submitErr = fmt.Errorf("%w: connection refused", backends.ErrUnavailable)
	b := newTestBroker(t, firstFit, a, c)
	j, _ := b.Submit(context.Background(), req(6), t0)
	mustCycle(t, b, t0)
	got, _ := b.Job(j.ID)
	if got.State != Queued || len(a.cancels) != 1 {
		t.Fatalf("want queued again with A's part cancelled, got %s cancels %v", got.State, a.cancels)
	}
	c.submitErr = nil
	a.set(j.ID, backends.StateCancelled, 0)
	mustCycle(t, b, t0.Add(time.Second))
	if got, _ = b.Job(j.ID); got.State != Dispatched || got.Attempts != 2 {
		t.Fatalf("second attempt: %s attempts %d", got.State, got.Attempts)
	}
	// A permanent refusal fails the job with the batch system's words.
	c.submitErr = fmt.Errorf("%w: invalid partition", backends.ErrRejected)
	j2, _ := b.Submit(context.Background(), req(6), t0)
	a.set(j.ID, backends.StateCompleted, 0)
	c.set(j.ID, backends.StateCompleted, 0)
	mustCycle(t, b, t0.Add(2*time.Second))
	mustCycle(t, b, t0.Add(3*time.Second))
	if got, _ = b.Job(j2.ID); got.State != Failed || !strings.Contains(got.Reason, "invalid partition") {
		t.Fatalf("permanent refusal: %s %q", got.State, got.Reason)
	}
}

func TestReplicateFirstStartWins(t *testing.T) {
	a, c := newFake("A", 4), newFake("B", 4)
	rep := func(s *policy.Snapshot, j policy.Job) *policy.Decision {
		return &policy.Decision{Job: j.ID, Action: policy.Replicate, Chosen: policy.Option{Parts: []policy.Part{{Site: 0, Nodes: j.Width}, {Site: 1, Nodes: j.Width}}}}
	}
	b := newTestBroker(t, rep, a, c)
	j, _ := b.Submit(context.Background(), req(2), t0)
	if r := mustCycle(t, b, t0); r.Replicated != 1 {
		t.Fatal("not replicated")
	}
	c.set(j.ID, backends.StateRunning, 0)
	mustCycle(t, b, t0.Add(time.Second))
	got, _ := b.Job(j.ID)
	if got.Sites() != "B:2" || got.State != Running || len(a.cancels) != 1 {
		t.Fatalf("winner %s state %s cancels at A %v", got.Sites(), got.State, a.cancels)
	}
}

func TestCancelQueuedAndRunning(t *testing.T) {
	a := newFake("A", 1)
	b := newTestBroker(t, firstFit, a)
	j1, _ := b.Submit(context.Background(), req(1), t0)
	j2, _ := b.Submit(context.Background(), req(1), t0)
	mustCycle(t, b, t0)
	if err := b.Cancel(context.Background(), j2.ID, t0); err != nil {
		t.Fatal(err)
	}
	if err := b.Cancel(context.Background(), j1.ID, t0); err != nil {
		t.Fatal(err)
	}
	if len(a.cancels) != 1 || a.cancels[0] != "1" {
		t.Fatalf("remote cancels %v", a.cancels)
	}
	if err := b.Cancel(context.Background(), j1.ID, t0); !errors.Is(err, ErrFinal) {
		t.Fatalf("cancel twice: %v", err)
	}
	if !b.Idle() {
		t.Fatal("not idle after cancels")
	}
}

// TestReplicaRunsAtItsOwnSitesSpeed: each copy of a replicated job gets the
// walltime and real run time of the site it runs on (h 1.4 vs 0.6), not the
// fastest target's.
func TestReplicaRunsAtItsOwnSitesSpeed(t *testing.T) {
	slow, fast := newFake("Slow", 4), newFake("Fast", 4)
	rep := func(s *policy.Snapshot, j policy.Job) *policy.Decision {
		parts := []policy.Part{{Site: 1, Nodes: j.Width}, {Site: 0, Nodes: j.Width}}
		o := policy.Option{Parts: parts, Runtime: s.Runtime(&j, parts[:1]), Immediate: true}
		return &policy.Decision{Job: j.ID, Action: policy.Replicate, Chosen: o}
	}
	b, err := New(Options{Sites: []SiteConfig{{Name: "Slow", Backend: slow, H: 1.4, Simulated: true}, {Name: "Fast", Backend: fast, H: 0.6, Simulated: true}},
		Planner: scriptPlanner{rep}})
	if err != nil {
		t.Fatal(err)
	}
	r := req(2)
	r.Estimate = 100 * time.Second
	r.Sim.Runtime = 50 * time.Second
	if _, err := b.Submit(context.Background(), r, t0); err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0)
	s, f := slow.specs["1"], fast.specs["1"]
	if s == nil || f == nil {
		t.Fatal("a copy is missing")
	}
	if s.Walltime != 140*time.Second || s.Sim.Runtime != 70*time.Second {
		t.Errorf("copy at Slow (h 1.4): walltime %s runtime %s, want 2m20s and 1m10s", s.Walltime, s.Sim.Runtime)
	}
	if f.Walltime != 60*time.Second || f.Sim.Runtime != 30*time.Second {
		t.Errorf("copy at Fast (h 0.6): walltime %s runtime %s, want 1m0s and 30s", f.Walltime, f.Sim.Runtime)
	}
}

// measuredSite is a fake site that has measured its link from this machine.
type measuredSite struct{ *fakeSite }

func (measuredSite) LinkEstimate() (float64, time.Duration, bool) {
	return 1e-6, 30 * time.Millisecond, true
}

// TestMeasuredLinksReachThePolicy: a site's measured transfer cost (a
// backends.LinkEstimator) is in the snapshot the policy plans with.
func TestMeasuredLinksReachThePolicy(t *testing.T) {
	a, m := newFake("A", 4), measuredSite{newFake("M", 4)}
	var seen []policy.Link
	dec := func(s *policy.Snapshot, j policy.Job) *policy.Decision {
		seen = append([]policy.Link(nil), s.Uplinks...)
		return nil
	}
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a}, {Name: "M", Backend: m}}, Planner: scriptPlanner{dec}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Submit(context.Background(), req(1), t0); err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0)
	want := []policy.Link{{}, {SecPerByte: 1e-6, Latency: 30 * time.Millisecond}}
	if len(seen) != 2 || seen[0] != want[0] || seen[1] != want[1] {
		t.Fatalf("policy saw uplinks %+v, want %+v", seen, want)
	}
}

// TestOutputDirPlaceholderIsStored: "{id}" in the output directory becomes
// the job id before the job is first stored, so a restarted broker fetches
// the outputs to the same place.
func TestOutputDirPlaceholderIsStored(t *testing.T) {
	mem := NewMemStore()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: newFake("A", 1)}}, Planner: scriptPlanner{firstFit}, Store: mem, OutputRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	r := req(1)
	r.OutputDir = "out/" + IDPlaceholder // relative: below the output root
	j, err := b.Submit(context.Background(), r, t0)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := mem.Get(context.Background(), j.ID)
	if want := filepath.Join(root, "out", j.ID); j.Req.OutputDir != want || stored.Req.OutputDir != want {
		t.Fatalf("returned %q, stored %q, want %q", j.Req.OutputDir, stored.Req.OutputDir, want)
	}
}

// TestCycleLeavesLaterSubmissionsToTheNextCycle: a job submitted after the
// cycle's now (while it was polling) is not planned in that cycle, so no
// event of the job predates its submission.
func TestCycleLeavesLaterSubmissionsToTheNextCycle(t *testing.T) {
	a := newFake("A", 4)
	b := newTestBroker(t, firstFit, a)
	late, _ := b.Submit(context.Background(), req(1), t0.Add(time.Second))
	if rep := mustCycle(t, b, t0); rep.Started != 0 {
		t.Fatalf("started %d jobs submitted after the cycle's time", rep.Started)
	}
	mustCycle(t, b, t0.Add(2*time.Second))
	got, _ := b.Job(late.ID)
	if got.State != Dispatched {
		t.Fatalf("next cycle: %s", got.State)
	}
	for i := 1; i < len(got.Events); i++ {
		if got.Events[i].Time.Before(got.Events[i-1].Time) {
			t.Fatalf("events go back in time: %+v", got.Events)
		}
	}
}

// fetchingSite records what a reader of the job sees while its outputs are
// being fetched.
type fetchingSite struct {
	*fakeSite
	b    *Broker
	seen JobState
}

func (f *fetchingSite) FetchOutputs(_ context.Context, id backends.JobID, spec *backends.JobSpec, dir string) ([]string, error) {
	j, _ := f.b.Job(spec.Env["GRIDSUB_JOB_ID"])
	f.seen = j.State
	return []string{dir + "/stdout.txt"}, nil
}

// TestJobEndsOnlyOnceItsOutputsAreFetched: whoever sees a job completed
// finds its outputs too.
func TestJobEndsOnlyOnceItsOutputsAreFetched(t *testing.T) {
	fs := &fetchingSite{fakeSite: newFake("A", 4)}
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: fs}}, Planner: scriptPlanner{firstFit}, OutputRoot: "/out"})
	if err != nil {
		t.Fatal(err)
	}
	fs.b = b
	r := req(1)
	r.OutputDir = "/out/" + IDPlaceholder
	j, _ := b.Submit(context.Background(), r, t0)
	mustCycle(t, b, t0)
	fs.set(j.ID, backends.StateCompleted, 0)
	mustCycle(t, b, t0.Add(time.Minute))
	// A real site's fetch runs off the cycle: the next cycle ends the job.
	if err := b.WaitFetches(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Job(j.ID); got.State.Final() {
		t.Fatalf("job %s before the cycle that applies its fetch", got.State)
	}
	mustCycle(t, b, t0.Add(2*time.Minute))
	got, _ := b.Job(j.ID)
	if fs.seen == "" || fs.seen.Final() {
		t.Fatalf("during the fetch the job was %q; it must not look ended yet", fs.seen)
	}
	if got.State != Completed || len(got.Outputs) != 1 || got.Outputs[0] != "/out/"+j.ID+"/stdout.txt" {
		t.Fatalf("after the fetch: %s, outputs %v", got.State, got.Outputs)
	}
	if k := got.Events[len(got.Events)-1].Kind; k != "completed" {
		t.Fatalf("last event %q, want completed after outputs", k)
	}
}

// TestViewSeesTheJobItself: View shows the broker's own job (what Job
// copies), and an unknown id is ErrNotFound without calling fn.
func TestViewSeesTheJobItself(t *testing.T) {
	a := newFake("A", 4)
	b := newTestBroker(t, firstFit, a)
	j, err := b.Submit(context.Background(), req(2), t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0)
	var state JobState
	var sites string
	if err := b.View(j.ID, func(v *Job) { state, sites = v.State, v.Sites() }); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Job(j.ID); state != got.State || sites != got.Sites() || state != Dispatched || sites != "A:2" {
		t.Fatalf("View saw %s on %s; Job says %s on %s", state, sites, got.State, got.Sites())
	}
	called := false
	if err := b.View("g999999", func(*Job) { called = true }); !errors.Is(err, ErrNotFound) || called {
		t.Fatalf("View of an unknown id: %v (fn called: %v)", err, called)
	}
}

// Concurrent submissions may be queued in another order than their times: a
// job submitted after the cycle's now is planned by a later cycle even when
// an earlier job is queued behind it, so no job is dispatched before it was
// submitted (the kill test once saw a dispatch event older than the
// submission's). Fails with a rule that only trims late jobs off the
// queue's end.
func TestCycleLeavesJobsSubmittedAfterItsNow(t *testing.T) {
	a := newFake("A", 4)
	b := newTestBroker(t, firstFit, a)
	late, err := b.Submit(context.Background(), req(1), t0.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	early, err := b.Submit(context.Background(), req(1), t0)
	if err != nil {
		t.Fatal(err)
	}
	if rep := mustCycle(t, b, t0.Add(time.Second)); rep.Started != 1 {
		t.Fatalf("started %d at t0+1s, want 1 (only the job submitted by then)", rep.Started)
	}
	if got, _ := b.Job(late.ID); got.State != Queued {
		t.Fatalf("job submitted at t0+2s is %s after a cycle at t0+1s, want queued", got.State)
	}
	if got, _ := b.Job(early.ID); got.State != Dispatched {
		t.Fatalf("job submitted at t0 is %s after a cycle at t0+1s, want dispatched", got.State)
	}
	mustCycle(t, b, t0.Add(3*time.Second))
	got, _ := b.Job(late.ID)
	if got.State != Dispatched {
		t.Fatalf("late job %s after a cycle at t0+3s, want dispatched", got.State)
	}
	for k := 1; k < len(got.Events); k++ {
		if got.Events[k].Time.Before(got.Events[k-1].Time) {
			t.Fatalf("event %d (%s) earlier than event %d (%s)", k, got.Events[k].Kind, k-1, got.Events[k-1].Kind)
		}
	}
}
