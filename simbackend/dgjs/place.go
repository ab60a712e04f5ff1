package dgjs

import (
	"slices"
	"time"

	"github.com/gridsub/gridsub/policy/dependable"
)

// cand is one resource evaluated for one job now.
type cand struct {
	res   int
	start time.Time
	ct    time.Duration
	rc    time.Duration // RC (dgjs, refine; 0 for min-min, which ranks by CT)
}

// cands ranks the up resources for j now, best first: by RC (dgjs, refine:
// only those meeting the deadline) or by CT (min-min), then CT, then index.
// up reports whether any resource is up at all.
func (s *sim) cands(j *job, curves []dependable.Curve) (out []cand, up bool) {
	now := s.now()
	for ri, r := range s.res {
		if !r.up {
			continue
		}
		up = true
		d := s.dur(j, ri)
		st := r.earliest(now, d)
		ct := st.Sub(now) + d
		c := cand{res: ri, start: st, ct: ct}
		if s.cfg.Policy != PolicyMinMin {
			if !dependable.MeetsDeadline(now, ct, j.deadline) {
				continue
			}
			c.rc = dependable.Cost(curves[ri].R(ct), ct)
		}
		out = append(out, c)
	}
	byCT := s.cfg.Policy == PolicyMinMin
	slices.SortFunc(out, func(a, b cand) int {
		switch {
		case dependable.Better(byCT, a.rc, a.ct, a.res, b.rc, b.ct, b.res):
			return -1
		case dependable.Better(byCT, b.rc, b.ct, b.res, a.rc, a.ct, a.res):
			return 1
		}
		return 0
	})
	return out, up
}

// placeBatch places jobs that need a placement now: dgjs tier by tier
// (high, low, none) then by arrival; refine by arrival; min-min the job
// with the least completion time first, again and again.
func (s *sim) placeBatch(js []*job) {
	var curves []dependable.Curve
	if s.cfg.Policy != PolicyMinMin {
		curves = make([]dependable.Curve, len(s.res))
		for i, r := range s.res {
			curves[i] = s.pred.Curve(r.name, s.now())
		}
	}
	js = slices.Clone(js)
	if s.cfg.Policy != PolicyMinMin {
		slices.SortStableFunc(js, func(a, b *job) int {
			if s.cfg.Policy == PolicyDGJS && a.tier != b.tier {
				return a.tier.Rank() - b.tier.Rank()
			}
			return a.ID - b.ID
		})
		for _, j := range js {
			s.place(j, curves)
		}
		return
	}
	for len(js) > 0 {
		best, bi := cand{}, -1
		for i, j := range js {
			cs, _ := s.cands(j, curves)
			if len(cs) == 0 {
				continue
			}
			if bi < 0 || dependable.Better(true, 0, cs[0].ct, cs[0].res, 0, best.ct, best.res) {
				best, bi = cs[0], i
			}
		}
		if bi < 0 { // nothing up: every job waits
			for _, j := range js {
				s.place(j, curves)
			}
			return
		}
		s.place(js[bi], curves)
		js = slices.Delete(js, bi, bi+1)
	}
}

// place gives j its copies by its strategy, or makes it wait (no resource
// up), or gives it up (attempts spent, or no resource meets its deadline).
func (s *sim) place(j *job, curves []dependable.Curve) {
	if j.done {
		return
	}
	if j.attempts >= s.cfg.MaxAttempts {
		s.giveUp(j)
		return
	}
	cs, up := s.cands(j, curves)
	if !up {
		if !j.waiting {
			j.waiting = true
			s.waiting = append(s.waiting, j)
		}
		return
	}
	if len(cs) == 0 {
		s.giveUp(j) // Algorithm 1: no resource meets the deadline
		return
	}
	j.attempts++
	p := s.book(j, cs[0].res, kPrimary, cs[0].start, false)
	if len(cs) < 2 {
		return
	}
	switch j.strat {
	case stReplicate:
		s.book(j, cs[1].res, kReplica, cs[1].start, false)
	case stBackup:
		b := cs[1].res
		d := s.dur(j, b)
		if j.deadline.IsZero() {
			// No latest start: a passive reservation right after the
			// primary's expected end.
			s.book(j, b, kBackup, s.res[b].earliest(p.end, d), true)
			return
		}
		lst, ok := s.res[b].latest(s.now(), d, j.deadline)
		if !ok {
			return
		}
		// Equation (14): active when the primary's expected end reaches
		// the backup's latest start.
		s.book(j, b, kBackup, lst, p.end.Before(lst))
	}
}
