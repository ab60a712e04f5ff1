package dependable

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// TieringName is the name of the built-in policy.Tiering: paper 004's tier
// rule, replication and primary–backup.
const TieringName = "dgjs"

// TieringNames lists the built-in tiering policies.
func TieringNames() []string { return []string{TieringName} }

// TieringByName returns the built-in tiering policy of that name; the error
// names the valid ones.
func TieringByName(name string) (policy.Tiering, error) {
	if strings.ToLower(strings.TrimSpace(name)) == TieringName {
		return Tiering{}, nil
	}
	return nil, fmt.Errorf("unknown tiering %q: valid are %s", name, strings.Join(TieringNames(), ", "))
}

// Tiering is the broker's dependability rule (SPEC.md §5) as a
// policy.Tiering: the tier from the deadline, the copies' sites by room,
// reliability cost and predicted end, and an active or passive backup.
type Tiering struct{}

var _ policy.Tiering = Tiering{}

// Name is TieringName.
func (Tiering) Name() string { return TieringName }

// Tier derives a request's tier and says why: an explicit tier wins; else
// none without a deadline, high when the deadline is within (1+λ)·CT_min of
// the submission, low otherwise. CT_min is the run time on the fastest
// allowed site, Estimate·h for the least h (Site.H, a run-time multiplier;
// 0 or less counts as 1, and with no allowed site known h is 1): run time
// only, the queue and the transfer are not known at submission. λ 0 means
// DefaultLambda.
func (Tiering) Tier(d *policy.TierDemand, sites []policy.Site) (policy.Tier, string) {
	switch d.Asked {
	case policy.TierHigh, policy.TierLow, policy.TierNone:
		return d.Asked, "asked for in the job file (scheduling.qos: " + string(d.Asked) + ")"
	}
	if d.Deadline.IsZero() {
		return policy.TierNone, "auto: no deadline"
	}
	h := 0.0 // the least run-time multiplier of the allowed sites
	for _, s := range sites {
		if len(d.Sites) == 0 || slices.Contains(d.Sites, s.Name) {
			sh := s.H
			if sh <= 0 {
				sh = 1
			}
			if h == 0 || sh < h {
				h = sh
			}
		}
	}
	if h == 0 {
		h = 1 // no allowed site known: the reference machine
	}
	ctMin := time.Duration(float64(d.Estimate) * h)
	lam := d.Lambda
	if lam == 0 {
		lam = DefaultLambda
	}
	limit := d.Submit.Add(time.Duration((1 + lam) * float64(ctMin)))
	if !d.Deadline.After(limit) {
		return policy.TierHigh, fmt.Sprintf("auto: deadline %s is within submit + (1+λ)·CT_min = %s (λ=%g, CT_min=%s)",
			d.Deadline.UTC().Format(time.RFC3339), limit.UTC().Format(time.RFC3339), lam, ctMin.Round(time.Second))
	}
	return policy.TierLow, fmt.Sprintf("auto: deadline %s is after submit + (1+λ)·CT_min = %s (λ=%g, CT_min=%s)",
		d.Deadline.UTC().Format(time.RFC3339), limit.UTC().Format(time.RFC3339), lam, ctMin.Round(time.Second))
}

// Copies chooses the copies' placements: copy 0 is the planner's choice —
// or, with a reliability model and a job that fits one site, the least-RC
// site with room — and copy 1 the best other site big enough for the whole
// job: one with the nodes free now first, then least RC when a model is
// set, then earliest predicted end, then site order (deterministic); else a
// disjoint placement the planner beat. nil second: no other placement can
// hold the job.
func (Tiering) Copies(in *policy.CopyInput) (first, second []policy.Part) {
	s, pj, d := in.Snapshot, in.Job, in.Decision
	first = d.Chosen.Parts
	if d.Action == policy.Replicate && len(first) > 1 {
		first = first[:1] // a replicating planner lists whole copies, not shares: take its best
	}
	type cand struct {
		s    int
		room bool
		rc   float64
		end  time.Duration
	}
	var cs []cand
	for i := range s.Sites {
		si := &s.Sites[i]
		if si.Down || si.Nodes < pj.Width || (pj.Allowed != nil && !slices.Contains(pj.Allowed, i)) {
			continue
		}
		parts := []policy.Part{{Site: i, Nodes: pj.Width}}
		c := cand{s: i, room: si.Free >= pj.Width, end: s.Runtime(pj, parts) + s.Transfer(pj, parts)}
		if in.RC != nil {
			c.rc = in.RC[i]
		}
		cs = append(cs, c)
	}
	slices.SortStableFunc(cs, func(x, y cand) int {
		if x.room != y.room {
			if x.room {
				return -1
			}
			return 1
		}
		if x.rc != y.rc {
			if x.rc < y.rc {
				return -1
			}
			return 1
		}
		return int(x.end - y.end)
	})
	if in.RC != nil && len(first) == 1 && len(cs) >= 2 && cs[0].room && cs[1].room {
		return []policy.Part{{Site: cs[0].s, Nodes: pj.Width}}, []policy.Part{{Site: cs[1].s, Nodes: pj.Width}}
	}
	for _, c := range cs {
		if !slices.ContainsFunc(first, func(p policy.Part) bool { return p.Site == c.s }) {
			return first, []policy.Part{{Site: c.s, Nodes: pj.Width}}
		}
	}
	// No single other site: a co-allocated alternative the planner beat,
	// disjoint from the first.
	for _, o := range d.Beaten {
		if !slices.ContainsFunc(o.Parts, func(p policy.Part) bool {
			return slices.ContainsFunc(first, func(q policy.Part) bool { return q.Site == p.Site })
		}) {
			return first, o.Parts
		}
	}
	return first, nil
}

// Backup decides whether a low job's backup is active or passive
// (submitted only if the primary fails), and says why. An active backup is
// submitted as late as the rule allows: at Due, its latest start (the
// deadline less its run and transfer), which is not after the primary's
// expected end. Without a deadline the backup is passive.
func (Tiering) Backup(in *policy.BackupInput) policy.Backup {
	s, pj, now, primary := in.Snapshot, in.Job, in.Now, in.Primary
	if pj.Deadline.IsZero() {
		return policy.Backup{Passive: true, Why: "passive: no deadline, so the backup waits for the primary to fail"}
	}
	run := s.Runtime(pj, in.Backup) + s.Transfer(pj, in.Backup)
	latest := pj.Deadline.Add(-run)
	if primary.Start.Before(now) {
		primary.Start = now
	}
	if primary.Runtime <= 0 {
		primary.Runtime = s.Runtime(pj, primary.Parts)
		primary.Transfer = s.Transfer(pj, primary.Parts)
	}
	end := primary.End()
	if !latest.After(end) {
		return policy.Backup{Due: latest, Why: fmt.Sprintf("active: its latest start %s is not after the primary's expected end %s, so it starts then",
			latest.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339))}
	}
	return policy.Backup{Passive: true, Why: fmt.Sprintf("passive: its latest start %s is after the primary's expected end %s",
		latest.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339))}
}
