package reserve

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The paper's synthetic setup (§3.1), small: resources with capability levels
// 1–5, each running back-to-back non-reserved jobs 5–50 s long (the same
// stream under every mechanism, so one is always running when a reservation
// starts, unless a reservation holds the resource), Poisson request arrivals,
// book-ahead 1–20 s, window 5–50 s, demand levels 1–5, a fixed flexibility.
type synth struct {
	res  []Resource
	reqs []Request
	at   []time.Time // arrival of reqs[i]
	bg   [][]bgJob   // per resource, back to back
}

type bgJob struct {
	start time.Time
	len   time.Duration
}

func newSynth(nres, nreq int, gap, flex float64, seed uint64) *synth {
	rng := rand.New(rand.NewPCG(seed, 1))
	s := &synth{}
	for i := range nres {
		s.res = append(s.res, Resource{Name: fmt.Sprintf("r%02d", i), Capacity: 1, Level: 1 + rng.IntN(5)})
	}
	now := t0
	for i := range nreq {
		now = now.Add(time.Duration(rng.ExpFloat64() * gap * float64(time.Second)))
		et := now.Add(sec(1 + rng.IntN(20)))
		win := sec(5 + rng.IntN(46))
		dur := max(time.Second, time.Duration(float64(win)*(1-flex)).Round(time.Second))
		s.at = append(s.at, now)
		s.reqs = append(s.reqs, Request{ID: fmt.Sprintf("q%03d", i), ET: et, LT: et.Add(win), Dur: dur, Demand: 1 + rng.IntN(5)})
	}
	end := now.Add(200 * time.Second)
	for range s.res {
		var jobs []bgJob
		for t := t0.Add(-sec(rng.IntN(50))); t.Before(end); {
			j := bgJob{t, sec(5 + rng.IntN(46))}
			jobs = append(jobs, j)
			t = t.Add(j.len)
		}
		s.bg = append(s.bg, jobs)
	}
	return s
}

// running lists the non-reserved job running on each resource at t, except on
// resources a reservation holds at t.
func (s *synth) running(t time.Time, held map[string][][2]time.Time) []Running {
	var out []Running
	for i, r := range s.res {
		busy := false
		for _, h := range held[r.Name] {
			busy = busy || (!h[0].After(t) && h[1].After(t))
		}
		if busy {
			continue
		}
		k, _ := slices.BinarySearchFunc(s.bg[i], t, func(j bgJob, t time.Time) int {
			if j.start.Add(j.len).After(t) {
				return 1
			}
			return -1
		})
		if k < len(s.bg[i]) && !s.bg[i][k].start.After(t) {
			j := s.bg[i][k]
			out = append(out, Running{Resource: r.Name, Job: fmt.Sprintf("%s/%d", r.Name, k), Expected: j.len, Elapsed: t.Sub(j.start)})
		}
	}
	return out
}

// mechanism is DRRM or an SRRM variant as the simulation drives it.
type mechanism interface {
	admit(q Request, now time.Time, run []Running) (ok bool, bindAt time.Time)
	bind(id string, now time.Time, run []Running) (Binding, error)
	remove(id string)
}

type drrm struct{ g *Graph }

func (d drrm) admit(q Request, _ time.Time, _ []Running) (bool, time.Time) {
	ok, _ := d.g.Admit(q)
	return ok, q.ET
}
func (d drrm) bind(id string, now time.Time, run []Running) (Binding, error) {
	return d.g.Bind(id, now, run)
}
func (d drrm) remove(id string) { d.g.Remove(id) }

type srrm struct{ s *Static }

func (x srrm) admit(q Request, now time.Time, run []Running) (bool, time.Time) {
	b, ok, _ := x.s.Admit(q, now, run)
	return ok, b.Start
}
func (x srrm) bind(id string, now time.Time, run []Running) (Binding, error) {
	return x.s.Bind(id, now, run)
}
func (x srrm) remove(id string) { x.s.Remove(id) }

type outcome struct {
	admitted, preempting, failed int
	tpc                          float64
}

