package simbackend

import (
	"fmt"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"pgregory.net/rapid"
)

// shadowOf computes, independently of the scheduler's pass, the time the
// queue head would start if no more nodes were taken: the earliest estimated
// end at which enough nodes are free.
func shadowOf(s *easy, head *sjob, now int64) int64 {
	free := s.freeNow(now)
	if head.width <= free {
		return now
	}
	for _, r := range s.running {
		if r.estEnd <= now {
			continue
		}
		free += r.width
		if free >= head.width {
			return r.estEnd
		}
	}
	return -1
}

// TestEASYInvariants checks, on random workloads with cancellations, in both
// modes: capacity is never exceeded; after every instant the queue head does
// not fit in the free nodes once the instant is handled (no idling while the head could run); a job
// starts no later than the shadow time computed when it became the head
// (backfilling never delays the head); every job ends in the right state
// within its walltime.
func TestEASYInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ref := rapid.Bool().Draw(rt, "reference")
		nodes := rapid.IntRange(1, 16).Draw(rt, "nodes")
		e := NewEngine(epoch0, 1)
		s, err := NewSite(e, SiteConfig{Name: "p", Nodes: nodes, EASY: EASYOptions{ReferenceCompatible: ref}})
		if err != nil {
			rt.Fatal(err)
		}
		n := rapid.IntRange(1, 40).Draw(rt, "jobs")
		type want struct {
			id        backends.JobID
			submit    int
			wall, run time.Duration
			cancelled bool
		}
		jobs := make([]*want, n)
		for i := range jobs {
			w := &want{
				submit: rapid.IntRange(0, 300).Draw(rt, "submit"),
				wall:   time.Duration(rapid.IntRange(1, 100).Draw(rt, "wall")) * time.Second,
			}
			w.run = time.Duration(rapid.IntRange(0, int(w.wall/time.Second)*6/5).Draw(rt, "run")) * time.Second
			width := rapid.IntRange(1, nodes).Draw(rt, "width")
			cancelAt := rapid.IntRange(-1, 400).Draw(rt, "cancelAt")
			jobs[i] = w
			e.At(at(w.submit), func() {
				id, err := s.Submit(bg, spec(fmt.Sprint(i), width, w.wall, w.run))
				if err != nil {
					rt.Fatal(err)
				}
				w.id = id
				if cancelAt >= w.submit {
					e.At(at(cancelAt), func() {
						if st := st2(rt, s, id); !st.State.Final() {
							w.cancelled = true
						}
						s.Cancel(bg, id)
					})
				}
			})
		}
		promise := map[*sjob]int64{}
		for e.Step() {
			now := e.nowNS()
			if next, ok := e.Peek(); ok && next.Equal(e.timeOf(now)) {
				continue // check once every event of this instant is handled
			}
			sc := s.sched
			if sc.freeNow(now) < 0 {
				rt.Fatalf("capacity exceeded: %d nodes free", sc.freeNow(now))
			}
			if len(sc.queue) > 0 {
				head := sc.queue[0]
				if head.width <= sc.freeNow(now) {
					rt.Fatalf("head of width %d waits with %d nodes free at %v", head.width, sc.freeNow(now), time.Duration(now))
				}
				if _, ok := promise[head]; !ok {
					promise[head] = shadowOf(sc, head, now)
				}
			}
		}
		for j, p := range promise {
			if j.startSeq > 0 && j.start > p {
				rt.Fatalf("head promised %v started at %v", time.Duration(p), time.Duration(j.start))
			}
		}
		// Sweep the intervals the jobs really ran: never more than nodes.
		var ivs [][3]int64
		for _, w := range jobs {
			got := st2(rt, s, w.id)
			if !got.Start.IsZero() {
				ivs = append(ivs, [3]int64{got.Start.UnixNano(), got.End.UnixNano(), int64(s.jobs[atoi(w.id)-1].width)})
			}
		}
		for _, a := range ivs {
			used := int64(0)
			for _, b := range ivs {
				if b[0] <= a[0] && a[0] < b[1] {
					used += b[2]
				}
			}
			if used > int64(nodes) {
				rt.Fatalf("%d nodes in use at %v on a %d-node site", used, time.Duration(a[0]-epoch0.UnixNano()), nodes)
			}
		}
		for _, w := range jobs {
			got := st2(rt, s, w.id)
			switch {
			case !got.State.Final():
				rt.Fatalf("job %s not final: %+v", w.id, got)
			case w.cancelled:
				if got.State != backends.StateCancelled {
					rt.Fatalf("job %s: %s, want cancelled", w.id, got.State)
				}
			case got.Start.Before(at(w.submit)) || got.End.Sub(got.Start) > w.wall:
				rt.Fatalf("job %s ran %v..%v (submit %d, wall %v)", w.id, got.Start, got.End, w.submit, w.wall)
			case w.run > w.wall && got.State != backends.StateTimeout:
				rt.Fatalf("job %s overran but is %s", w.id, got.State)
			case w.run <= w.wall && got.State != backends.StateCompleted:
				rt.Fatalf("job %s is %s, want completed", w.id, got.State)
			}
		}
	})
}

