package bridge

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// queueSite is a fake batch system with a queue: jobs wait (pending)
// until the test starts them; Info reports the running jobs' nodes with
// the ends of their time limits, plus foreign holds, as a real site's
// busy profile; Withdraw removes a job only while it waits.
type queueSite struct {
	*fakeSite
	foreign         []backends.Allocation        // nodes held by jobs not of this broker
	until           map[backends.JobID]time.Time // running jobs' time-limit ends
	startOnWithdraw bool                         // the job starts just before the withdrawal reaches the site
	withdrawErr     error                        // the site does not answer withdrawals
	withdraws       int                          // Withdraw calls
	starts          map[string]int               // grid job -> remote jobs of it that started
	log             *[]string                    // shared record of starts, "site tag"
	clock           func() time.Time             // for running jobs' limits
}

var _ backends.Withdrawer = (*queueSite)(nil)

func newQueueSite(name string, nodes int, clock func() time.Time) *queueSite {
	return &queueSite{fakeSite: newFake(name, nodes), until: map[backends.JobID]time.Time{}, starts: map[string]int{},
		clock: clock}
}

func (q *queueSite) Info(context.Context) (*backends.SiteInfo, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	in := &backends.SiteInfo{Name: q.name, Nodes: q.nodes, FreeNodes: q.nodes}
	for _, a := range q.foreign {
		in.FreeNodes -= a.Nodes
		in.Busy = append(in.Busy, a)
	}
	for id, st := range q.jobs {
		if st.State == backends.StateRunning {
			n := q.specs[id].Nodes
			in.FreeNodes -= n
			in.Busy = append(in.Busy, backends.Allocation{Nodes: n, Until: q.until[id]})
		}
	}
	return in, nil
}

func (q *queueSite) Withdraw(_ context.Context, id backends.JobID) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.withdraws++
	if q.withdrawErr != nil {
		return q.withdrawErr
	}
	st, ok := q.jobs[id]
	if !ok {
		return nil
	}
	if q.startOnWithdraw && st.State == backends.StatePending {
		q.startLocked(id)
	}
	switch st.State {
	case backends.StatePending:
		st.State = backends.StateCancelled
		return nil
	case backends.StateCancelled, backends.StateLost:
		return nil
	}
	return fmt.Errorf("%w: %s is %s", backends.ErrStarted, id, st.State)
}

// startLocked starts a pending remote job. q.mu held.
func (q *queueSite) startLocked(id backends.JobID) {
	st := q.jobs[id]
	st.State = backends.StateRunning
	st.Start = q.clock()
	q.until[id] = q.clock().Add(q.specs[id].Walltime)
	gid, _, _ := strings.Cut(st.GridID, "-a")
	q.starts[gid]++
	if q.log != nil {
		*q.log = append(*q.log, q.name+" "+st.GridID)
	}
}

// startTag starts the pending remote job carrying tag.
func (q *queueSite) startTag(tag string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for id, st := range q.jobs {
		if st.GridID == tag && st.State == backends.StatePending {
			q.startLocked(id)
			return true
		}
	}
	return false
}

// endRunning ends the running remote jobs of grid job gid with exit 0.
func (q *queueSite) endRunning(gid string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, st := range q.jobs {
		if strings.HasPrefix(st.GridID, gid+"-a") && st.State == backends.StateRunning {
			st.State, st.ExitCode, st.End = backends.StateCompleted, 0, q.clock()
		}
	}
}

// live lists the tags of the site's pending or running remote jobs.
func (q *queueSite) live() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, st := range q.jobs {
		if !st.State.Final() {
			out = append(out, st.GridID+":"+st.State.String())
		}
	}
	return out
}

// plainSite is a queueSite without the Withdrawer capability.
type plainSite struct{ q *queueSite }

func (p plainSite) Name() string                                         { return p.q.name }
func (p plainSite) Info(ctx context.Context) (*backends.SiteInfo, error) { return p.q.Info(ctx) }
func (p plainSite) Submit(ctx context.Context, s *backends.JobSpec) (backends.JobID, error) {
	return p.q.Submit(ctx, s)
}
func (p plainSite) Status(ctx context.Context, ids []backends.JobID) ([]backends.JobStatus, error) {
	return p.q.Status(ctx, ids)
}
func (p plainSite) Cancel(ctx context.Context, id backends.JobID) error { return p.q.Cancel(ctx, id) }