// run drives m through s: events in time order, at one instant ends first,
// then starts (in admission order), then arrivals.
func (s *synth) run(m mechanism) outcome {
	var o outcome
	type ev struct {
		t   time.Time
		id  string
		dur time.Duration
	}
	var binds, ends []ev
	held := map[string][][2]time.Time{}
	where := map[string]string{}
	next := 0
	for {
		t, kind := time.Time{}, -1
		if len(ends) > 0 {
			t, kind = ends[0].t, 0
		}
		if len(binds) > 0 && (kind < 0 || binds[0].t.Before(t)) {
			t, kind = binds[0].t, 1
		}
		if next < len(s.reqs) && (kind < 0 || s.at[next].Before(t)) {
			kind = 2
		}
		switch kind {
		case -1:
			return o
		case 0:
			e := ends[0]
			ends = ends[1:]
			m.remove(e.id)
			r := where[e.id]
			held[r] = slices.DeleteFunc(held[r], func(h [2]time.Time) bool { return h[1].Equal(e.t) })
		case 1:
			e := binds[0]
			binds = binds[1:]
			b, err := m.bind(e.id, e.t, s.running(e.t, held))
			if err != nil {
				o.failed++
				m.remove(e.id)
				continue
			}
			if len(b.Preempt) > 0 {
				o.preempting++
				o.tpc += b.Cost
			}
			end := b.Start.Add(e.dur)
			held[b.Resource] = append(held[b.Resource], [2]time.Time{b.Start, end})
			where[e.id] = b.Resource
			ends = append(ends, ev{end, e.id, 0})
			slices.SortStableFunc(ends, func(a, b ev) int { return a.t.Compare(b.t) })
		case 2:
			q, now := s.reqs[next], s.at[next]
			next++
			if ok, at := m.admit(q, now, s.running(now, held)); ok {
				o.admitted++
				binds = append(binds, ev{at, q.ID, q.Dur})
				slices.SortStableFunc(binds, func(a, b ev) int { return a.t.Compare(b.t) })
			}
		}
	}
}

// The paper's finding (§3.2, experiment 1): DRRM admits fewer requests but
// its total preemption cost is far below both SRRM variants'. 25 resources,
// 200 requests, mean gap 2 s, five seeds, at flexibility 0.5 and at the
// paper's 0.1.
func TestDirectionSynthetic(t *testing.T) {
	for _, flex := range []float64{0.5, 0.1} {
		t.Run(fmt.Sprintf("flexibility %.1f", flex), func(t *testing.T) { direction(t, flex) })
	}
}

func direction(t *testing.T, flex float64) {
	var tot [3]outcome
	names := []string{"DRRM", "SRRM_r", "SRRM_m"}
	for seed := uint64(1); seed <= 5; seed++ {
		s := newSynth(25, 200, 2, flex, seed)
		outs := []outcome{
			s.run(drrm{New(s.res)}),
			s.run(srrm{NewStatic(s.res, StaticRandom, seed)}),
			s.run(srrm{NewStatic(s.res, StaticMinCost, seed)}),
		}
		for i, o := range outs {
			t.Logf("seed %d %-6s AP %5.1f%%  PP %5.1f%%  TPC %6.0f  (bind failures %d)", seed, names[i],
				100*float64(o.admitted)/200, 100*float64(o.preempting)/float64(max(1, o.admitted)), o.tpc, o.failed)
			tot[i].admitted += o.admitted
			tot[i].preempting += o.preempting
			tot[i].failed += o.failed
			tot[i].tpc += o.tpc
		}
	}
	for i, o := range tot {
		t.Logf("all    %-6s AP %5.1f%%  PP %5.1f%%  TPC %6.0f  (bind failures %d)", names[i],
			100*float64(o.admitted)/1000, 100*float64(o.preempting)/float64(max(1, o.admitted)), o.tpc, o.failed)
	}
	if tot[0].tpc >= tot[1].tpc || tot[0].tpc >= tot[2].tpc {
		t.Errorf("DRRM's TPC %.0f is not below SRRM_r's %.0f and SRRM_m's %.0f", tot[0].tpc, tot[1].tpc, tot[2].tpc)
	}
	if tot[0].admitted >= tot[1].admitted || tot[0].admitted >= tot[2].admitted {
		t.Errorf("DRRM admitted %d, not fewer than SRRM_r's %d and SRRM_m's %d", tot[0].admitted, tot[1].admitted, tot[2].admitted)
	}
	if tot[0].failed > 0 {
		t.Errorf("%d admitted DRRM reservations could not be bound", tot[0].failed)
	}
}