func st2(rt *rapid.T, s *Site, id backends.JobID) backends.JobStatus {
	out, err := s.Status(bg, []backends.JobID{id})
	if err != nil {
		rt.Fatal(err)
	}
	return out[0]
}

func atoi(id backends.JobID) int {
	n := 0
	fmt.Sscan(string(id), &n)
	return n
}

// TestReservationInvariants: with random advance reservations among random
// jobs, ordinary jobs and reservation windows together never exceed the
// site; a reservation's jobs run inside its window and within its nodes.
func TestReservationInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nodes := rapid.IntRange(2, 12).Draw(rt, "nodes")
		e := NewEngine(epoch0, 1)
		s, err := NewSite(e, SiteConfig{Name: "r", Nodes: nodes, EASY: EASYOptions{ReferenceCompatible: rapid.Bool().Draw(rt, "reference")}})
		if err != nil {
			rt.Fatal(err)
		}
		type iv struct {
			a, b  time.Time
			nodes int
		}
		var resvs []iv
		resvID := map[int]backends.ResvID{}
		jobResv := map[backends.JobID]int{}
		var ids []backends.JobID
		nr := rapid.IntRange(1, 4).Draw(rt, "reservations")
		for k := 0; k < nr; k++ {
			create := rapid.IntRange(0, 100).Draw(rt, "create")
			start := create + rapid.IntRange(0, 100).Draw(rt, "bookahead")
			dur := time.Duration(rapid.IntRange(1, 80).Draw(rt, "dur")) * time.Second
			want := rapid.IntRange(1, nodes).Draw(rt, "resvNodes")
			e.At(at(create), func() {
				id, err := s.CreateReservation(bg, &backends.ReservationSpec{Start: at(start), Duration: dur, Nodes: want})
				if err == nil {
					resvID[k] = id
					resvs = append(resvs, iv{at(start), at(start).Add(dur), want})
				}
			})
		}
		nj := rapid.IntRange(1, 30).Draw(rt, "jobs")
		for i := 0; i < nj; i++ {
			sub := rapid.IntRange(0, 250).Draw(rt, "submit")
			wall := time.Duration(rapid.IntRange(1, 60).Draw(rt, "wall")) * time.Second
			width := rapid.IntRange(1, nodes).Draw(rt, "width")
			into := rapid.IntRange(-2, nr-1).Draw(rt, "into") // < 0: ordinary job
			e.At(at(sub), func() {
				sp := spec(fmt.Sprint(i), width, wall, wall)
				if into >= 0 {
					rid, ok := resvID[into]
					if !ok {
						return
					}
					sp.Reservation = string(rid)
				}
				id, err := s.Submit(bg, sp)
				if err != nil {
					return // reservation ended or too small: refused, fine
				}
				ids = append(ids, id)
				if into >= 0 {
					jobResv[id] = into
				}
			})
		}
		e.Run()
		// Points to check: every start and every reservation start.
		var pts []time.Time
		var ord []iv
		inResv := map[backends.ResvID][]iv{}
		for _, id := range ids {
			got := st2(rt, s, id)
			if !got.State.Final() {
				rt.Fatalf("job %s not final: %+v", id, got)
			}
			if got.Start.IsZero() {
				continue
			}
			w := s.jobs[atoi(id)-1].width
			pts = append(pts, got.Start)
			if k, ok := jobResv[id]; ok {
				rid := resvID[k]
				inResv[rid] = append(inResv[rid], iv{got.Start, got.End, w})
			} else {
				ord = append(ord, iv{got.Start, got.End, w})
			}
		}
		for _, r := range resvs {
			pts = append(pts, r.a)
		}
		for _, p := range pts {
			used := 0
			for _, x := range append(append([]iv(nil), ord...), resvs...) {
				if !p.Before(x.a) && p.Before(x.b) {
					used += x.nodes
				}
			}
			if used > nodes {
				rt.Fatalf("%d nodes held at %v on a %d-node site", used, p.Sub(epoch0), nodes)
			}
		}
		for k, rid := range resvID {
			win := resvs[indexOfResv(resvID, k)]
			for _, j := range inResv[rid] {
				if j.a.Before(win.a) || j.b.After(win.b) {
					rt.Fatalf("job of %s ran %v..%v outside %v..%v", rid, j.a.Sub(epoch0), j.b.Sub(epoch0), win.a.Sub(epoch0), win.b.Sub(epoch0))
				}
				used := 0
				for _, o := range inResv[rid] {
					if !j.a.Before(o.a) && j.a.Before(o.b) {
						used += o.nodes
					}
				}
				if used > win.nodes {
					rt.Fatalf("%s: %d nodes used of %d", rid, used, win.nodes)
				}
			}
		}
	})
}

// indexOfResv maps the k-th reservation request to its position among the
// granted ones (requests are granted in id order).
func indexOfResv(ids map[int]backends.ResvID, k int) int {
	return atoi(backends.JobID(string(ids[k])[len("resv"):])) - 1
}