// onSite always places a job, whole, at the given site index (a planner
// that thought it best): the job waits there when the site is busy.
func onSite(site int) func(*policy.Snapshot, policy.Job) *policy.Decision {
	return func(s *policy.Snapshot, j policy.Job) *policy.Decision {
		return &policy.Decision{Job: j.ID, Action: policy.Start, Chosen: policy.Option{Parts: []policy.Part{{Site: site, Nodes: j.Width}}}}
	}
}

func remapBroker(t *testing.T, o *RemapOptions, store Store, dec func(*policy.Snapshot, policy.Job) *policy.Decision, sites ...backends.Backend) *Broker {
	t.Helper()
	var sc []SiteConfig
	for _, s := range sites {
		sc = append(sc, SiteConfig{Name: s.Name(), Backend: s, H: 1})
	}
	b, err := New(Options{Sites: sc, Planner: scriptPlanner{dec}, Remap: o, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func eventsOf(j *Job) string {
	var sb strings.Builder
	for _, e := range j.Events {
		fmt.Fprintf(&sb, "  %s %s: %s\n", e.Time.Format("15:04:05"), e.Kind, e.Msg)
	}
	return sb.String()
}

// waitingAtA submits one job that waits at A behind a foreign job holding
// A until t0+2h, while B is busy until t0+3h; the returned now is t0.
func waitingAtA(t *testing.T, o *RemapOptions) (*Broker, *queueSite, *queueSite, *Job, *time.Time) {
	t.Helper()
	now := t0
	clock := func() time.Time { return now }
	a, bb := newQueueSite("A", 2, clock), newQueueSite("B", 2, clock)
	a.foreign = []backends.Allocation{{Nodes: 2, Until: t0.Add(2 * time.Hour)}}
	bb.foreign = []backends.Allocation{{Nodes: 2, Until: t0.Add(3 * time.Hour)}}
	b := remapBroker(t, o, nil, onSite(0), a, bb)
	r := req(2)
	r.Estimate = 30 * time.Minute
	j, err := b.Submit(context.Background(), r, now)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, now)
	if got := mustJob(t, b, j.ID); got.State != Dispatched || got.Sites() != "A:2" {
		t.Fatalf("setup: %s at %s", got.State, got.Sites())
	}
	return b, a, bb, j, &now
}

func TestRemapMovesWaitingJobWhenAnotherSiteFreesUp(t *testing.T) {
	b, a, bb, j, now := waitingAtA(t, &RemapOptions{})
	*now = t0.Add(time.Minute)
	mustCycle(t, b, *now)
	if got := mustJob(t, b, j.ID); got.Sites() != "A:2" || got.Moving != nil || a.withdraws != 0 {
		t.Fatalf("B is busy longer than A: the job must stay at A, got %s, %d withdrawals", got.Sites(), a.withdraws)
	}
	bb.foreign = nil // B frees up
	*now = t0.Add(10 * time.Minute)
	mustCycle(t, b, *now)
	got := mustJob(t, b, j.ID)
	if got.State != Dispatched || got.Sites() != "B:2" || got.Attempts != 2 || got.Moves != 1 || got.Moving != nil {
		t.Fatalf("after B freed up: %s at %s, attempt %d, moves %d, moving %v\n%s", got.State, got.Sites(), got.Attempts, got.Moves, got.Moving, eventsOf(got))
	}
	// predicted start at A 12:00 (the foreign job's limit); run 30m either
	// way; B starts now (10:10): gain 1h50m.
	if !hasEvent(got, EventMoved, "moved from A (predicted start 12:00 UTC) to B (start now): gain 1h50m (move 1 of 2)") {
		t.Fatalf("no moved event in the user's words:\n%s", eventsOf(got))
	}
	if l := a.live(); len(l) != 0 {
		t.Fatalf("A still holds %v", l)
	}
	if _, err := b.ExplainJob(context.Background(), j.ID, *now); err == nil || !strings.Contains(err.Error(), "last move: moved from A") {
		t.Fatalf("explain of a moved job: %v, want it to name the move", err)
	}
	if l := bb.live(); len(l) != 1 || l[0] != RemoteTag(j.ID, 2)+":pending" {
		t.Fatalf("B holds %v, want the second attempt's tag once", l)
	}
	// The withdrawn component is not read as a failure by later polls.
	bb.startTag(RemoteTag(j.ID, 2))
	*now = t0.Add(11 * time.Minute)
	mustCycle(t, b, *now)
	bb.endRunning(j.ID)
	*now = t0.Add(45 * time.Minute)
	mustCycle(t, b, *now)
	if got = mustJob(t, b, j.ID); got.State != Completed || a.starts[j.ID] != 0 || bb.starts[j.ID] != 1 {
		t.Fatalf("want completed, run once at B: %s, starts A %d B %d\n%s", got.State, a.starts[j.ID], bb.starts[j.ID], eventsOf(got))
	}
}

func TestRemapGainBelowThresholdNoMove(t *testing.T) {
	b, a, bb, j, now := waitingAtA(t, &RemapOptions{MinGain: 3 * time.Hour})
	bb.foreign = nil
	*now = t0.Add(10 * time.Minute)
	mustCycle(t, b, *now)
	if got := mustJob(t, b, j.ID); got.Sites() != "A:2" || got.Moves != 0 || a.withdraws != 0 {
		t.Fatalf("gain 1h50m < min_gain 3h: must stay at A, got %s, %d withdrawals\n%s", got.Sites(), a.withdraws, eventsOf(got))
	}
}

func TestRemapRespectsMaxMoves(t *testing.T) {
	for _, max := range []int{1, 2} {
		t.Run(fmt.Sprint("max", max), func(t *testing.T) {
			b, a, bb, j, now := waitingAtA(t, &RemapOptions{MaxMoves: max, MinGain: time.Minute})
			bb.foreign = nil
			*now = t0.Add(10 * time.Minute)
			mustCycle(t, b, *now)
			if got := mustJob(t, b, j.ID); got.Sites() != "B:2" {
				t.Fatalf("first move: at %s", got.Sites())
			}
			// Now B is taken by a long foreign job before ours starts and A
			// frees up: a second move would gain.
			bb.foreign = []backends.Allocation{{Nodes: 2, Until: t0.Add(5 * time.Hour)}}
			a.foreign = nil
			*now = t0.Add(20 * time.Minute)
			mustCycle(t, b, *now)
			got := mustJob(t, b, j.ID)
			want := map[int]string{1: "B:2", 2: "A:2"}[max]
			if got.Sites() != want || got.Moves != max {
				t.Fatalf("max_moves %d: at %s after %d moves, want %s\n%s", max, got.Sites(), got.Moves, want, eventsOf(got))
			}
			if max == 2 && !hasEvent(got, EventMoved, "(move 2 of 2)") {
				t.Fatalf("second move not numbered:\n%s", eventsOf(got))
			}
			// No third move whatever happens.
			a.foreign = []backends.Allocation{{Nodes: 2, Until: t0.Add(9 * time.Hour)}}
			bb.foreign = nil
			*now = t0.Add(30 * time.Minute)
			mustCycle(t, b, *now)
			if g := mustJob(t, b, j.ID); g.Moves != max || g.Sites() != want {
				t.Fatalf("moved past max_moves %d: %d moves, at %s", max, g.Moves, g.Sites())
			}
		})
	}
}

func TestRemapStartRaceAbandonsMove(t *testing.T) {
	b, a, bb, j, now := waitingAtA(t, &RemapOptions{})
	bb.foreign = nil
	a.startOnWithdraw = true // the job starts at A just before the withdrawal lands
	*now = t0.Add(10 * time.Minute)
	mustCycle(t, b, *now)
	got := mustJob(t, b, j.ID)
	if got.Sites() != "A:2" || got.Attempts != 1 || got.Moves != 0 || got.Moving != nil || !hasEvent(got, EventMoveAbandoned, "started at A before it could be withdrawn") {
		t.Fatalf("start race: want the job kept at A with a move-abandoned event, got %s attempt %d\n%s", got.Sites(), got.Attempts, eventsOf(got))
	}
	if l := bb.live(); len(l) != 0 {
		t.Fatalf("nothing may reach B, got %v", l)
	}
	*now = t0.Add(11 * time.Minute)
	mustCycle(t, b, *now)
	if got = mustJob(t, b, j.ID); got.State != Running || a.starts[j.ID] != 1 {
		t.Fatalf("the job runs at A once: %s, %d starts", got.State, a.starts[j.ID])
	}
}

func TestRemapWithdrawUnansweredTriedAgain(t *testing.T) {
	b, a, bb, j, now := waitingAtA(t, &RemapOptions{})
	bb.foreign = nil
	a.withdrawErr = fmt.Errorf("%w: ssh: connection lost", backends.ErrUnavailable)
	*now = t0.Add(10 * time.Minute)
	mustCycle(t, b, *now)
	got := mustJob(t, b, j.ID)
	if got.Moving == nil || got.Moving.Phase != MoveWithdraw || !hasEvent(got, EventMoveWait, "tried again next cycle") || len(bb.live()) != 0 {
		t.Fatalf("unanswered withdrawal: want the intent kept and nothing at B, got %+v, B %v\n%s", got.Moving, bb.live(), eventsOf(got))
	}
	a.withdrawErr = nil
	*now = t0.Add(11 * time.Minute)
	mustCycle(t, b, *now)
	if got = mustJob(t, b, j.ID); got.Sites() != "B:2" || len(a.live()) != 0 || len(bb.live()) != 1 {
		t.Fatalf("after the site answers: at %s, A %v, B %v\n%s", got.Sites(), a.live(), bb.live(), eventsOf(got))
	}
}

func TestRemapCoAllocatedAllOrNone(t *testing.T) {
	setup := func(t *testing.T) (*Broker, *queueSite, *queueSite, *queueSite, *Job, *time.Time) {
		now := t0
		clock := func() time.Time { return now }
		a, bb, c := newQueueSite("A", 2, clock), newQueueSite("B", 2, clock), newQueueSite("C", 4, clock)
		a.foreign = []backends.Allocation{{Nodes: 2, Until: t0.Add(2 * time.Hour)}}
		bb.foreign = []backends.Allocation{{Nodes: 2, Until: t0.Add(2 * time.Hour)}}
		c.foreign = []backends.Allocation{{Nodes: 4, Until: t0.Add(4 * time.Hour)}}
		split := func(s *policy.Snapshot, j policy.Job) *policy.Decision {
			return &policy.Decision{Job: j.ID, Action: policy.Start, Chosen: policy.Option{Parts: []policy.Part{{Site: 0, Nodes: 2}, {Site: 1, Nodes: 2}}}}
		}
		b := remapBroker(t, &RemapOptions{}, nil, split, a, bb, c)
		r := req(4)
		r.Estimate = 30 * time.Minute
		j, err := b.Submit(context.Background(), r, now)
		if err != nil {
			t.Fatal(err)
		}
		mustCycle(t, b, now)
		c.foreign = nil
		now = t0.Add(10 * time.Minute)
		return b, a, bb, c, j, &now
	}
	t.Run("all move", func(t *testing.T) {
		b, a, bb, c, j, now := setup(t)
		mustCycle(t, b, *now)
		got := mustJob(t, b, j.ID)
		if got.Sites() != "C:4" || len(a.live())+len(bb.live()) != 0 || len(c.live()) != 1 || !hasEvent(got, EventMoved, "moved from A:2+B:2") {
			t.Fatalf("co-allocated job: at %s, A %v B %v C %v\n%s", got.Sites(), a.live(), bb.live(), c.live(), eventsOf(got))
		}
	})
	t.Run("none move when every share started", func(t *testing.T) {
		b, a, bb, c, j, now := setup(t)
		a.startOnWithdraw, bb.startOnWithdraw = true, true
		mustCycle(t, b, *now)
		got := mustJob(t, b, j.ID)
		if got.Sites() != "A:2+B:2" || len(c.live()) != 0 || !hasEvent(got, EventMoveAbandoned, "") {
			t.Fatalf("started everywhere: at %s, C %v\n%s", got.Sites(), c.live(), eventsOf(got))
		}
	})
	t.Run("a started share goes with the others", func(t *testing.T) {
		b, a, bb, c, j, now := setup(t)
		bb.startOnWithdraw = true // only B's share starts
		mustCycle(t, b, *now)
		got := mustJob(t, b, j.ID)
		if got.Sites() != "C:4" || len(a.live())+len(bb.live()) != 0 || len(c.live()) != 1 {
			t.Fatalf("one share started: want no share left behind and the job whole at C, got %s, A %v B %v C %v\n%s",
				got.Sites(), a.live(), bb.live(), c.live(), eventsOf(got))
		}
	})
}

func TestRemapNeverMoves(t *testing.T) {
	now := t0
	clock := func() time.Time { return now }
	var a, bb *queueSite
	cases := map[string]func(r *Request) []backends.Backend{
		"pinned to one site": func(r *Request) []backends.Backend {
			r.Sites = []string{"A"}
			return nil
		},
		"site cannot withdraw": func(r *Request) []backends.Backend {
			return []backends.Backend{plainSite{a}} // the same site without Withdraw
		},
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			a, bb = newQueueSite("A", 2, clock), newQueueSite("B", 2, clock)
			a.foreign = []backends.Allocation{{Nodes: 2, Until: t0.Add(2 * time.Hour)}}
			r := req(2)
			r.Estimate = 30 * time.Minute
			sites := []backends.Backend{a, bb}
			if alt := mod(&r); alt != nil {
				sites[0] = alt[0]
			}
			bb.foreign = []backends.Allocation{{Nodes: 2, Until: t0.Add(3 * time.Hour)}}
			b := remapBroker(t, &RemapOptions{}, nil, onSite(0), sites...)
			j, err := b.Submit(context.Background(), r, t0)
			if err != nil {
				t.Fatal(err)
			}
			mustCycle(t, b, t0)
			bb.foreign = nil
			mustCycle(t, b, t0.Add(10*time.Minute))
			if got := mustJob(t, b, j.ID); got.Sites() != "A:2" || got.Moves != 0 || len(bb.live()) != 0 {
				t.Fatalf("%s: moved to %s\n%s", name, got.Sites(), eventsOf(got))
			}
		})
	}
}

