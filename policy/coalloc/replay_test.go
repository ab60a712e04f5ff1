package coalloc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// A tiny test-only replay: virtual time, jobs run exactly their predicted
// hold (transfer + run), the planner is called at every arrival and
// completion. It is a sanity check of the planner end to end, not the
// simulator (simbackend is).

type replayJob struct {
	policy.Job
	start, end time.Time
	parts      []policy.Part
	headEnd    time.Time // predicted end when it first became the reserved head
	rejected   bool
}

type replayResult struct {
	util, awrt float64
	rejected   int
}

func synthTrace(seed uint64, n int) []*replayJob {
	r := rand.New(rand.NewPCG(seed, 1))
	var out []*replayJob
	at := t0
	for i := 0; i < n; i++ {
		at = at.Add(time.Duration(r.IntN(1200)) * time.Second)
		w := 1 + r.IntN(32)
		if r.IntN(10) == 0 {
			w = 60 + r.IntN(120) // wide: needs co-allocation
		}
		if r.IntN(40) == 0 {
			w = 300 // wider than the grid: rejected
		}
		out = append(out, &replayJob{Job: policy.Job{
			ID: fmt.Sprintf("j%03d", i), Width: w, Submit: at, Origin: r.IntN(3),
			Estimate: time.Duration(300+r.IntN(3*3600)) * time.Second, DataSize: int64(r.IntN(100e6)),
		}})
	}
	return out
}

func replay(t *testing.T, name string, trace []*replayJob) replayResult {
	t.Helper()
	pl, err := ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	sites := testbed(1.2).Sites
	type run struct {
		j     *replayJob
		until time.Time
	}
	var running []run
	var queue []*replayJob
	next := 0
	now := trace[0].Submit
	var busyNodeSec float64
	last := now
	for steps := 0; ; steps++ {
		if steps > 100000 {
			t.Fatalf("%s: no progress", name)
		}
		// account utilisation since the last event
		used := 0
		for _, r := range running {
			for _, p := range r.j.parts {
				used += p.Nodes
			}
		}
		busyNodeSec += float64(used) * now.Sub(last).Seconds()
		last = now
		running = slices.DeleteFunc(running, func(r run) bool { return !r.until.After(now) })
		for next < len(trace) && !trace[next].Submit.After(now) {
			queue = append(queue, trace[next])
			next++
		}
		s := &policy.Snapshot{Now: now, MultiSite: 1.2, Links: links(3, 1e-7, 600*time.Millisecond)}
		for i, site := range sites {
			site.Free, site.Busy = site.Nodes, nil
			for _, r := range running {
				for _, p := range r.j.parts {
					if p.Site == i {
						site.Free -= p.Nodes
						site.Busy = append(site.Busy, policy.Hold{Nodes: p.Nodes, Until: r.until})
					}
				}
			}
			if site.Free < 0 {
				t.Fatalf("%s: site %d overbooked at %v", name, i, now)
			}
			s.Sites = append(s.Sites, site)
		}
		for _, q := range queue {
			s.Queue = append(s.Queue, q.Job)
		}
		plan, err := pl.Plan(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]*replayJob{}
		for _, q := range queue {
			byID[q.ID] = q
		}
		for _, d := range plan.Decisions {
			j := byID[d.Job]
			switch d.Action {
			case policy.Start:
				j.start, j.parts = now, d.Chosen.Parts
				j.end = now.Add(hold(d.Chosen.Runtime, d.Chosen.Transfer))
				running = append(running, run{j, j.end})
			case policy.Reject:
				j.rejected = true
			case policy.Reserve:
				if fr := firstReserve(plan); j.headEnd.IsZero() && fr.Job == d.Job {
					j.headEnd = d.Chosen.End()
				}
			}
		}
		queue = slices.DeleteFunc(queue, func(j *replayJob) bool { return !j.start.IsZero() || j.rejected })
		// next event
		ev := time.Time{}
		if next < len(trace) {
			ev = trace[next].Submit
		}
		for _, r := range running {
			if ev.IsZero() || r.until.Before(ev) {
				ev = r.until
			}
		}
		if ev.IsZero() {
			if len(queue) > 0 {
				t.Fatalf("%s: %d jobs stuck with nothing running: %+v", name, len(queue), plan.Pending)
			}
			break
		}
		now = ev
	}
	var res replayResult
	var cost, wrt float64
	for _, j := range trace {
		if j.rejected {
			res.rejected++
			continue
		}
		c := float64(j.Width) * j.end.Sub(j.start).Seconds()
		cost += c
		wrt += c * j.end.Sub(j.Submit).Seconds()
	}
	res.awrt = wrt / cost
	res.util = busyNodeSec / (224 * last.Sub(trace[0].Submit).Seconds())
	return res
}

func TestReplaySanity(t *testing.T) {
	for _, name := range Names() {
		if name == "sabin" {
			continue // replicas need site queues: simbackend's job
		}
		t.Run(name, func(t *testing.T) {
			trace := synthTrace(7, 150)
			res := replay(t, name, trace)
			wantRejected := 0
			for _, j := range trace {
				if j.Width > 224 || (!isMulti(name) && j.Width > 128) {
					wantRejected++
				}
				if j.rejected {
					continue
				}
				if j.start.Before(j.Submit) {
					t.Errorf("%s started before submit", j.ID)
				}
				// The head job's reservation is a promise: nothing that
				// starts later pushes it back (jobs end at their estimate).
				if !j.headEnd.IsZero() && j.end.After(j.headEnd) && name[:3] != "non" {
					t.Errorf("%s: reserved as head to end %v, ended %v", j.ID, j.headEnd, j.end)
				}
			}
			if res.rejected != wantRejected {
				t.Errorf("rejected %d, want %d", res.rejected, wantRejected)
			}
			if res.util <= 0.2 || res.util > 1 {
				t.Errorf("utilisation %.3f", res.util)
			}
			t.Logf("%-24s AU %.3f AWRT %6.0fs rejected %d", name, res.util, res.awrt, res.rejected)
		})
	}
}

func isMulti(name string) bool {
	return name[:6] == "greedy" || name[:7] == "optimal" || name[:3] == "non"
}
