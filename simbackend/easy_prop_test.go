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