// A job can wait at a site whose busy profile shows free nodes (jobs
// queued ahead of it hold them): the profile predicts "now" and nothing
// moves, until the site's own estimated start says otherwise.
func TestRemapUsesTheSitesEstimatedStart(t *testing.T) {
	now := t0
	clock := func() time.Time { return now }
	a, bb := newQueueSite("A", 2, clock), newQueueSite("B", 2, clock)
	bb.foreign = []backends.Allocation{{Nodes: 2, Until: t0.Add(time.Hour)}}
	b := remapBroker(t, &RemapOptions{}, nil, onSite(0), a, bb)
	r := req(2)
	r.Estimate = 30 * time.Minute
	j, _ := b.Submit(context.Background(), r, now)
	mustCycle(t, b, now)
	bb.foreign = nil
	now = t0.Add(5 * time.Minute)
	mustCycle(t, b, now)
	if got := mustJob(t, b, j.ID); got.Sites() != "A:2" {
		t.Fatalf("no estimate, profile says it starts now: must stay, got %s", got.Sites())
	}
	a.mu.Lock()
	for _, st := range a.jobs {
		st.Start = t0.Add(3 * time.Hour) // what SLURM's backfill scheduler reports for a pending job
	}
	a.mu.Unlock()
	now = t0.Add(6 * time.Minute)
	mustCycle(t, b, now) // the poll reads the estimate; the pass uses it
	got := mustJob(t, b, j.ID)
	if got.Sites() != "B:2" || !hasEvent(got, EventMoved, "moved from A (predicted start 13:00 UTC) to B (start now): gain 2h54m") {
		t.Fatalf("with the site's estimate: at %s\n%s", got.Sites(), eventsOf(got))
	}
}
