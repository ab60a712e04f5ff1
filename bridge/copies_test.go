package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// flaky is a fake site that can stop answering (a stopped slurmctld or sshd).
type flaky struct {
	*fakeSite
	down atomic.Bool
}

var errDown = fmt.Errorf("%w: test site down", backends.ErrUnavailable)

func (f *flaky) Info(ctx context.Context) (*backends.SiteInfo, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.fakeSite.Info(ctx)
}
func (f *flaky) Status(ctx context.Context, ids []backends.JobID) ([]backends.JobStatus, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.fakeSite.Status(ctx, ids)
}
func (f *flaky) Submit(ctx context.Context, s *backends.JobSpec) (backends.JobID, error) {
	if f.down.Load() {
		return "", errDown
	}
	return f.fakeSite.Submit(ctx, s)
}
func (f *flaky) Cancel(ctx context.Context, id backends.JobID) error {
	if f.down.Load() {
		return errDown
	}
	return f.fakeSite.Cancel(ctx, id)
}

// setTag moves the job tagged tag at this site to state s.
func (f *fakeSite) setTag(tag string, s backends.State, exit int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, st := range f.jobs {
		if st.GridID == tag && !st.State.Final() {
			st.State, st.ExitCode = s, exit
		}
	}
}

// running counts the site's jobs that are not final.
func (f *fakeSite) running() (n int, tags []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, st := range f.jobs {
		if !st.State.Final() {
			n++
			tags = append(tags, st.GridID)
		}
	}
	return n, tags
}

