package plannerrpc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// hold is a hold the test's caller made (a started job's part).
type testHold struct {
	site, nodes int
	until       time.Time
}

// drive runs steps random changes and passes through want (a planner's own
// session, in process) and got (through the shim), failing at the first
// pass where the plans differ or where got's mirror does not describe
// the grid (a fresh planner's Plan on the mirror is not got's plan), when
// got has a Mirror.
// between, when set, runs before every pass (to restart the plugin...).
func drive(t *testing.T, name string, r *rand.Rand, s *policy.Snapshot, want, got policy.Session, steps int, between func(step int)) (passes, decided int) {
	t.Helper()
	now := s.Now
	var holds []testHold
	for i, st := range s.Sites {
		for _, h := range st.Busy {
			holds = append(holds, testHold{i, h.Nodes, h.Until})
		}
	}
	both := func(f func(policy.Session) error) {
		t.Helper()
		e1, e2 := f(want), f(got)
		if (e1 == nil) != (e2 == nil) {
			t.Fatalf("in process: %v; through the shim: %v", e1, e2)
		}
	}
	for step := range steps {
		switch op := r.IntN(6); {
		case op <= 1:
			for k := range 1 + r.IntN(3) {
				j := randJob(r, fmt.Sprintf("n%d-%d", step, k), now, len(s.Sites))
				both(func(ss policy.Session) error { ss.Submit(j); return nil })
			}
		case op == 2 && len(holds) > 0:
			k := r.IntN(len(holds))
			h := holds[k]
			holds = append(holds[:k], holds[k+1:]...)
			both(func(ss policy.Session) error { return ss.Release(h.site, h.nodes, h.until) })
		case op == 3:
			now = now.Add(time.Duration(r.IntN(900)) * time.Second)
		default:
			if between != nil {
				between(step)
			}
			var ref *policy.Plan
			if mg, ok := got.(interface{ Mirror() *policy.Snapshot }); ok {
				m := mg.Mirror()
				m.Now = now
				var err error
				if ref, err = builtin(t, name).Plan(context.Background(), m); err != nil {
					t.Fatal(err)
				}
			}
			p1, err := want.Plan(context.Background(), now)
			if err != nil {
				t.Fatal(err)
			}
			p2, err := got.Plan(context.Background(), now)
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			samePlan(t, fmt.Sprintf("%s step %d, shim vs in process", name, step), p1, p2)
			if ref != nil {
				samePlan(t, fmt.Sprintf("%s step %d, shim vs a fresh Plan on the mirror", name, step), ref, p2)
			}
			passes++
			for _, d := range p1.Decisions {
				if d.Action == policy.Reserve {
					continue
				}
				decided++
				for _, part := range d.Chosen.Parts {
					until := now.Add(d.Chosen.End().Sub(now).Round(time.Second) + time.Second)
					holds = append(holds, testHold{part.Site, part.Nodes, until})
					both(func(ss policy.Session) error { return ss.Hold(part.Site, part.Nodes, until) })
				}
			}
		}
	}
	return passes, decided
}

func incClient(t *testing.T, p policy.Planner) *Client {
	t.Helper()
	ic, ok := p.(IncrementalClient)
	if !ok {
		t.Fatalf("an Incremental planner was dispensed as a %T", p)
	}
	return ic.Client
}

// TestShimSessionMatchesInProcess: through any sequence of submissions,
// holds, releases and passes, a session through the shim plans exactly
// what the planner's own session plans in process, and its mirror is the
// grid those changes describe.
func TestShimSessionMatchesInProcess(t *testing.T) {
	for _, name := range []string{"greedy-easy", "greedy-conservative", "single-site-easy", "optimal-none"} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("%s/%d", name, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 11))
				s := randSnapshot(r, 3+r.IntN(3), r.IntN(30))
				s.Quiet = true
				p, _ := dial(t, builtin(t, name))
				inc, ok := p.(policy.Incremental)
				if !ok {
					t.Fatal("an Incremental planner was dispensed as a plain one")
				}
				got, err := inc.NewSession(s)
				if err != nil {
					t.Fatal(err)
				}
				want, err := builtin(t, name).(policy.Incremental).NewSession(s)
				if err != nil {
					t.Fatal(err)
				}
				passes, decided := drive(t, name, r, s, want, got, 120, nil)
				t.Logf("%d passes, %d jobs started or rejected", passes, decided)
				if passes < 10 || decided == 0 {
					t.Fatalf("%d passes deciding %d jobs: the sequence tests too little", passes, decided)
				}
			})
		}
	}
}

