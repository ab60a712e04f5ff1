package coalloc

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"pgregory.net/rapid"
)

// genSnapshot draws a small random grid: 1–5 sites with random holds (some
// overdue), random h, p, links, down sites, and a queue of up to 15 jobs
// with random widths (some too wide), origins, data, Allowed, NoSplit.
func genSnapshot(t *rapid.T) *policy.Snapshot {
	n := rapid.IntRange(1, 5).Draw(t, "sites")
	s := &policy.Snapshot{Now: t0, MultiSite: rapid.SampledFrom([]float64{1, 1.1, 1.3, 1.6}).Draw(t, "p")}
	total := 0
	for i := 0; i < n; i++ {
		nodes := rapid.IntRange(1, 48).Draw(t, "nodes")
		free := rapid.IntRange(0, nodes).Draw(t, "free")
		site := policy.Site{Name: fmt.Sprintf("s%d", i), Nodes: nodes, Free: free, H: rapid.SampledFrom([]float64{0.6, 1, 1.4}).Draw(t, "h")}
		for left := nodes - free; left > 0; {
			k := rapid.IntRange(1, left).Draw(t, "hold")
			until := time.Duration(rapid.IntRange(-60, 8*3600).Draw(t, "until")) * time.Second
			site.Busy = append(site.Busy, policy.Hold{Nodes: k, Until: t0.Add(until)})
			left -= k
		}
		site.Down = rapid.IntRange(0, 9).Draw(t, "down") == 0
		site.Trust = rapid.SampledFrom([]float64{0, 0, 1, 0.9, 0.5, 0.2}).Draw(t, "trust") // 0: unset
		s.Sites = append(s.Sites, site)
		total += nodes
	}
	if rapid.Bool().Draw(t, "links") {
		s.Links = links(n, rapid.Float64Range(0, 1e-5).Draw(t, "b"), time.Duration(rapid.IntRange(0, 1000).Draw(t, "lat"))*time.Millisecond)
	}
	q := rapid.IntRange(0, 15).Draw(t, "queue")
	for k := 0; k < q; k++ {
		j := policy.Job{
			ID:       fmt.Sprintf("j%d", k),
			Width:    rapid.IntRange(1, total+4).Draw(t, "width"),
			Estimate: time.Duration(rapid.IntRange(60, 5*3600).Draw(t, "est")) * time.Second,
			Submit:   t0,
			Origin:   rapid.IntRange(-1, n-1).Draw(t, "origin"),
			DataSize: int64(rapid.IntRange(0, 100e6).Draw(t, "size")),
			NoSplit:  rapid.IntRange(0, 7).Draw(t, "nosplit") == 0,
		}
		if rapid.IntRange(0, 5).Draw(t, "restrict") == 0 {
			for i := 0; i < n; i++ {
				if rapid.Bool().Draw(t, "allow") {
					j.Allowed = append(j.Allowed, i)
				}
			}
			if j.Allowed == nil {
				j.Allowed = []int{}
			}
		}
		if rapid.IntRange(0, 3).Draw(t, "pref") == 0 {
			j.Preferred = []int{rapid.IntRange(0, n-1).Draw(t, "preferred")}
		}
		s.Queue = append(s.Queue, j)
	}
	return s
}

func clone(s *policy.Snapshot) *policy.Snapshot {
	c := *s
	c.Sites = slices.Clone(s.Sites)
	for i := range c.Sites {
		c.Sites[i].Busy = slices.Clone(s.Sites[i].Busy)
	}
	c.Queue = slices.Clone(s.Queue)
	for i := range c.Queue {
		c.Queue[i].Allowed = slices.Clone(s.Queue[i].Allowed)
		c.Queue[i].Preferred = slices.Clone(s.Queue[i].Preferred)
	}
	if s.Links != nil {
		c.Links = make([][]policy.Link, len(s.Links))
		for i := range s.Links {
			c.Links[i] = slices.Clone(s.Links[i])
		}
	}
	return &c
}

func planWith(t tb, name string, s *policy.Snapshot) *policy.Plan {
	t.Helper()
	pl, err := ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pl.Plan(context.Background(), s)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

// TestPropertyPlanInvariants: for every planner, on random snapshots: the
// snapshot is left alone; the plan is deterministic; every queued job gets
// exactly one decision or pending entry, each with a reason; parts are on
// allowed, up sites, sum to the width, respect NoSplit; and starts plus
// reservations never overbook any site at any time.
func TestPropertyPlanInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		orig := clone(s)
		for _, name := range Names() {
			p1 := planWith(t, name, s)
			if !reflect.DeepEqual(s, orig) {
				t.Fatalf("%s modified the snapshot", name)
			}
			p2 := planWith(t, name, clone(s))
			if !reflect.DeepEqual(p1, p2) {
				t.Fatalf("%s is not deterministic:\n%+v\n%+v", name, p1, p2)
			}
			seen := map[string]int{}
			for _, d := range p1.Decisions {
				seen[d.Job]++
				if len(d.Status.Reasons) == 0 {
					t.Fatalf("%s: decision for %s has no reason", name, d.Job)
				}
				if d.Action == policy.Reject {
					continue
				}
				j := s.Queue[slices.IndexFunc(s.Queue, func(j policy.Job) bool { return j.ID == d.Job })]
				for _, part := range d.Chosen.Parts {
					if s.Sites[part.Site].Down || (j.Allowed != nil && !slices.Contains(j.Allowed, part.Site)) {
						t.Fatalf("%s: %s placed on site %d (down=%v, allowed %v)", name, j.ID, part.Site, s.Sites[part.Site].Down, j.Allowed)
					}
					if d.Action == policy.Replicate && (part.Nodes != j.Width || s.Sites[part.Site].Nodes < j.Width) {
						t.Fatalf("%s: replica %+v of %d-wide job", name, part, j.Width)
					}
				}
				if (j.NoSplit || strings.HasPrefix(name, "single-site")) && d.Action != policy.Replicate && len(d.Chosen.Parts) != 1 {
					t.Fatalf("%s: %s split across %v", name, j.ID, d.Chosen.Parts)
				}
			}
			for _, p := range p1.Pending {
				seen[p.Job]++
				if len(p.Status.Reasons) == 0 {
					t.Fatalf("%s: pending %s has no reason", name, p.Job)
				}
			}
			for _, j := range s.Queue {
				if seen[j.ID] != 1 {
					t.Fatalf("%s: job %s answered %d times", name, j.ID, seen[j.ID])
				}
			}
			if name != "sabin" {
				checkNoOverbooking(t, s, p1, true)
			}
		}
	})
}