func tierBroker(t *testing.T, store Store, sites ...backends.Backend) *Broker {
	t.Helper()
	var sc []SiteConfig
	for i, s := range sites {
		sc = append(sc, SiteConfig{Name: string(rune('A' + i)), Backend: s, H: 1})
	}
	b, err := New(Options{Sites: sc, Planner: scriptPlanner{fitAllowed}, Store: store,
		Tiers: &TierOptions{DownAfter: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func qreq(qos string) Request {
	r := req(1)
	r.QoS = qos
	return r
}

func kinds(j *Job) string {
	var ks []string
	for _, e := range j.Events {
		ks = append(ks, e.Kind)
	}
	return strings.Join(ks, ",")
}

func TestTierDerivation(t *testing.T) {
	b := tierBroker(t, nil, newFake("A", 4), newFake("B", 4))
	cases := []struct {
		qos      string
		deadline time.Duration
		want     string
	}{
		{"", 0, TierNone},
		{"auto", 0, TierNone},
		{"", 2 * time.Minute, TierHigh},     // ≤ (1+1.5)·1m
		{"", 150 * time.Second, TierHigh},   // exactly (1+λ)·CT_min: the tighter tier
		{"", 151 * time.Second, TierLow},    // just after
		{"none", 2 * time.Minute, TierNone}, // explicit wins
		{"low", 2 * time.Minute, TierLow},   // explicit wins
		{"high", 0, TierHigh},               // explicit, no deadline
	}
	for _, c := range cases {
		r := qreq(c.qos)
		if c.deadline > 0 {
			r.Deadline = t0.Add(c.deadline)
		}
		j, err := b.Submit(context.Background(), r, t0)
		if err != nil {
			t.Fatal(err)
		}
		if j.Tier != c.want || !strings.HasPrefix(j.Events[1].Msg, "tier "+c.want) || j.Events[1].Kind != "tier" {
			t.Errorf("qos %q deadline %s: tier %q, event %+v; want %q", c.qos, c.deadline, j.Tier, j.Events[1], c.want)
		}
	}
	// λ is configurable.
	b2, _ := New(Options{Sites: []SiteConfig{{Name: "A", Backend: newFake("A", 4)}}, Planner: scriptPlanner{firstFit},
		Tiers: &TierOptions{Lambda: 0.5}})
	r := qreq("")
	r.Deadline = t0.Add(2 * time.Minute)
	if j, _ := b2.Submit(context.Background(), r, t0); j.Tier != TierLow || !strings.Contains(j.TierWhy, "λ=0.5") {
		t.Fatalf("λ=0.5: %s %s", j.Tier, j.TierWhy)
	}
}

func TestTierRefusedWithoutTiers(t *testing.T) {
	b := newTestBroker(t, firstFit, newFake("A", 4))
	_, err := b.Submit(context.Background(), qreq("high"), t0)
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "QoS") || !strings.Contains(err.Error(), "Options.Tiers") {
		t.Fatalf("want a QoS field error, got %v", err)
	}
}

func TestTierQueueOrder(t *testing.T) {
	var order []string
	rec := func(s *policy.Snapshot, j policy.Job) *policy.Decision { order = append(order, j.ID); return nil }
	b, _ := New(Options{Sites: []SiteConfig{{Name: "A", Backend: newFake("A", 4)}}, Planner: scriptPlanner{rec}, Tiers: &TierOptions{}})
	var ids []string
	for _, q := range []string{"none", "low", "high", "none", "high", "low"} {
		j, _ := b.Submit(context.Background(), qreq(q), t0)
		ids = append(ids, j.ID)
	}
	mustCycle(t, b, t0)
	want := []string{ids[2], ids[4], ids[1], ids[5], ids[0], ids[3]}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Fatalf("planner saw %v, want high→low→none FCFS %v", order, want)
	}
}

func TestReplicationFirstSuccessWins(t *testing.T) {
	a, c := newFake("A", 4), newFake("B", 4)
	b := tierBroker(t, nil, a, c)
	j, _ := b.Submit(context.Background(), qreq("high"), t0)
	if rep := mustCycle(t, b, t0); rep.Replicated != 1 {
		t.Fatalf("replicated %d", rep.Replicated)
	}
	tag0, tag1 := CopyTag(j.ID, 1, 0), CopyTag(j.ID, 1, 1)
	if _, ts := a.running(); len(ts) != 1 || ts[0] != tag0 {
		t.Fatalf("A runs %v, want %s", ts, tag0)
	}
	if _, ts := c.running(); len(ts) != 1 || ts[0] != tag1 {
		t.Fatalf("B runs %v, want %s", ts, tag1)
	}
	a.setTag(tag0, backends.StateRunning, 0)
	c.setTag(tag1, backends.StateRunning, 0)
	mustCycle(t, b, t0.Add(time.Second))
	if got, _ := b.Job(j.ID); got.State != Running {
		t.Fatalf("state %s", got.State)
	}
	// Copy 1 (at B) succeeds first: copy 0 is cancelled in the same cycle.
	c.setTag(tag1, backends.StateCompleted, 0)
	mustCycle(t, b, t0.Add(2*time.Second))
	if n, _ := a.running(); n != 0 || len(a.cancels) != 1 {
		t.Fatalf("loser not cancelled at once: %d running, cancels %v", n, a.cancels)
	}
	mustCycle(t, b, t0.Add(3*time.Second))
	got, _ := b.Job(j.ID)
	if got.State != Completed || got.Sites() != "B:1" || len(got.Withdrawn) != 1 || got.Withdrawn[0].Site != "A" {
		t.Fatalf("want completed on B only, got %s on %s (withdrawn %+v); events %s", got.State, got.Sites(), got.Withdrawn, kinds(got))
	}
	if !strings.Contains(kinds(got), "copy-won") {
		t.Fatalf("events %s", kinds(got))
	}
}

func TestReplicationOneCopyFails(t *testing.T) {
	a, c := newFake("A", 4), newFake("B", 4)
	b := tierBroker(t, nil, a, c)
	j, _ := b.Submit(context.Background(), qreq("high"), t0)
	mustCycle(t, b, t0)
	a.setTag(CopyTag(j.ID, 1, 0), backends.StateFailed, 1)
	mustCycle(t, b, t0.Add(time.Second))
	got, _ := b.Job(j.ID)
	if got.State.Final() || !strings.Contains(kinds(got), "copy-failed") {
		t.Fatalf("one failed copy ended the job: %s %s", got.State, kinds(got))
	}
	c.setTag(CopyTag(j.ID, 1, 1), backends.StateCompleted, 0)
	mustCycle(t, b, t0.Add(2*time.Second))
	if got, _ = b.Job(j.ID); got.State != Completed || got.Sites() != "B:1" {
		t.Fatalf("%s on %s", got.State, got.Sites())
	}
}

func TestPrimaryBackupPassiveActivatedOnFailure(t *testing.T) {
	a := &flaky{fakeSite: newFake("A", 4)}
	c := newFake("B", 4)
	b := tierBroker(t, nil, a, c)
	j, _ := b.Submit(context.Background(), qreq("low"), t0) // no deadline: passive backup
	mustCycle(t, b, t0)
	if n, _ := c.running(); n != 0 {
		t.Fatal("a passive backup was submitted at once")
	}
	got, _ := b.Job(j.ID)
	if len(got.Comps) != 2 || !got.Comps[1].Passive || got.Comps[1].Role != RoleBackup || got.Comps[1].Site != "B" {
		t.Fatalf("comps %+v", got.Comps)
	}
	a.setTag(CopyTag(j.ID, 1, 0), backends.StateRunning, 0)
	mustCycle(t, b, t0.Add(time.Second))
	// The primary's site stops answering; after DownAfter its copy is lost
	// and the backup goes in.
	a.down.Store(true)
	mustCycle(t, b, t0.Add(2*time.Second))
	mustCycle(t, b, t0.Add(5*time.Second))
	if n, _ := c.running(); n != 0 {
		t.Fatal("backup submitted before DownAfter")
	}
	mustCycle(t, b, t0.Add(12*time.Second))
	if _, ts := c.running(); len(ts) != 1 || ts[0] != CopyTag(j.ID, 1, 1) {
		t.Fatalf("backup not submitted: %v; events %s", ts, kinds(got))
	}
	c.setTag(CopyTag(j.ID, 1, 1), backends.StateCompleted, 0)
	mustCycle(t, b, t0.Add(20*time.Second))
	got, _ = b.Job(j.ID)
	if got.State != Completed || got.Sites() != "B:1" || !strings.Contains(kinds(got), "backup-activated") {
		t.Fatalf("%s on %s: %s", got.State, got.Sites(), kinds(got))
	}
	// The primary, given up while A was down, is cancelled once A answers.
	if n, _ := a.running(); n != 1 {
		t.Fatalf("primary at A: %d running", n)
	}
	a.down.Store(false)
	mustCycle(t, b, t0.Add(23*time.Second)) // orphan cancels are retried once per DownAfter (10s)
	b.duties.bg.Wait()                      // in the background: A was last seen down
	if n, _ := a.running(); n != 0 {
		t.Fatal("the lost primary still runs after its site came back")
	}
}

func TestPrimaryBackupActiveCancelledOnSuccess(t *testing.T) {
	a, c := newFake("A", 4), newFake("B", 4)
	b := tierBroker(t, nil, a, c)
	r := qreq("low")
	r.Deadline = t0.Add(90 * time.Second) // latest backup start t0+30s is before the primary's end t0+60s
	j, _ := b.Submit(context.Background(), r, t0)
	mustCycle(t, b, t0)
	got, _ := b.Job(j.ID)
	if n, _ := c.running(); n != 0 || !got.Comps[1].Due.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("the active backup must wait for its latest start t0+30s: %d running, due %v", n, got.Comps[1].Due)
	}
	mustCycle(t, b, t0.Add(29*time.Second))
	if n, _ := c.running(); n != 0 {
		t.Fatal("the active backup was submitted before its latest start")
	}
	mustCycle(t, b, t0.Add(30*time.Second))
	if n, _ := c.running(); n != 1 {
		t.Fatal("the active backup was not submitted at its latest start")
	}
	a.setTag(CopyTag(j.ID, 1, 0), backends.StateCompleted, 0)
	mustCycle(t, b, t0.Add(31*time.Second))
	if n, _ := c.running(); n != 0 {
		t.Fatal("backup runs after its primary succeeded")
	}
	mustCycle(t, b, t0.Add(32*time.Second))
	if got, _ := b.Job(j.ID); got.State != Completed || got.Sites() != "A:1" {
		t.Fatalf("%s on %s", got.State, got.Sites())
	}
}

func TestRetryNoneAvoidsFailedSite(t *testing.T) {
	a, c := newFake("A", 4), newFake("B", 4)
	b := tierBroker(t, nil, a, c)
	j, _ := b.Submit(context.Background(), qreq("none"), t0)
	mustCycle(t, b, t0)
	a.set(j.ID, backends.StateFailed, 3)
	mustCycle(t, b, t0.Add(time.Second)) // failed -> requeued -> placed again
	got, _ := b.Job(j.ID)
	if got.Attempts != 2 || got.Sites() != "B:1" || !strings.Contains(kinds(got), "retry") {
		t.Fatalf("attempt %d on %s: %s", got.Attempts, got.Sites(), kinds(got))
	}
	c.set(j.ID, backends.StateFailed, 3)
	mustCycle(t, b, t0.Add(2*time.Second))
	c.set(j.ID, backends.StateFailed, 3)
	a.set(j.ID, backends.StateFailed, 3)
	mustCycle(t, b, t0.Add(3*time.Second))
	got, _ = b.Job(j.ID)
	if got.State != Failed || got.Attempts != 3 || got.ExitCode != 3 {
		t.Fatalf("after 3 attempts: %s attempt %d exit %d: %s", got.State, got.Attempts, got.ExitCode, kinds(got))
	}
}

// TestReplicationRecoverAfterCrash: a broker stopped after copy 1 won but
// before copy 0 was cancelled; the new broker cancels it and ends the job once.
func TestReplicationRecoverAfterCrash(t *testing.T) {
	a, c := newFake("A", 4), newFake("B", 4)
	st := NewMemStore()
	b := tierBroker(t, st, a, c)
	j, _ := b.Submit(context.Background(), qreq("high"), t0)
	mustCycle(t, b, t0)
	c.setTag(CopyTag(j.ID, 1, 1), backends.StateCompleted, 0)
	// The crash: b is dropped without another cycle. A second broker on the same store.
	b2 := tierBroker(t, st, a, c)
	if _, err := b2.Recover(context.Background(), t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b2, t0.Add(2*time.Second))
	mustCycle(t, b2, t0.Add(3*time.Second))
	got, _ := b2.Job(j.ID)
	if n, _ := a.running(); n != 0 || got.State != Completed || got.Sites() != "B:1" {
		t.Fatalf("A runs %d; job %s on %s: %s", n, got.State, got.Sites(), kinds(got))
	}
	if strings.Count(kinds(got), "completed") != 1 || len(a.jobs)+len(c.jobs) != 2 {
		t.Fatalf("ended %d times, %d remote jobs", strings.Count(kinds(got), "completed"), len(a.jobs)+len(c.jobs))
	}
}

// TestReplicationRecoverIntent: a broker killed with both copies intended
// and only copy 0 submitted: the restart adopts copy 0 and submits copy 1
// under its own tag, once.
func TestReplicationRecoverIntent(t *testing.T) {
	a, c := newFake("A", 4), newFake("B", 4)
	st := &crashStore{MemStore: NewMemStore(), n: 2} // the submit and the intent; nothing after
	b := tierBroker(t, st, a, c)
	j, _ := b.Submit(context.Background(), qreq("high"), t0)
	c.submitErr = errors.New("killed before B heard of it") // stands for the crash between the two submissions
	mustCycle(t, b, t0)
	c.submitErr = nil
	got, _ := st.MemStore.Get(context.Background(), j.ID)
	if got.State != Submitting {
		t.Fatalf("stored %s", got.State)
	}
	b2 := tierBroker(t, st.MemStore, a, c)
	rep, err := b2.Recover(context.Background(), t0.Add(time.Second))
	if err != nil || rep.Adopted != 1 || rep.NeverReached != 1 {
		t.Fatalf("recover %+v %v", rep, err)
	}
	mustCycle(t, b2, t0.Add(2*time.Second))
	if _, ts := c.running(); len(ts) != 1 || ts[0] != CopyTag(j.ID, 1, 1) || len(a.jobs) != 1 {
		t.Fatalf("B runs %v, A has %d jobs", ts, len(a.jobs))
	}
}

// fitAllowed starts a job on the first allowed site with room.
func fitAllowed(s *policy.Snapshot, j policy.Job) *policy.Decision {
	for i, st := range s.Sites {
		if st.Free >= j.Width && !st.Down && (j.Allowed == nil || slices.Contains(j.Allowed, i)) {
			return &policy.Decision{Job: j.ID, Action: policy.Start, Chosen: policy.Option{Parts: []policy.Part{{Site: i, Nodes: j.Width}}}}
		}
	}
	return nil
}

// TestRecoverActivatedBackup: a broker that recorded a backup's activation
// but died before (or while) submitting it: the restart looks the backup's
// tag up; found, it is adopted; missing, it is submitted once, under its tag.
func TestRecoverActivatedBackup(t *testing.T) {
	for _, reached := range []bool{false, true} {
		a, c := newFake("A", 4), newFake("B", 4)
		st := NewMemStore()
		id := "g000007"
		tag := CopyTag(id, 1, 1)
		j := &Job{ID: id, Req: qreq("low"), State: Running, Submit: t0, Attempts: 1, ExitCode: -1, Tier: TierLow,
			Comps:     []Component{{Site: "B", Nodes: 1, State: backends.StateUnknown, ExitCode: -1, Copy: 1, Role: RoleBackup, Tag: tag}},
			Withdrawn: []Component{{Site: "A", Nodes: 1, RemoteID: "1", State: backends.StateLost, ExitCode: -1, Role: RolePrimary, Tag: CopyTag(id, 1, 0)}}}
		if reached {
			if _, err := c.Submit(context.Background(), &backends.JobSpec{GridID: tag, Nodes: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Put(context.Background(), j); err != nil {
			t.Fatal(err)
		}
		b := tierBroker(t, st, a, c)
		if _, err := b.Recover(context.Background(), t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		mustCycle(t, b, t0.Add(2*time.Second))
		mustCycle(t, b, t0.Add(3*time.Second))
		if n, ts := c.running(); n != 1 || ts[0] != tag || len(c.jobs) != 1 {
			t.Fatalf("reached=%v: B runs %v of %d jobs; want the backup once", reached, ts, len(c.jobs))
		}
		c.setTag(tag, backends.StateCompleted, 0)
		mustCycle(t, b, t0.Add(4*time.Second))
		if got, _ := b.Job(id); got.State != Completed || got.Sites() != "B:1" {
			t.Fatalf("reached=%v: %s on %s: %s", reached, got.State, got.Sites(), kinds(got))
		}
	}
}

// fakeRel is a Reliability with a fixed RC per site that records what it
// is told: each change of a site's up/down (every site starts up) and each
// loss.
type fakeRel struct {
	rc   map[string]float64
	obs  []string
	down map[string]bool
}

func (f *fakeRel) RC(site string, ct time.Duration) float64 { return f.rc[site] * ct.Seconds() }
func (f *fakeRel) Observe(site string, up bool, at time.Time) {
	if f.down == nil {
		f.down = map[string]bool{}
	}
	if f.down[site] != up {
		return // no change
	}
	f.down[site] = !up
	f.obs = append(f.obs, fmt.Sprintf("%s %v %s", site, up, at.Sub(t0)))
}
func (f *fakeRel) Lost(site string, at time.Time) {
	f.obs = append(f.obs, fmt.Sprintf("%s lost %s", site, at.Sub(t0)))
}

// TestCopiesByReliability: with a model, a high job's copies go to the two
// least-RC sites, and the model hears of a site that stops answering and
// of its return.
func TestCopiesByReliability(t *testing.T) {
	a := &flaky{fakeSite: newFake("A", 4)}
	bs, cs := newFake("B", 4), newFake("C", 4)
	rel := &fakeRel{rc: map[string]float64{"A": 0.9, "B": 0.1, "C": 0.2}}
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a}, {Name: "B", Backend: bs}, {Name: "C", Backend: cs}},
		Planner: scriptPlanner{fitAllowed}, Tiers: &TierOptions{DownAfter: 10 * time.Second, Reliability: rel}})
	if err != nil {
		t.Fatal(err)
	}
	j, _ := b.Submit(context.Background(), qreq("high"), t0)
	mustCycle(t, b, t0) // the planner alone would take A (first with room)
	got, _ := b.Job(j.ID)
	if got.Comps[0].Site != "B" || got.Comps[1].Site != "C" {
		t.Fatalf("copies at %s, want B (RC 0.1) and C (0.2)", got.Sites())
	}
	// A none job goes where the planner puts it (A); A then stops
	// answering and comes back.
	j2, _ := b.Submit(context.Background(), qreq("none"), t0)
	mustCycle(t, b, t0.Add(time.Second))
	if got, _ := b.Job(j2.ID); got.Sites() != "A:1" {
		t.Fatalf("none job at %s", got.Sites())
	}
	a.down.Store(true)
	mustCycle(t, b, t0.Add(2*time.Second))
	a.down.Store(false)
	mustCycle(t, b, t0.Add(3*time.Second))
	if strings.Join(rel.obs, ";") != "A false 2s;A true 3s" {
		t.Fatalf("observed %v", rel.obs)
	}
}

// TestRecoverDueBackup: an active backup held until its latest start is
// still held, and then submitted, by a restarted broker.
func TestRecoverDueBackup(t *testing.T) {
	a, c := newFake("A", 4), newFake("B", 4)
	st := NewMemStore()
	id := "g000009"
	rid, _ := a.Submit(context.Background(), &backends.JobSpec{GridID: CopyTag(id, 1, 0), Nodes: 1})
	a.setTag(CopyTag(id, 1, 0), backends.StateRunning, 0)
	j := &Job{ID: id, Req: qreq("low"), State: Running, Submit: t0, Attempts: 1, ExitCode: -1, Tier: TierLow,
		Comps: []Component{{Site: "A", Nodes: 1, RemoteID: rid, State: backends.StateRunning, ExitCode: -1, Role: RolePrimary, Tag: CopyTag(id, 1, 0)},
			{Site: "B", Nodes: 1, State: backends.StateUnknown, ExitCode: -1, Copy: 1, Role: RoleBackup, Tag: CopyTag(id, 1, 1),
				Passive: true, Due: t0.Add(30 * time.Second)}}}
	if err := st.Put(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	b := tierBroker(t, st, a, c)
	if _, err := b.Recover(context.Background(), t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0.Add(10*time.Second))
	if n, _ := c.running(); n != 0 {
		t.Fatal("the backup was submitted before it was due")
	}
	mustCycle(t, b, t0.Add(30*time.Second))
	if _, ts := c.running(); len(ts) != 1 || ts[0] != CopyTag(id, 1, 1) {
		t.Fatalf("B runs %v, want the backup at its latest start", ts)
	}
}

// TestNoRetryEndsAtTheFirstFailure: a job whose submitter owns retries (a
// workflow engine through the sbatch front-end) fails at its command's
// first failure even in the retrying tier; a site that loses it still
// gets it requeued.
func TestNoRetryEndsAtTheFirstFailure(t *testing.T) {
	a, c := newFake("A", 4), newFake("B", 4)
	b := tierBroker(t, nil, a, c)
	req := qreq("none")
	req.NoRetry = true
	j, _ := b.Submit(context.Background(), req, t0)
	mustCycle(t, b, t0)
	a.set(j.ID, backends.StateFailed, 3)
	mustCycle(t, b, t0.Add(time.Second))
	got, _ := b.Job(j.ID)
	if got.State != Failed || got.Attempts != 1 || got.ExitCode != 3 {
		t.Fatalf("%s attempt %d exit %d: %s", got.State, got.Attempts, got.ExitCode, kinds(got))
	}
	j2, _ := b.Submit(context.Background(), req, t0.Add(2*time.Second))
	mustCycle(t, b, t0.Add(2*time.Second))
	got, _ = b.Job(j2.ID)
	site := a
	if got.Sites() == "B:1" {
		site = c
	}
	site.set(j2.ID, backends.StateLost, -1)
	mustCycle(t, b, t0.Add(3*time.Second))
	if got, _ = b.Job(j2.ID); got.Attempts != 2 || got.State.Final() {
		t.Fatalf("a lost job: %s attempt %d: %s", got.State, got.Attempts, kinds(got))
	}
}
