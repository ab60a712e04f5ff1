package remap

import (
	"slices"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Benefit moves waiting jobs as Gain does — whole, to the one site that
// could start the job now and end it soonest, when that gains at least
// MinGain — but hands the free nodes out by benefit (SPEC.md §4, paper 003's
// repetitive mapping): each round every job still waiting for a move is
// matched with its best target among the nodes still free, and the job
// whose move gains the most benefit (its Worth at the new end less its Worth
// at the old end, both against its deadline) moves first; ties go to the
// larger gain in time, then to the older dispatch. A job without a
// deadline gains no benefit, so among such jobs the largest time gain
// moves first.
type Benefit struct{}

var _ policy.Remap = Benefit{}

// Name is BenefitName.
func (Benefit) Name() string { return BenefitName }

// Moves runs one pass.
func (Benefit) Moves(in *policy.RemapInput) ([]policy.Move, error) {
	s, now := in.Snapshot, in.Now
	type cand struct {
		w         int
		fromStart time.Time
		fromEnd   time.Time
	}
	sorted := make([][]policy.Hold, len(s.Sites))
	var cs []cand
	for wi := range in.Waiting {
		w := &in.Waiting[wi]
		fromStart, ok := waitStart(s, w, sorted, now)
		if !ok {
			continue
		}
		cs = append(cs, cand{wi, fromStart, fromStart.Add(s.Runtime(&w.Job, w.Parts))})
	}
	free := slices.Clone(in.Free)
	var out []policy.Move
	for len(cs) > 0 {
		pick, best, bestGain, bestWorth := -1, policy.Option{}, time.Duration(0), 0.0
		for k, c := range cs {
			w := &in.Waiting[c.w]
			o := bestNow(s, w, free, now)
			if o.Parts == nil {
				continue
			}
			gain := c.fromEnd.Sub(o.End())
			if gain < in.MinGain {
				continue
			}
			worth := value(&w.Job, o.End()) - value(&w.Job, c.fromEnd)
			if pick < 0 || worth > bestWorth || (worth == bestWorth && gain > bestGain) {
				pick, best, bestGain, bestWorth = k, o, gain, worth
			}
		}
		if pick < 0 {
			break
		}
		c := cs[pick]
		free[best.Parts[0].Site] -= best.Parts[0].Nodes
		out = append(out, policy.Move{Job: in.Waiting[c.w].Job.ID, To: best, FromStart: c.fromStart, Gain: bestGain})
		cs = slices.Delete(cs, pick, pick+1)
	}
	return out, nil
}

// value is j's benefit when it ends at end: its Worth against its deadline,
// both from its submission (0 without a deadline).
func value(j *policy.Job, end time.Time) float64 {
	if j.Deadline.IsZero() {
		return 0
	}
	return j.Worth.Value(end.Sub(j.Submit), j.Deadline.Sub(j.Submit))
}
