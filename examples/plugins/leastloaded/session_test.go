package leastloaded

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

// TestSessionMatchesPlan: through random submits, holds, releases and
// passes, every Session pass equals Plan on the snapshot the changes
// describe (the policy.Session contract), Quiet.
func TestSessionMatchesPlan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		start := genSnapshot(t)
		for i := range start.Sites { // holds that add up: Free + Busy = Nodes
			st := &start.Sites[i]
			if busy := st.Nodes - st.Free; busy > 0 {
				st.Busy = []policy.Hold{{Nodes: busy, Until: t0.Add(time.Hour)}}
			}
		}
		ss, err := New().NewSession(start)
		if err != nil {
			t.Fatal(err)
		}
		// want is the snapshot the changes describe.
		want := &policy.Snapshot{Now: start.Now, Sites: slices.Clone(start.Sites), Queue: slices.Clone(start.Queue), MultiSite: start.MultiSite, Quiet: true}
		for i := range want.Sites {
			want.Sites[i].Busy = slices.Clone(want.Sites[i].Busy)
		}
		now, next := start.Now, len(start.Queue)
		steps := rapid.IntRange(1, 30).Draw(t, "steps")
		for range steps {
			switch op := rapid.IntRange(0, 3).Draw(t, "op"); {
			case op == 0:
				j := policy.Job{ID: fmt.Sprintf("n%d", next), Width: rapid.IntRange(1, 45).Draw(t, "w"), Estimate: time.Minute, Origin: -1, Submit: now}
				next++
				ss.Submit(j)
				want.Queue = append(want.Queue, j)
			case op == 1 && len(want.Sites) > 0:
				i := rapid.IntRange(0, len(want.Sites)-1).Draw(t, "site")
				if want.Sites[i].Free == 0 {
					continue
				}
				n := rapid.IntRange(1, want.Sites[i].Free).Draw(t, "n")
				until := now.Add(time.Duration(rapid.IntRange(1, 100).Draw(t, "until")) * time.Minute)
				if err := ss.Hold(i, n, until); err != nil {
					t.Fatal(err)
				}
				want.Sites[i].Free -= n
				want.Sites[i].Busy = append(want.Sites[i].Busy, policy.Hold{Nodes: n, Until: until})
			case op == 2:
				var sites []int
				for i := range want.Sites {
					if len(want.Sites[i].Busy) > 0 {
						sites = append(sites, i)
					}
				}
				if len(sites) == 0 {
					continue
				}
				i := rapid.SampledFrom(sites).Draw(t, "rsite")
				k := rapid.IntRange(0, len(want.Sites[i].Busy)-1).Draw(t, "hold")
				h := want.Sites[i].Busy[k]
				if err := ss.Release(i, h.Nodes, h.Until); err != nil {
					t.Fatal(err)
				}
				want.Sites[i].Busy = slices.Delete(want.Sites[i].Busy, k, k+1)
				want.Sites[i].Free += h.Nodes
			default:
				now = now.Add(time.Duration(rapid.IntRange(0, 600).Draw(t, "dt")) * time.Second)
				want.Now = now
				got, err := ss.Plan(context.Background(), now)
				if err != nil {
					t.Fatal(err)
				}
				exp, err := New().Plan(context.Background(), want)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, exp) {
					t.Fatalf("session pass:\n%+v\nPlan on the same grid:\n%+v", got, exp)
				}
				left := want.Queue[:0:0]
				decided := map[string]bool{}
				for _, d := range exp.Decisions {
					decided[d.Job] = true
				}
				for _, j := range want.Queue {
					if !decided[j.ID] {
						left = append(left, j)
					}
				}
				want.Queue = left
				// The caller holds what was started.
				for _, d := range exp.Decisions {
					if d.Action == policy.Start {
						p := d.Chosen.Parts[0]
						until := now.Add(d.Chosen.Runtime)
						if err := ss.Hold(p.Site, p.Nodes, until); err != nil {
							t.Fatal(err)
						}
						want.Sites[p.Site].Free -= p.Nodes
						want.Sites[p.Site].Busy = append(want.Sites[p.Site].Busy, policy.Hold{Nodes: p.Nodes, Until: until})
					}
				}
			}
		}
	})
}

func TestSessionErrors(t *testing.T) {
	s := &policy.Snapshot{Now: t0, Sites: []policy.Site{{Name: "A", Nodes: 4, Free: 2, H: 1, Busy: []policy.Hold{{Nodes: 2, Until: t0.Add(time.Hour)}}}}}
	if _, err := New().NewSession(&policy.Snapshot{Sites: []policy.Site{site("A", 2, 3)}}); err == nil {
		t.Error("NewSession accepted a site with more free nodes than nodes")
	}
	ss, err := New().NewSession(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		err  error
	}{
		{"hold at a site that does not exist", ss.Hold(3, 1, t0)},
		{"hold of more than the free nodes", ss.Hold(0, 3, t0)},
		{"release of a hold never made", ss.Release(0, 1, t0)},
		{"release at a site that does not exist", ss.Release(-1, 1, t0)},
	} {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if err := ss.Release(0, 2, t0.Add(time.Hour)); err != nil {
		t.Errorf("release of the starting snapshot's hold: %v", err)
	}
	if err := ss.Release(0, 2, t0.Add(time.Hour)); err == nil {
		t.Error("the same hold released twice")
	}
	if _, err := ss.Plan(context.Background(), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Plan(context.Background(), t0); err == nil {
		t.Error("a pass earlier than the last one was accepted")
	}
}
