package dependable

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/coalloc"
)

// TestPropertyRanked: over random grids and queues, Ranked around paper
// 000's planners decides for exactly the jobs the inner planner decides
// for, with the same actions; its Start parts never exceed a site's free
// nodes; a start it moved is one of the inner planner's immediate options
// and has no more RC than the inner choice; Quiet changes no decision.
func TestPropertyRanked(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.SampledFrom([]string{"greedy-easy", "single-site-easy", "greedy-conservative", "optimal-none"}).Draw(t, "inner")
		inner, err := coalloc.ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		now := epoch.Add(24 * time.Hour)
		s := &policy.Snapshot{Now: now, MultiSite: 1.2}
		pred, _ := NewPredictor(Config{Threshold: time.Minute})
		n := rapid.IntRange(1, 5).Draw(t, "sites")
		for i := range n {
			nodes := rapid.IntRange(1, 16).Draw(t, "nodes")
			free := rapid.IntRange(0, nodes).Draw(t, "free")
			st := policy.Site{Name: fmt.Sprintf("s%d", i), Nodes: nodes, Free: free, H: rapid.Float64Range(0.5, 2).Draw(t, "h")}
			if free < nodes {
				st.Busy = []policy.Hold{{Nodes: nodes - free, Until: now.Add(time.Duration(rapid.IntRange(1, 300).Draw(t, "until")) * time.Minute)}}
			}
			s.Sites = append(s.Sites, st)
			at := epoch
			pred.Observe(st.Name, Up, at)
			for range rapid.IntRange(0, 5).Draw(t, "fails") {
				at = at.Add(time.Duration(rapid.IntRange(10, 600).Draw(t, "ttf")) * time.Minute)
				pred.Observe(st.Name, Fail, at)
			}
		}
		for k := range rapid.IntRange(0, 8).Draw(t, "jobs") {
			s.Queue = append(s.Queue, policy.Job{ID: fmt.Sprintf("j%d", k), Width: rapid.IntRange(1, 20).Draw(t, "w"),
				Estimate: time.Duration(rapid.IntRange(1, 300).Draw(t, "est")) * time.Minute, Submit: now, Origin: -1})
		}
		r := &Ranked{Inner: inner, Rel: pred}
		want, err := inner.Plan(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Plan(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Decisions) != len(want.Decisions) {
			t.Fatalf("%d decisions, inner %d", len(got.Decisions), len(want.Decisions))
		}
		used := make([]int, n)
		curves := make([]Curve, n)
		for i := range s.Sites {
			curves[i] = pred.Curve(s.Sites[i].Name, now)
		}
		for i, d := range got.Decisions {
			w := want.Decisions[i]
			if d.Job != w.Job || d.Action != w.Action {
				t.Fatalf("decision %d: %s %v, inner %s %v", i, d.Job, d.Action, w.Job, w.Action)
			}
			if d.Action != policy.Start {
				continue
			}
			for _, p := range d.Chosen.Parts {
				used[p.Site] += p.Nodes
			}
			if !equalParts(d.Chosen.Parts, w.Chosen.Parts) {
				if !slices.ContainsFunc(w.Beaten, func(o policy.Option) bool { return o.Immediate && equalParts(o.Parts, d.Chosen.Parts) }) {
					t.Fatalf("job %s moved to a placement the inner planner did not offer", d.Job)
				}
				rcNew, _ := r.cost(now, curves, d.Chosen)
				rcOld, _ := r.cost(now, curves, w.Chosen)
				if rcNew >= rcOld {
					t.Fatalf("job %s moved from RC %v to RC %v", d.Job, rcOld, rcNew)
				}
			}
		}
		for i := range used {
			if used[i] > s.Sites[i].Free {
				t.Fatalf("site %d: %d nodes started, %d free", i, used[i], s.Sites[i].Free)
			}
		}
		q := *s
		q.Quiet = true
		quiet, err := r.Plan(context.Background(), &q)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range quiet.Decisions {
			if d.Job != got.Decisions[i].Job || d.Action != got.Decisions[i].Action || !equalParts(d.Chosen.Parts, got.Decisions[i].Chosen.Parts) {
				t.Fatalf("Quiet changed decision %d", i)
			}
		}
	})
}

func equalParts(a, b []policy.Part) bool { return slices.Equal(a, b) }
