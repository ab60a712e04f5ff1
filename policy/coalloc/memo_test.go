package coalloc

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"pgregory.net/rapid"
)

// TestPropertyMemoMatchesFullPass: after a Quiet pass, a chain of
// arrival-only snapshots (the same sites, a later Now before the first hold
// ends, jobs appended) planned by the same planner (so by the memo's fast
// path when it applies) gives exactly the plans of a fresh planner, which
// makes full passes.
func TestPropertyMemoMatchesFullPass(t *testing.T) {
	hits, passes := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		s := genQuietSnapshot(t)
		name, pl := drawPlanner(t)
		// Settle: apply each pass's starts and rejections until a pass
		// decides nothing (what a broker does between cycles).
		for range 6 {
			plan, err := pl.Plan(context.Background(), s)
			if err != nil {
				t.Skip(err)
			}
			if len(plan.Decisions) == 0 {
				break
			}
			s = applied(s, plan)
		}
		var firstEnd time.Time
		for _, site := range s.Sites {
			for _, h := range site.Busy {
				if firstEnd.IsZero() || h.Until.Before(firstEnd) {
					firstEnd = h.Until
				}
			}
		}
		cur := clone(s)
		for step := range rapid.IntRange(1, 3).Draw(t, "steps") {
			next := clone(cur)
			room := 2 * time.Hour
			if !firstEnd.IsZero() {
				room = min(room, firstEnd.Sub(cur.Now)-time.Second)
			}
			if room > 0 {
				next.Now = cur.Now.Add(time.Duration(rapid.Int64Range(0, int64(room/time.Second)).Draw(t, "advance")) * time.Second)
			}
			total := 0
			for _, site := range s.Sites {
				total += site.Nodes
			}
			for k := range rapid.IntRange(1, 4).Draw(t, "arrivals") {
				next.Queue = append(next.Queue, policy.Job{
					ID:       fmt.Sprintf("n%d-%d", step, k),
					Width:    rapid.IntRange(1, total+2).Draw(t, "width"),
					Estimate: time.Duration(rapid.IntRange(60, 5*3600).Draw(t, "est")) * time.Second,
					Submit:   next.Now,
					Origin:   rapid.IntRange(-1, len(s.Sites)-1).Draw(t, "origin"),
					NoSplit:  rapid.IntRange(0, 5).Draw(t, "nosplit") == 0,
				})
			}
			before := pl.memo.hits
			got, err := pl.Plan(context.Background(), next)
			if err != nil {
				t.Fatal(err)
			}
			if pl.memo.hits > before {
				hits++
			}
			passes++
			sameAsFullPass(t, name, next, got, fmt.Sprintf("step %d (fast path %v)", step, pl.memo.hits > before))
			cur = next
		}
	})
	t.Logf("fast path in %d of %d arrival passes", hits, passes)
	if hits == 0 {
		t.Fatal("the fast path was never taken: the property was not exercised")
	}
}

// drawPlanner draws one of the paper-000 planners (every name but Sabin's,
// which is not a *Planner).
func drawPlanner(t *rapid.T) (string, *Planner) {
	names := slices.DeleteFunc(Names(), func(n string) bool { return n == "sabin" })
	name := rapid.SampledFrom(names).Draw(t, "planner")
	ppl, err := ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	pl, ok := ppl.(*Planner)
	if !ok {
		t.Fatalf("%s is a %T, not a *Planner", name, ppl)
	}
	return name, pl
}

// sameAsFullPass fails unless got plans what a fresh planner name (which
// makes a full pass) plans for s.
func sameAsFullPass(t *rapid.T, name string, s *policy.Snapshot, got *policy.Plan, where string) {
	fresh, _ := ByName(name)
	want, err := fresh.Plan(context.Background(), clone(s))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Decisions, want.Decisions) {
		t.Fatalf("%s %s: plans\n%+v\nwant (a full pass)\n%+v", name, where, got.Decisions, want.Decisions)
	}
}

// genQuietSnapshot is a Quiet genSnapshot with fewer holds past their end
// (such a hold ends the memo's fast path at once).
func genQuietSnapshot(t *rapid.T) *policy.Snapshot {
	s := genSnapshot(t)
	s.Quiet = true
	for i := range s.Sites {
		for k := range s.Sites[i].Busy {
			if h := &s.Sites[i].Busy[k]; !h.Until.After(s.Now) && rapid.Bool().Draw(t, "not overdue") {
				h.Until = s.Now.Add(time.Duration(rapid.IntRange(1, 600).Draw(t, "until")) * time.Second)
			}
		}
	}
	return s
}

// applied is s after a broker acted on plan: rejected and started jobs
// leave the queue, started ones hold their nodes from Now on.
func applied(s *policy.Snapshot, plan *policy.Plan) *policy.Snapshot {
	n := clone(s)
	gone := map[string]bool{}
	for _, d := range plan.Decisions {
		switch d.Action {
		case policy.Reject:
			gone[d.Job] = true
		case policy.Start:
			gone[d.Job] = true
			for _, part := range d.Chosen.Parts {
				site := &n.Sites[part.Site]
				site.Free -= part.Nodes
				site.Busy = append(site.Busy, policy.Hold{Nodes: part.Nodes, Until: d.Chosen.End()})
			}
		}
	}
	n.Queue = n.Queue[:0:0]
	for _, j := range s.Queue {
		if !gone[j.ID] {
			n.Queue = append(n.Queue, j)
		}
	}
	return n
}
