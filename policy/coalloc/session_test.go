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

// TestPropertySessionMatchesPlan: through any sequence of submissions,
// holds (the starts a caller carries out), releases (ends, early or on
// time) and passes, a Session plans exactly what a fresh planner's Plan
// plans on the snapshot those changes describe.
func TestPropertySessionMatchesPlan(t *testing.T) {
	hits, passes := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		s := genQuietSnapshot(t)
		name, pl := drawPlanner(t)
		is, err := pl.NewSession(s)
		if err != nil {
			t.Fatal(err)
		}
		ss := is.(*Session)
		mirror := clone(s)
		total := 0
		for _, site := range s.Sites {
			total += site.Nodes
		}
		for step := range rapid.IntRange(1, 14).Draw(t, "steps") {
			switch rapid.IntRange(0, 6).Draw(t, "op") {
			case 0, 1: // arrivals
				for k := range rapid.IntRange(1, 3).Draw(t, "arrivals") {
					j := policy.Job{ID: fmt.Sprintf("n%d-%d", step, k), Width: rapid.IntRange(1, total+2).Draw(t, "width"),
						Estimate: time.Duration(rapid.IntRange(60, 5*3600).Draw(t, "est")) * time.Second, Submit: mirror.Now,
						Origin: rapid.IntRange(-1, len(s.Sites)-1).Draw(t, "origin"), NoSplit: rapid.IntRange(0, 5).Draw(t, "nosplit") == 0}
					ss.Submit(j)
					mirror.Queue = append(mirror.Queue, j)
				}
			case 2: // a job ends: its hold goes
				i := rapid.IntRange(0, len(s.Sites)-1).Draw(t, "site")
				b := mirror.Sites[i].Busy
				if len(b) == 0 {
					continue
				}
				k := rapid.IntRange(0, len(b)-1).Draw(t, "hold")
				if err := ss.Release(i, b[k].Nodes, b[k].Until); err != nil {
					t.Fatal(err)
				}
				mirror.Sites[i].Free += b[k].Nodes
				mirror.Sites[i].Busy = slices.Delete(b, k, k+1)
			case 3: // time passes
				mirror.Now = mirror.Now.Add(time.Duration(rapid.IntRange(0, 900).Draw(t, "advance")) * time.Second)
			default: // a pass, carried out
				passes++
				before := ss.m.hits
				got, err := ss.Plan(context.Background(), mirror.Now)
				if err != nil {
					t.Fatal(err)
				}
				if ss.m.hits > before {
					hits++
				}
				sameAsFullPass(t, name, mirror, got, fmt.Sprintf("session step %d (fast path %v)", step, ss.m.hits > before))
				gone := map[string]bool{}
				for _, d := range got.Decisions {
					if d.Action == policy.Reserve {
						continue
					}
					gone[d.Job] = true
					for _, part := range d.Chosen.Parts {
						until := mirror.Now.Add(ceilSecond(d.Chosen.End().Sub(mirror.Now)))
						if err := ss.Hold(part.Site, part.Nodes, until); err != nil {
							t.Fatal(err)
						}
						site := &mirror.Sites[part.Site]
						site.Free -= part.Nodes
						site.Busy = append(site.Busy, policy.Hold{Nodes: part.Nodes, Until: until})
					}
				}
				mirror.Queue = slices.DeleteFunc(mirror.Queue, func(j policy.Job) bool { return gone[j.ID] })
				if !reflect.DeepEqual(jobIDs(ss.snap.Queue), jobIDs(mirror.Queue)) {
					t.Fatalf("session queue %v, want %v", jobIDs(ss.snap.Queue), jobIDs(mirror.Queue))
				}
			}
		}
	})
	t.Logf("%d of %d session passes started from the last one's end", hits, passes)
	if hits == 0 {
		t.Fatal("no session pass started from the last one's end: the fast path was not exercised")
	}
}

func jobIDs(q []policy.Job) []string {
	out := []string{}
	for _, j := range q {
		out = append(out, j.ID)
	}
	return out
}

func ceilSecond(d time.Duration) time.Duration {
	if r := d % time.Second; r != 0 {
		d += time.Second - r
	}
	return d
}

// TestSessionRefusesBadChanges: a release of a hold that was never made,
// a hold at a site that does not exist and a pass back in time are errors.
func TestSessionRefusesBadChanges(t *testing.T) {
	pl, _ := ByName("greedy-easy")
	s := &policy.Snapshot{Now: t0, Sites: []policy.Site{{Name: "a", Nodes: 4, Free: 4, H: 1}}}
	ss, err := pl.(*Planner).NewSession(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.Release(0, 2, t0.Add(time.Hour)); err == nil {
		t.Fatal("released a hold that was never made")
	}
	if err := ss.Hold(3, 1, t0.Add(time.Hour)); err == nil {
		t.Fatal("held nodes at site 3 of 1")
	}
	if _, err := ss.Plan(context.Background(), t0.Add(-time.Second)); err == nil {
		t.Fatal("planned before the session's start")
	}
	if _, err := pl.(*Planner).NewSession(&policy.Snapshot{Now: t0, Sites: []policy.Site{{Name: "a", Nodes: 4, H: -1}}}); err == nil {
		t.Fatal("a session on a site with h = -1")
	}
}