// TestShimSessionReseeds: when the plugin restarts (a new connection) or a
// pass fails, the next pass opens a new plugin session from the mirror and
// plans exactly what an uninterrupted session plans.
func TestShimSessionReseeds(t *testing.T) {
	const name = "greedy-easy"
	r := rand.New(rand.NewPCG(7, 7))
	s := randSnapshot(r, 4, 20)
	s.Quiet = true
	conns := make([]*Client, 4)
	for i := range conns {
		p, _ := dial(t, builtin(t, name))
		conns[i] = incClient(t, p)
	}
	cur := uint64(0)
	got, err := newSession(s, func() (*Client, uint64) { return conns[cur], cur })
	if err != nil {
		t.Fatal(err)
	}
	want, _ := builtin(t, name).(policy.Incremental).NewSession(s)
	reseeds := 0
	drive(t, name, r, s, want, got, 150, func(step int) {
		if step%7 == 0 && cur+1 < uint64(len(conns)) {
			cur++ // the plugin restarted: a new process, none of the old sessions
			reseeds++
		}
		if step%5 == 0 {
			// The plugin lost the session (as after a pass that failed
			// half way): only the next open brings it back.
			conns[cur].closeSession(context.Background(), got.id)
			got.drop()
		}
	})
	if reseeds == 0 {
		t.Fatal("the session never moved to a new plugin")
	}
}

// TestSessionChecksChangesLocally: a release of a hold never made, a hold
// at a site that does not exist, and a pass back in time fail on the host,
// before any RPC; a closed session refuses to plan.
func TestSessionChecksChangesLocally(t *testing.T) {
	s := &policy.Snapshot{Now: t0, Quiet: true, Sites: []policy.Site{{Name: "a", Nodes: 4, Free: 4, H: 1}}}
	p, _ := dial(t, builtin(t, "greedy-easy"))
	is, err := p.(policy.Incremental).NewSession(s)
	if err != nil {
		t.Fatal(err)
	}
	ss := is.(*session)
	if err := ss.Release(0, 2, t0); err == nil {
		t.Error("a release of a hold never made was accepted")
	}
	if err := ss.Hold(3, 2, t0); err == nil {
		t.Error("a hold at site 3 of 1 was accepted")
	}
	if err := ss.Hold(0, 0, t0); err == nil {
		t.Error("a hold of 0 nodes was accepted")
	}
	if len(ss.holds) != 0 {
		t.Fatalf("refused changes were buffered: %v", ss.holds)
	}
	if err := ss.Hold(0, 2, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Plan(context.Background(), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Plan(context.Background(), t0); err == nil {
		t.Error("a pass back in time was accepted")
	}
	if err := ss.Release(0, 2, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	want := &policy.Snapshot{Now: t0.Add(time.Minute), Quiet: true, Sites: []policy.Site{{Name: "a", Nodes: 4, Free: 4, H: 1, Busy: []policy.Hold{}}}}
	if m := ss.Mirror(); !reflect.DeepEqual(m, want) {
		t.Fatalf("mirror %+v, want %+v", m, want)
	}
	if err := ss.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Plan(context.Background(), t0.Add(time.Hour)); err != ErrClosed {
		t.Fatalf("a closed session planned: err = %v", err)
	}
}

// TestMirrorPlanned: the jobs a plan starts, replicates or rejects leave
// the mirror's queue wherever they are; reserved ones stay; order is kept.
func TestMirrorPlanned(t *testing.T) {
	var m mirror
	s := &policy.Snapshot{Now: t0}
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		s.Queue = append(s.Queue, policy.Job{ID: id})
	}
	m.seed(s)
	m.planned(t0.Add(time.Second), &policy.Plan{Decisions: []policy.Decision{
		{Job: "a", Action: policy.Start}, {Job: "b", Action: policy.Reserve}, {Job: "e", Action: policy.Reject}, {Job: "c", Action: policy.Replicate},
	}})
	var ids []string
	for _, j := range m.snap.Queue {
		ids = append(ids, j.ID)
	}
	if !reflect.DeepEqual(ids, []string{"b", "d", "f"}) || !m.snap.Now.Equal(t0.Add(time.Second)) {
		t.Fatalf("queue %v at %s, want [b d f] at +1s", ids, m.snap.Now)
	}
	if len(s.Queue) != 6 || s.Queue[0].ID != "a" {
		t.Fatal("the mirror changed the snapshot it was seeded with")
	}
}
