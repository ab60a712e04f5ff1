package bridge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
	"pgregory.net/rapid"
)

// liveTags lists the pending or running remote jobs of grid job id over
// every site.
func liveTags(id string, sites ...*queueSite) []string {
	var out []string
	for _, s := range sites {
		for _, l := range s.live() {
			if strings.HasPrefix(l, id+"-a") {
				out = append(out, s.name+" "+l)
			}
		}
	}
	slices.Sort(out)
	return out
}

func restartBroker(t *testing.T, store Store, grace time.Duration, dec func(*policy.Snapshot, policy.Job) *policy.Decision, now time.Time, sites ...backends.Backend) *Broker {
	t.Helper()
	var sc []SiteConfig
	for _, s := range sites {
		sc = append(sc, SiteConfig{Name: s.Name(), Backend: s, H: 1})
	}
	b, err := New(Options{Sites: sc, Planner: scriptPlanner{dec}, Remap: &RemapOptions{}, Store: store, SubmitGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Recover(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	return b
}

// A broker killed at any point of a move leaves, after Recover and a few
// cycles, the job in exactly one queue; it then runs exactly once.
func TestRemapCrashAtEveryPoint(t *testing.T) {
	points := []string{crashBeforeWithdraw, crashAfterWithdraw, crashBeforeSubmit, crashAfterSubmit}
	for _, grace := range []time.Duration{0, 3 * time.Minute} {
		for _, point := range points {
			t.Run(fmt.Sprintf("%s/grace=%s", point, grace), func(t *testing.T) {
				store := NewMemStore()
				now := t0
				clock := func() time.Time { return now }
				a, bb := newQueueSite("A", 2, clock), newQueueSite("B", 2, clock)
				a.foreign = []backends.Allocation{{Nodes: 2, Until: t0.Add(2 * time.Hour)}}
				bb.foreign = []backends.Allocation{{Nodes: 2, Until: t0.Add(3 * time.Hour)}}
				b := remapBroker(t, &RemapOptions{}, store, onSite(0), a, bb)
				r := req(2)
				r.Estimate = 30 * time.Minute
				j, err := b.Submit(context.Background(), r, now)
				if err != nil {
					t.Fatal(err)
				}
				mustCycle(t, b, now)
				bb.foreign = nil
				b.rm.hook = func(p, id string) bool { return p == point }
				now = t0.Add(10 * time.Minute)
				mustCycle(t, b, now)
				if !b.rm.crashed {
					t.Fatalf("the move never reached %s", point)
				}
				// The process is gone; what the sites hold is what it left.
				b = restartBroker(t, store, grace, onSite(0), now, a, bb)
				for i := 0; i < 6; i++ {
					if l := liveTags(j.ID, a, bb); len(l) > 1 {
						t.Fatalf("cycle %d after the restart: the job is in %d queues: %v\n%s", i, len(l), l, eventsOf(mustJob(t, b, j.ID)))
					}
					now = now.Add(time.Minute)
					mustCycle(t, b, now)
				}
				got := mustJob(t, b, j.ID)
				l := liveTags(j.ID, a, bb)
				if len(l) != 1 || got.State != Dispatched {
					t.Fatalf("after recovery: %s, remote jobs %v; want dispatched in exactly one queue\n%s", got.State, l, eventsOf(got))
				}
				if point != crashBeforeSubmit && got.Sites() != "B:2" {
					// Before the submission the job may go back to the
					// planner (onSite: A) and be moved again; otherwise the
					// move completes.
					t.Fatalf("crash %s: want the move completed at B, got %s\n%s", point, got.Sites(), eventsOf(got))
				}
				// It runs once.
				for _, s := range []*queueSite{a, bb} {
					for _, tag := range l {
						s.startTag(strings.Fields(strings.Split(tag, ":")[0])[1])
					}
				}
				now = now.Add(time.Minute)
				mustCycle(t, b, now)
				a.endRunning(j.ID)
				bb.endRunning(j.ID)
				now = now.Add(time.Hour)
				mustCycle(t, b, now)
				got = mustJob(t, b, j.ID)
				if got.State != Completed || a.starts[j.ID]+bb.starts[j.ID] != 1 {
					t.Fatalf("want completed after one run, got %s after %d+%d starts\n%s", got.State, a.starts[j.ID], bb.starts[j.ID], eventsOf(got))
				}
			})
		}
	}
}

// If the old job were still waiting at A when the new attempt exists at B
// (a withdrawal the site did not hold to), Recover keeps the old one and
// cancels the newer.
func TestRemapRecoverBothPresentCancelsNewer(t *testing.T) {
	store := NewMemStore()
	now := t0
	clock := func() time.Time { return now }
	a, bb := newQueueSite("A", 2, clock), newQueueSite("B", 2, clock)
	a.foreign = []backends.Allocation{{Nodes: 2, Until: t0.Add(2 * time.Hour)}}
	bb.foreign = []backends.Allocation{{Nodes: 2, Until: t0.Add(3 * time.Hour)}}
	b := remapBroker(t, &RemapOptions{}, store, onSite(0), a, bb)
	r := req(2)
	r.Estimate = 30 * time.Minute
	j, _ := b.Submit(context.Background(), r, now)
	mustCycle(t, b, now)
	bb.foreign = nil
	b.rm.hook = func(p, id string) bool { return p == crashAfterSubmit }
	now = t0.Add(10 * time.Minute)
	mustCycle(t, b, now)
	a.mu.Lock()
	for _, st := range a.jobs {
		st.State = backends.StatePending // the withdrawal did not hold
	}
	a.mu.Unlock()
	if l := liveTags(j.ID, a, bb); len(l) != 2 {
		t.Fatalf("setup: want both attempts live, got %v", l)
	}
	b = restartBroker(t, store, 0, onSite(0), now, a, bb)
	got := mustJob(t, b, j.ID)
	l := liveTags(j.ID, a, bb)
	if len(l) != 1 || !strings.HasPrefix(l[0], "A "+RemoteTag(j.ID, 1)) || got.Sites() != "A:2" || got.Attempts != 1 || got.State != Dispatched {
		t.Fatalf("both present: want the old attempt kept at A and the newer cancelled, got %s at %s attempt %d, remote %v\n%s",
			got.State, got.Sites(), got.Attempts, l, eventsOf(got))
	}
}

// Property: over random cycles, site changes, starts, start races,
// unanswered withdrawals, crashes at any move point and restarts, a remap
// never runs a job twice, never leaves it in two queues, and never drops
// one: once the sites free up, every job completes, having run once.
func TestRemapPropertyNeverTwiceNeverDropped(t *testing.T) {
	seen := map[string]int{} // event kinds over every run: the property must have exercised moves and crashes
	rapid.Check(t, func(rt *rapid.T) {
		now := t0
		clock := func() time.Time { return now }
		var starts []string
		sites := []*queueSite{newQueueSite("A", 2, clock), newQueueSite("B", 2, clock), newQueueSite("C", 2, clock)}
		var bes []backends.Backend
		for _, s := range sites {
			s.log = &starts
			bes = append(bes, s)
		}
		home := rapid.IntRange(0, 2).Draw(rt, "home")
		// The planner's site is busy for a while, so jobs wait there.
		sites[home].foreign = []backends.Allocation{{Nodes: 2, Until: now.Add(time.Duration(rapid.IntRange(30, 300).Draw(rt, "homeBusyMin")) * time.Minute)}}
		dec := onSite(home)
		store := NewMemStore()
		b := remapBroker(t, &RemapOptions{MinGain: time.Minute, MaxMoves: rapid.IntRange(1, 3).Draw(rt, "maxMoves")}, store, dec, bes...)
		var ids []string
		n := rapid.IntRange(1, 4).Draw(rt, "jobs")
		for i := 0; i < n; i++ {
			r := req(rapid.IntRange(1, 2).Draw(rt, "width"))
			r.Estimate = 30 * time.Minute
			j, err := b.Submit(context.Background(), r, now)
			if err != nil {
				rt.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		check := func(when string) {
			for _, id := range ids {
				if l := liveTags(id, sites...); len(l) > 1 {
					rt.Fatalf("%s: job %s in %d queues: %v", when, id, len(l), l)
				}
				ran := 0
				for _, s := range sites {
					ran += s.starts[id]
				}
				if ran > 1 {
					rt.Fatalf("%s: job %s ran %d times: %v", when, id, ran, starts)
				}
			}
		}
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			s := sites[rapid.IntRange(0, 2).Draw(rt, "site")]
			switch rapid.IntRange(0, 6).Draw(rt, "action") {
			case 0: // a foreign job takes or leaves the site
				nodes := rapid.IntRange(0, 2).Draw(rt, "nodes")
				s.mu.Lock()
				s.foreign = nil
				if nodes > 0 {
					s.foreign = []backends.Allocation{{Nodes: nodes, Until: now.Add(time.Duration(rapid.IntRange(1, 300).Draw(rt, "holdMin")) * time.Minute)}}
				}
				s.mu.Unlock()
			case 1: // the site starts one of its waiting jobs
				for _, id := range ids {
					for k := 1; k <= 8; k++ {
						if s.startTag(RemoteTag(id, k)) {
							break
						}
					}
				}
			case 2: // running jobs end
				for _, id := range ids {
					s.endRunning(id)
				}
			case 3:
				s.mu.Lock()
				s.startOnWithdraw = !s.startOnWithdraw
				s.mu.Unlock()
			case 4:
				s.mu.Lock()
				if s.withdrawErr == nil {
					s.withdrawErr = fmt.Errorf("%w: no answer", backends.ErrUnavailable)
				} else {
					s.withdrawErr = nil
				}
				s.mu.Unlock()
			default: // a cycle, perhaps killed at a move's crash point, then a restart
				now = now.Add(time.Duration(rapid.IntRange(1, 30).Draw(rt, "advanceMin")) * time.Minute)
				if rapid.Bool().Draw(rt, "crash") {
					point := rapid.SampledFrom([]string{crashBeforeWithdraw, crashAfterWithdraw, crashBeforeSubmit, crashAfterSubmit}).Draw(rt, "point")
					b.rm.hook = func(p, id string) bool { return p == point }
				}
				if _, err := b.Cycle(context.Background(), now); err != nil {
					rt.Fatal(err)
				}
				if b.rm.crashed {
					seen["crash"]++
				}
				if b.rm.crashed || rapid.Bool().Draw(rt, "restart") {
					var err error
					b, err = New(Options{Sites: b.opts.Sites, Planner: scriptPlanner{dec}, Remap: b.opts.Remap, Store: store})
					if err != nil {
						rt.Fatal(err)
					}
					if _, err := b.Recover(context.Background(), now); err != nil {
						rt.Fatal(err)
					}
				}
				b.rm.hook = nil
			}
			check(fmt.Sprintf("step %d", i))
		}
		// Drain: the sites free up and run everything.
		for _, s := range sites {
			s.mu.Lock()
			s.foreign, s.startOnWithdraw, s.withdrawErr = nil, false, nil
			s.mu.Unlock()
		}
		for round := 0; round < 20; round++ {
			now = now.Add(10 * time.Minute)
			if _, err := b.Cycle(context.Background(), now); err != nil {
				rt.Fatal(err)
			}
			check(fmt.Sprintf("drain %d", round))
			for _, s := range sites {
				for _, id := range ids {
					s.endRunning(id)
					for k := 1; k <= 8; k++ {
						s.startTag(RemoteTag(id, k))
					}
				}
			}
			check(fmt.Sprintf("drain %d", round))
		}
		for _, id := range ids {
			j, err := store.Get(context.Background(), id) // a restarted broker loads only unfinished jobs
			if err != nil {
				rt.Fatalf("job %s dropped: %v", id, err)
			}
			ran := 0
			for _, s := range sites {
				ran += s.starts[id]
			}
			if j.State != Completed || ran != 1 {
				rt.Fatalf("job %s: %s after %d runs, want completed after one\n%s", id, j.State, ran, eventsOf(j))
			}
			for _, e := range j.Events {
				seen[e.Kind]++
			}
		}
	})
	t.Logf("over every run: %v", seen)
	for _, k := range []string{"crash", EventMoved, EventMoveAbandoned, EventMoveWait, "reconcile", "reconciled"} {
		if seen[k] == 0 {
			t.Errorf("the property never saw %q: it does not exercise what it claims", k)
		}
	}
}