func firstReserve(p *policy.Plan) *policy.Decision {
	for i := range p.Decisions {
		if p.Decisions[i].Action == policy.Reserve {
			return &p.Decisions[i]
		}
	}
	return nil
}

// TestPropertyEASYNeverDelaysHead: the head's reservation is the same with
// EASY backfilling as without; and after the backfilled jobs have started
// (as holds in the next snapshot), the head's predicted end, weighed by
// trust as the planner ranks placements, is no later: its reservation is
// still there, and it moves only to what its ranking prefers (a plain end
// may then be later, on sites trusted more).
func TestPropertyEASYNeverDelaysHead(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		for _, sel := range []string{"greedy", "optimal", "single-site"} {
			easy := planWith(t, sel+"-easy", s)
			none := planWith(t, sel+"-none", s)
			he, hn := firstReserve(easy), firstReserve(none)
			if !reflect.DeepEqual(he, hn) {
				t.Fatalf("%s: head with EASY %+v, without backfill %+v", sel, he, hn)
			}
			if he == nil {
				continue
			}
			next := applyStarts(s, easy)
			again := decisionFor(planWith(t, sel+"-easy", next), he.Job)
			if again == nil || (again.Action != policy.Start && again.Action != policy.Reserve) {
				t.Fatalf("%s: head %s lost its placement: %+v", sel, he.Job, again)
			}
			if weightedEnd(s, again.Chosen) > weightedEnd(s, he.Chosen) {
				t.Fatalf("%s: backfilling delayed head %s: end %v, was %v", sel, he.Job, again.Chosen.End(), he.Chosen.End())
			}
		}
	})
}

// TestPropertyConservativeNeverDelays: each job's decision under
// Conservative is the one it gets when the jobs behind it do not exist
// (later jobs never change an earlier reservation), and after applying the
// starts the head's predicted end (weighed by trust) is no later.
func TestPropertyConservativeNeverDelays(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		for _, sel := range []string{"greedy", "optimal"} {
			full := planWith(t, sel+"-conservative", s)
			if len(s.Queue) == 0 {
				continue
			}
			i := rapid.IntRange(0, len(s.Queue)-1).Draw(t, "prefix")
			short := clone(s)
			short.Queue = short.Queue[:i+1]
			pre := planWith(t, sel+"-conservative", short)
			for _, d := range pre.Decisions {
				if f := decisionFor(full, d.Job); !reflect.DeepEqual(f, &d) {
					t.Fatalf("%s: %s alone %+v, with later jobs %+v", sel, d.Job, d, f)
				}
			}
			if h := firstReserve(full); h != nil {
				again := decisionFor(planWith(t, sel+"-conservative", applyStarts(s, full)), h.Job)
				if again == nil || weightedEnd(s, again.Chosen) > weightedEnd(s, h.Chosen) {
					t.Fatalf("%s: head %s delayed: %+v, was %+v", sel, h.Job, again, h)
				}
			}
		}
	})
}

// weightedEnd is an option's end from s.Now divided by its sites' trust,
// the planner's ranking (Candidate.Weighted).
func weightedEnd(s *policy.Snapshot, o policy.Option) time.Duration {
	c := Candidate{Parts: o.Parts, Start: o.Start.Sub(s.Now), Run: o.Runtime, Xfer: o.Transfer, Trust: 1}
	for _, p := range o.Parts {
		if tr := s.Sites[p.Site].Trust; tr > 0 {
			c.Trust *= tr
		}
	}
	return c.Weighted()
}

// applyStarts is the next cycle at the same instant: started jobs leave the
// queue and hold their nodes until their predicted end.
func applyStarts(s *policy.Snapshot, p *policy.Plan) *policy.Snapshot {
	n := clone(s)
	started := map[string]bool{}
	for _, d := range p.Decisions {
		if d.Action != policy.Start {
			continue
		}
		started[d.Job] = true
		for _, part := range d.Chosen.Parts {
			site := &n.Sites[part.Site]
			site.Free -= part.Nodes
			site.Busy = append(site.Busy, policy.Hold{Nodes: part.Nodes, Until: s.Now.Add(hold(d.Chosen.Runtime, d.Chosen.Transfer))})
		}
	}
	n.Queue = slices.DeleteFunc(n.Queue, func(j policy.Job) bool { return started[j.ID] })
	return n
}
