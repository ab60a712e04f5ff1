package bridge_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/coalloc"
	"github.com/gridsub/gridsub/simbackend"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// simGrid is a broker over simulated sites on one engine.
type simGrid struct {
	e     *simbackend.Engine
	sites map[string]*simbackend.Site
	b     *bridge.Broker
	st    bridge.Store
}

func newSimGrid(t *testing.T, st bridge.Store, nodes map[string]int, order ...string) *simGrid {
	t.Helper()
	g := &simGrid{e: simbackend.NewEngine(epoch, 1), sites: map[string]*simbackend.Site{}, st: st}
	var cfgs []bridge.SiteConfig
	for _, n := range order {
		s, err := simbackend.NewSite(g.e, simbackend.SiteConfig{Name: n, Nodes: nodes[n]})
		if err != nil {
			t.Fatal(err)
		}
		g.sites[n] = s
		cfgs = append(cfgs, bridge.SiteConfig{Name: n, Backend: s, H: 1, Simulated: true})
	}
	pl, err := coalloc.ByName("greedy-easy")
	if err != nil {
		t.Fatal(err)
	}
	g.b, err = bridge.New(bridge.Options{Sites: cfgs, Planner: pl, Store: st, MultiSite: 1, BindLead: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// run advances virtual time in steps, binding and cycling at each.
func (g *simGrid) run(t *testing.T, until time.Time, step time.Duration) {
	t.Helper()
	ctx := context.Background()
	for now := g.e.Now(); !now.After(until); now = now.Add(step) {
		g.e.RunUntil(now)
		if _, err := g.b.BindReservations(ctx, now); err != nil {
			t.Fatal(err)
		}
		if _, err := g.b.Cycle(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
}

func window(req bridge.Request, from, to time.Duration) bridge.Request {
	req.Window = &bridge.Window{Earliest: epoch.Add(from), Latest: epoch.Add(to)}
	return req
}

func resvReq(name string, nodes int, walltime time.Duration) bridge.Request {
	return bridge.Request{Name: name, Command: []string{"true"}, Nodes: nodes, Estimate: walltime}
}

func logEvents(t *testing.T, j *bridge.Job) {
	t.Helper()
	for _, e := range j.Events {
		t.Logf("%s %s %-10s %-6s %s", j.ID, e.Time.Sub(epoch), e.Kind, e.Site, e.Msg)
	}
}

func hasEvent(j *bridge.Job, kind string) bool {
	return slices.ContainsFunc(j.Events, func(e bridge.Event) bool { return e.Kind == kind })
}

func TestReservationAdmittedBoundAndRun(t *testing.T) {
	ctx := context.Background()
	g := newSimGrid(t, bridge.NewMemStore(), map[string]int{"A": 8, "B": 4}, "A", "B")
	j, err := g.b.Submit(ctx, window(resvReq("r1", 6, 10*time.Minute), 15*time.Minute, 45*time.Minute), epoch)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != bridge.Reserved || j.Resv == nil || j.Resv.State != bridge.ResvAdmitted {
		t.Fatalf("after submit: state %s resv %+v; want reserved/admitted", j.State, j.Resv)
	}
	if !hasEvent(j, "admitted") {
		t.Fatalf("no admitted event: %+v", j.Events)
	}
	// Before the window (minus the lead) nothing is booked at any site.
	g.run(t, epoch.Add(14*time.Minute), time.Minute)
	if _, err := g.sites["A"].ShowReservation(ctx, backends.ResvID(bridge.ResvName(j.ID))); err == nil {
		t.Fatal("a native reservation exists before the window opens: binding must be late")
	}
	g.run(t, epoch.Add(15*time.Minute), 10*time.Second)
	got, _ := g.b.Job(j.ID)
	if got.Resv.State != bridge.ResvBound || got.Resv.Site != "A" || got.Resv.Native == "" {
		t.Fatalf("after the window opened: resv %+v; want bound at A (only A has 6 nodes)", got.Resv)
	}
	rv, err := g.sites["A"].ShowReservation(ctx, got.Resv.Native)
	if err != nil {
		t.Fatalf("the native reservation is not at A: %v", err)
	}
	if rv.Nodes != 6 || !rv.Start.Equal(epoch.Add(15*time.Minute)) {
		t.Fatalf("native reservation %+v; want 6 nodes from +15m", rv)
	}
	if got.State != bridge.Dispatched && got.State != bridge.Running {
		t.Fatalf("state %s; want the job submitted into its reservation", got.State)
	}
	g.run(t, epoch.Add(30*time.Minute), 10*time.Second)
	got, _ = g.b.Job(j.ID)
	if got.State != bridge.Completed {
		t.Fatalf("state %s (%s); want completed", got.State, got.Reason)
	}
	if got.Start.Before(epoch.Add(15 * time.Minute)) {
		t.Fatalf("started %s, before its window", got.Start)
	}
	logEvents(t, got)
	if got.Resv.State != bridge.ResvReleased {
		t.Fatalf("resv state %s; want released after the job ended", got.Resv.State)
	}
	if _, err := g.sites["A"].ShowReservation(ctx, got.Resv.Native); err == nil {
		t.Fatal("the native reservation outlived its job")
	}
}

func TestReservationAdmissionRefusesWithReason(t *testing.T) {
	ctx := context.Background()
	g := newSimGrid(t, bridge.NewMemStore(), map[string]int{"A": 8, "B": 4}, "A", "B")
	first, err := g.b.Submit(ctx, window(resvReq("r1", 6, 10*time.Minute), 15*time.Minute, 25*time.Minute), epoch)
	if err != nil || first.State != bridge.Reserved {
		t.Fatalf("first: %v %v", first, err)
	}
	// Only A holds 6 nodes, and the windows overlap: no free resource left.
	second, err := g.b.Submit(ctx, window(resvReq("r2", 6, 10*time.Minute), 20*time.Minute, 30*time.Minute), epoch)
	if err != nil {
		t.Fatal(err)
	}
	if second.State != bridge.Rejected || !strings.Contains(second.Reason, "reservation not admitted") {
		t.Fatalf("second: state %s reason %q; want rejected by admission", second.State, second.Reason)
	}
	// A window that does not overlap is fine.
	third, err := g.b.Submit(ctx, window(resvReq("r3", 6, 10*time.Minute), time.Hour, 2*time.Hour), epoch)
	if err != nil || third.State != bridge.Reserved {
		t.Fatalf("third: %+v %v; want reserved", third, err)
	}
	// Too many nodes for any site: refused with the reason.
	wide, err := g.b.Submit(ctx, window(resvReq("wide", 9, 10*time.Minute), time.Hour, 2*time.Hour), epoch)
	if err != nil || wide.State != bridge.Rejected {
		t.Fatalf("wide: %+v %v; want rejected", wide, err)
	}
	// A window shorter than the walltime is a bad request, not a job.
	_, err = g.b.Submit(ctx, window(resvReq("short", 1, 30*time.Minute), time.Hour, time.Hour+10*time.Minute), epoch)
	if !errors.Is(err, bridge.ErrBadRequest) || !strings.Contains(err.Error(), "shorter than the walltime") {
		t.Fatalf("short window: %v; want ErrBadRequest naming the walltime", err)
	}
}

// A grid job that was running before the reservation was admitted is in
// the way at binding: with no slack to delay into, it is restarted.
func TestReservationPreemptsAGridJobWithoutSlack(t *testing.T) {
	ctx := context.Background()
	g := newSimGrid(t, bridge.NewMemStore(), map[string]int{"A": 4}, "A")
	long, err := g.b.Submit(ctx, resvReq("long", 4, 2*time.Hour), epoch)
	if err != nil {
		t.Fatal(err)
	}
	g.run(t, epoch.Add(time.Minute), 10*time.Second) // it runs before any reservation is asked for
	r, err := g.b.Submit(ctx, window(resvReq("r", 4, 10*time.Minute), 20*time.Minute, 30*time.Minute), epoch.Add(time.Minute))
	if err != nil || r.State != bridge.Reserved {
		t.Fatalf("reservation: %+v %v", r, err)
	}
	g.run(t, epoch.Add(21*time.Minute), 10*time.Second)
	got, _ := g.b.Job(r.ID)
	if got.Resv.State != bridge.ResvBound && got.Resv.State != bridge.ResvReleased {
		t.Fatalf("resv %+v; want bound", got.Resv)
	}
	if !slices.Contains(got.Resv.Preempted, long.ID) || got.Resv.Cost <= 0 {
		t.Fatalf("resv preempted %v cost %g; want %s restarted at a positive cost", got.Resv.Preempted, got.Resv.Cost, long.ID)
	}
	l, _ := g.b.Job(long.ID)
	if !hasEvent(l, "preempted") {
		t.Fatalf("the long job has no preempted event: %+v", l.Events)
	}
	g.run(t, epoch.Add(35*time.Minute), 10*time.Second)
	got, _ = g.b.Job(r.ID)
	if got.State != bridge.Completed {
		t.Fatalf("reserved job %s (%s); want completed", got.State, got.Reason)
	}
	l, _ = g.b.Job(long.ID)
	logEvents(t, got)
	logEvents(t, l)
	if l.State.Final() && l.State != bridge.Completed {
		t.Fatalf("the preempted job ended %s: it must be restarted, not lost", l.State)
	}
}

func TestReservationFailsWhenItsOnlySiteFails(t *testing.T) {
	ctx := context.Background()
	g := newSimGrid(t, bridge.NewMemStore(), map[string]int{"A": 8, "B": 4}, "A", "B")
	r, err := g.b.Submit(ctx, window(resvReq("r", 6, 10*time.Minute), 15*time.Minute, 45*time.Minute), epoch)
	if err != nil || r.State != bridge.Reserved {
		t.Fatalf("%+v %v", r, err)
	}
	g.sites["A"].SetDown("maintenance")
	g.run(t, epoch.Add(15*time.Minute), time.Minute)
	got, _ := g.b.Job(r.ID)
	if got.State != bridge.Failed || got.Resv.State != bridge.ResvFailed || !strings.Contains(got.Reason, "site A failed") {
		t.Fatalf("state %s resv %+v reason %q; want failed naming site A", got.State, got.Resv, got.Reason)
	}
}

// A crash between recording the binding intent and learning the native
// reservation's id: after a restart the reservation is found by its tagged
// name and adopted, not made twice.
func TestReservationBindingIntentSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	st := bridge.NewMemStore()
	g := newSimGrid(t, st, map[string]int{"A": 8}, "A")
	r, err := g.b.Submit(ctx, window(resvReq("r", 4, 10*time.Minute), 15*time.Minute, 45*time.Minute), epoch)
	if err != nil {
		t.Fatal(err)
	}
	// What the crashed broker had done: the intent is stored, the native
	// reservation made, its id never recorded.
	j, _ := st.Get(ctx, r.ID)
	j.Resv.State, j.Resv.Site, j.Resv.Start = bridge.ResvBinding, "A", epoch.Add(15*time.Minute)
	if err := st.Put(ctx, j); err != nil {
		t.Fatal(err)
	}
	g.e.RunUntil(epoch.Add(14*time.Minute + 40*time.Second))
	id, err := g.sites["A"].CreateReservation(ctx, &backends.ReservationSpec{Name: bridge.ResvName(r.ID), Start: epoch.Add(15 * time.Minute), Duration: 10 * time.Minute, Nodes: 4})
	if err != nil {
		t.Fatal(err)
	}
	// A new broker on the same store and sites.
	pl, _ := coalloc.ByName("greedy-easy")
	b2, err := bridge.New(bridge.Options{Sites: []bridge.SiteConfig{{Name: "A", Backend: g.sites["A"], H: 1, Simulated: true}},
		Planner: pl, Store: st, MultiSite: 1, BindLead: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := b2.Recover(ctx, g.e.Now())
	if err != nil || rep.Reserved != 1 {
		t.Fatalf("recover: %+v %v; want one reserved job", rep, err)
	}
	g.b = b2
	g.run(t, epoch.Add(30*time.Minute), 10*time.Second)
	got, _ := b2.Job(r.ID)
	if got.State != bridge.Completed || got.Resv.Native != id {
		t.Fatalf("state %s (%s), native %q; want completed inside the adopted reservation %q", got.State, got.Reason, got.Resv.Native, id)
	}
}

// Trust scores reach the policy's snapshot.
func TestSetTrustReachesThePolicy(t *testing.T) {
	ctx := context.Background()
	e := simbackend.NewEngine(epoch, 1)
	s, _ := simbackend.NewSite(e, simbackend.SiteConfig{Name: "A", Nodes: 2})
	var seen []float64
	pl := plannerFunc(func(sn *policy.Snapshot) { seen = append(seen, sn.Sites[0].Trust) })
	b, err := bridge.New(bridge.Options{Sites: []bridge.SiteConfig{{Name: "A", Backend: s, Simulated: true}}, Planner: pl})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Submit(ctx, resvReq("j", 1, time.Minute), epoch); err != nil {
		t.Fatal(err)
	}
	b.Cycle(ctx, epoch)
	b.SetTrust(map[string]float64{"A": 0.25, "nosuch": 1})
	b.Cycle(ctx, epoch.Add(time.Second))
	// A score the policy would refuse is ignored, not passed on.
	b.SetTrust(map[string]float64{"A": 1.5})
	b.SetTrust(map[string]float64{"A": math.NaN()})
	b.Cycle(ctx, epoch.Add(2*time.Second))
	if len(seen) != 3 || seen[0] != 0 || seen[1] != 0.25 || seen[2] != 0.25 {
		t.Fatalf("trust seen by the policy %v; want [0 0.25 0.25]", seen)
	}
}

type plannerFunc func(*policy.Snapshot)

func (plannerFunc) Name() string { return "probe" }
func (f plannerFunc) Plan(_ context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	f(s)
	return &policy.Plan{}, nil
}

// Cancelling a job that waits for its reservation frees the window: an
// overlapping request refused before is admitted after.
func TestCancelledReservationFreesItsWindow(t *testing.T) {
	ctx := context.Background()
	g := newSimGrid(t, bridge.NewMemStore(), map[string]int{"A": 8}, "A")
	first, _ := g.b.Submit(ctx, window(resvReq("r1", 6, 10*time.Minute), 15*time.Minute, 25*time.Minute), epoch)
	if r, _ := g.b.Submit(ctx, window(resvReq("r2", 6, 10*time.Minute), 15*time.Minute, 25*time.Minute), epoch); r.State != bridge.Rejected {
		t.Fatalf("overlapping request: %s; want rejected", r.State)
	}
	if err := g.b.Cancel(ctx, first.ID, epoch.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, _ := g.b.Job(first.ID)
	if got.State != bridge.Cancelled || got.Resv.State != bridge.ResvReleased {
		t.Fatalf("cancelled: %s, reservation %s", got.State, got.Resv.State)
	}
	if r, _ := g.b.Submit(ctx, window(resvReq("r3", 6, 10*time.Minute), 15*time.Minute, 25*time.Minute), epoch.Add(time.Minute)); r.State != bridge.Reserved {
		t.Fatalf("after the cancel: %s (%s); want reserved", r.State, r.Reason)
	}
	if g.b.Idle() {
		t.Fatal("a broker with a job waiting for its reservation says it is idle")
	}
}

// drained reports fewer nodes than its simulated site has, as a site whose
// nodes were drained does; 0 reports the site as it is.
type drained struct {
	*simbackend.Site
	nodes int
}

func (d *drained) Info(ctx context.Context) (*backends.SiteInfo, error) {
	in, err := d.Site.Info(ctx)
	if err != nil || d.nodes == 0 {
		return in, err
	}
	c := *in
	c.Nodes, c.FreeNodes = d.nodes, min(c.FreeNodes, d.nodes)
	return &c, nil
}

// A site that shrinks re-runs admission on its waiting reservations when
// the broker next asks it how it is (binding asks every site; so does a
// cycle with jobs queued): one that no longer fits fails with the reason,
// one that still fits is bound and runs; once the site has grown back, a
// wide request is admitted again.
func TestShrunkSiteFailsReservations(t *testing.T) {
	ctx := context.Background()
	e := simbackend.NewEngine(epoch, 1)
	s, err := simbackend.NewSite(e, simbackend.SiteConfig{Name: "A", Nodes: 8})
	if err != nil {
		t.Fatal(err)
	}
	d := &drained{Site: s}
	pl, _ := coalloc.ByName("greedy-easy")
	b, err := bridge.New(bridge.Options{Sites: []bridge.SiteConfig{{Name: "A", Backend: d, H: 1, Simulated: true}},
		Planner: pl, MultiSite: 1, BindLead: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	wide, _ := b.Submit(ctx, window(resvReq("wide", 6, 10*time.Minute), 15*time.Minute, 25*time.Minute), epoch)
	narrow, _ := b.Submit(ctx, window(resvReq("narrow", 2, 10*time.Minute), 15*time.Minute, 25*time.Minute), epoch)
	if wide.State != bridge.Reserved || narrow.State != bridge.Reserved {
		t.Fatalf("states %s, %s; want both reserved", wide.State, narrow.State)
	}
	// What the daemon's tasks do: bind and cycle.
	step := func(now time.Time) {
		t.Helper()
		e.RunUntil(now)
		if _, err := b.BindReservations(ctx, now); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Cycle(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	d.nodes = 4
	now := epoch
	for ; now.Before(epoch.Add(15 * time.Minute)); now = now.Add(10 * time.Second) {
		step(now)
	}
	w, _ := b.Job(wide.ID)
	if w.State != bridge.Failed || !strings.Contains(w.Reason, "site A shrank from 8 to 4 nodes") {
		t.Fatalf("wide: %s (%s); want failed because A shrank", w.State, w.Reason)
	}
	if r, _ := b.Submit(ctx, window(resvReq("wide2", 6, 10*time.Minute), 40*time.Minute, 50*time.Minute), now); r.State != bridge.Rejected {
		t.Fatalf("a 6-node request on a 4-node site: %s; want rejected", r.State)
	}
	for end := now.Add(15 * time.Minute); now.Before(end); now = now.Add(10 * time.Second) {
		step(now)
	}
	if n, _ := b.Job(narrow.ID); n.State != bridge.Completed || n.Start.Before(epoch.Add(15*time.Minute)) {
		t.Fatalf("narrow: %s from %s (%s); want completed inside its window", n.State, n.Start.Sub(epoch), n.Reason)
	}
	d.nodes = 0 // back to 8
	step(now)
	if r, _ := b.Submit(ctx, window(resvReq("wide3", 6, 10*time.Minute), 60*time.Minute, 70*time.Minute), now); r.State != bridge.Reserved {
		t.Fatalf("a 6-node request once A has 8 nodes again: %s (%s); want reserved", r.State, r.Reason)
	}
}

// A grid job that would still run when an admitted window opens is not
// started where the window needs its nodes: a short job that ends before
// the window starts at once, the long one waits, the reservation binds
// without preempting anything, and the long job runs after it — nothing
// is killed for nothing.
func TestReservationHoldsBackAJobThatWouldRunIntoIt(t *testing.T) {
	ctx := context.Background()
	g := newSimGrid(t, bridge.NewMemStore(), map[string]int{"A": 4}, "A")
	r, err := g.b.Submit(ctx, window(resvReq("r", 4, 10*time.Minute), 20*time.Minute, 30*time.Minute), epoch)
	if err != nil || r.State != bridge.Reserved {
		t.Fatalf("reservation: %+v %v", r, err)
	}
	short, err := g.b.Submit(ctx, resvReq("short", 4, 10*time.Minute), epoch)
	if err != nil {
		t.Fatal(err)
	}
	g.run(t, epoch.Add(time.Minute), 10*time.Second)
	if s, _ := g.b.Job(short.ID); s.State != bridge.Dispatched && s.State != bridge.Running && s.State != bridge.Completed {
		t.Fatalf("short job %s (%s): it ends before the window and must start", s.State, s.Reason)
	}
	long, err := g.b.Submit(ctx, resvReq("long", 4, 2*time.Hour), epoch.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	g.run(t, epoch.Add(15*time.Minute), 10*time.Second)
	l, _ := g.b.Job(long.ID)
	if l.State != bridge.Queued || !strings.Contains(l.Reason, "not started at A") || !strings.Contains(l.Reason, "admitted reservation window") {
		t.Fatalf("long job before the window: %s (%q); want queued, held back for the window", l.State, l.Reason)
	}
	g.run(t, epoch.Add(45*time.Minute), 10*time.Second)
	got, _ := g.b.Job(r.ID)
	if got.State != bridge.Completed || len(got.Resv.Preempted) != 0 || got.Start.Before(epoch.Add(20*time.Minute)) {
		t.Fatalf("reservation: %s (%s), preempted %v, start %s; want completed in its window, nothing preempted", got.State, got.Reason, got.Resv.Preempted, got.Start)
	}
	l, _ = g.b.Job(long.ID)
	logEvents(t, l)
	if hasEvent(l, "preempted") || l.Attempts != 1 || l.Start.Before(got.End) {
		t.Fatalf("long job: attempts %d, start %s (reservation ended %s); want one attempt after the reservation, never preempted", l.Attempts, l.Start, got.End)
	}
	if l.Reason != "" && strings.HasPrefix(l.Reason, "not started") {
		t.Fatalf("long job runs, yet its reason still says %q", l.Reason)
	}
}

// A job held back from the site an admitted window needs is started at
// another of its sites instead, at once.
func TestReservationHeldBackJobGoesElsewhere(t *testing.T) {
	ctx := context.Background()
	g := newSimGrid(t, bridge.NewMemStore(), map[string]int{"A": 4, "B": 4}, "A", "B")
	rq := window(resvReq("r", 4, 10*time.Minute), 20*time.Minute, 30*time.Minute)
	rq.Sites = []string{"A"}
	r, err := g.b.Submit(ctx, rq, epoch)
	if err != nil || r.State != bridge.Reserved {
		t.Fatalf("reservation: %+v %v", r, err)
	}
	long, err := g.b.Submit(ctx, resvReq("long", 4, 2*time.Hour), epoch)
	if err != nil {
		t.Fatal(err)
	}
	g.run(t, epoch.Add(time.Minute), 10*time.Second)
	l, _ := g.b.Job(long.ID)
	logEvents(t, l)
	if l.State != bridge.Running || l.Sites() != "B:4" {
		t.Fatalf("long job: %s on %s (%s); want running at B", l.State, l.Sites(), l.Reason)
	}
	g.run(t, epoch.Add(35*time.Minute), 10*time.Second)
	got, _ := g.b.Job(r.ID)
	if got.State != bridge.Completed || len(got.Resv.Preempted) != 0 {
		t.Fatalf("reservation: %s, preempted %v", got.State, got.Resv.Preempted)
	}
}
