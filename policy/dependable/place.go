package dependable

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Placement rules.
const (
	// DGJS is Algorithm 1: the least RC among the sites whose idle gap fits
	// the job and that meet its deadline; queues served by tier.
	DGJS = "dgjs"
	// MinMin ignores reliability: the least completion time, the job with
	// the least of them placed first (Min-min), no tiers.
	MinMin = "min-min"
	// Refine is the least RC among the sites meeting the deadline, FCFS, no
	// tiers (its fault tolerance, primary–backup for every job, is the
	// caller's).
	Refine = "refine"
)

// Modes lists the placement rules.
func Modes() []string { return []string{DGJS, MinMin, Refine} }

// Reliabilities gives a site's reliability curve at a time. *Predictor
// implements it; a planner reads it and never changes it.
type Reliabilities interface {
	Curve(site string, at time.Time) Curve
}

var _ Reliabilities = (*Predictor)(nil)

// Planner places single-site jobs by reliability cost, as a policy.Planner.
//
// For each queued job (DGJS: tier by tier, high first, FCFS inside a tier;
// MinMin: least completion time first; Refine: FCFS) and each allowed site
// that is up and big enough, it computes CT = run + transfer + SL (SL the
// time until the job's width is free there, from the site's holds: the
// schedule length), and RC = (1 − r)·CT with r from Reliabilities at
// Snapshot.Now. DGJS and Refine keep only the sites meeting the deadline
// (now + CT ≤ deadline); Min-min has no notion of one. The least RC wins (MinMin: the least CT), ties by
// CT then site index. The job starts (Start) when its width is free there
// now (its idle gap begins now), and otherwise waits (Plan.Pending says
// where and why); a site's started jobs hold its nodes for CT in this
// pass. The runner-up sites, best first, are in Decision.Beaten (up to
// Beaten): a replica's or backup's site for the tier's fault tolerance.
//
// A job wider than every allowed site is rejected; a job no site can finish
// by its deadline waits with that reason (Algorithm 1 leaves it
// unscheduled). Deterministic: equal snapshots and reliabilities give equal
// plans; no clock, no randomness.
type Planner struct {
	Mode string // DGJS (default), MinMin or Refine
	// Rel gives the reliability curves; nil means every site has r = 1
	// (RC = 0: ties by CT, the plain earliest completion).
	Rel Reliabilities
	// Lambda is Tier's λ for jobs whose tier is derived (default
	// DefaultLambda when 0 — set a tiny positive value for λ = 0).
	Lambda float64
	// TierOf returns a job's tier when it is fixed: the user's explicit
	// one, or the one a live broker derived at submission and keeps (so
	// that a tier never changes behind the user's back). nil or ok=false
	// derives it with Tier in every pass, from the job's allowed sites as
	// the snapshot shows them.
	TierOf func(j *policy.Job) (q QoS, ok bool)
	// Beaten is how many runner-up sites a decision keeps (default 2;
	// negative keeps none).
	Beaten int
}

var _ policy.Planner = (*Planner)(nil)

// Name is "dependable-<mode>".
func (p *Planner) Name() string { return "dependable-" + p.mode() }

func (p *Planner) mode() string {
	if p.Mode == "" {
		return DGJS
	}
	return p.Mode
}

// siteCal is one site's calendar in a pass: nodes free now and the holds'
// ends in time order with the nodes freed by then.
type siteCal struct {
	free  int
	ends  []time.Time // ascending
	cum   []int       // cum[i] = nodes freed by ends[0..i]
	curve Curve
	ok    bool // up and usable
}

// wait is SL: how long from now until w nodes are free; ok=false when the
// site can never hold w.
func (c *siteCal) wait(now time.Time, w int) (time.Duration, bool) {
	if w <= c.free {
		return 0, true
	}
	need := w - c.free
	i := sort.SearchInts(c.cum, need)
	if i == len(c.cum) {
		return 0, false
	}
	if d := c.ends[i].Sub(now); d > 0 {
		return d, true
	}
	return 0, true
}

func (c *siteCal) hold(n int, until time.Time) {
	c.free -= n
	i, _ := slices.BinarySearchFunc(c.ends, until, func(a, b time.Time) int { return a.Compare(b) })
	c.ends = slices.Insert(c.ends, i, until)
	c.cum = slices.Insert(c.cum, i, 0)
	prev := 0
	if i > 0 {
		prev = c.cum[i-1]
	}
	c.cum[i] = prev + n
	for k := i + 1; k < len(c.cum); k++ {
		c.cum[k] += n
	}
}

// cand is one site evaluated for one job.
type cand struct {
	site     int
	ct       time.Duration
	run, xfr time.Duration
	sl       time.Duration
	rc       time.Duration
	r        float64
}

func (a cand) better(b cand, byCT bool) bool {
	return Better(byCT, a.rc, a.ct, a.site, b.rc, b.ct, b.site)
}

// Better is the order in which Algorithm 1 and its baselines rank two
// placements of one job: the least RC (unless byCT: Min-min ignores
// reliability), then the least CT, then the lower site index. The
// Planner and the paper-004 simulation (simbackend/dgjs) both rank with it.
func Better(byCT bool, rcA, ctA time.Duration, siteA int, rcB, ctB time.Duration, siteB int) bool {
	if !byCT && rcA != rcB {
		return rcA < rcB
	}
	if ctA != ctB {
		return ctA < ctB
	}
	return siteA < siteB
}

// MeetsDeadline is Algorithm 1's test: a job whose completion time from now
// is ct meets deadline (zero: none) if now + ct ≤ deadline.
func MeetsDeadline(now time.Time, ct time.Duration, deadline time.Time) bool {
	return deadline.IsZero() || !now.Add(ct).After(deadline)
}

// Plan makes one pass; see Planner.
func (p *Planner) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	mode := p.mode()
	if mode != DGJS && mode != MinMin && mode != Refine {
		return nil, fmt.Errorf("dependable: unknown mode %q (valid: %v)", p.Mode, Modes())
	}
	lambda := p.Lambda
	if lambda == 0 {
		lambda = DefaultLambda
	}
	keep := p.Beaten
	if keep == 0 {
		keep = 2
	}
	if s.Quiet || keep < 0 {
		keep = 0
	}
	if err := checkSnapshot(s); err != nil {
		return nil, err
	}
	all := make([]int, len(s.Sites))
	for i := range all {
		all[i] = i
	}
	now := s.Now
	cals := make([]siteCal, len(s.Sites))
	for i := range s.Sites {
		st := &s.Sites[i]
		c := &cals[i]
		c.free = st.Free
		c.ok = !st.Down && st.Nodes > 0 && st.H > 0
		if !c.ok {
			continue
		}
		hs := slices.Clone(st.Busy)
		slices.SortStableFunc(hs, func(a, b policy.Hold) int { return a.Until.Compare(b.Until) })
		c.ends = make([]time.Time, len(hs), len(hs)+8)
		c.cum = make([]int, len(hs), len(hs)+8)
		n := 0
		for k, h := range hs {
			n += h.Nodes
			c.ends[k], c.cum[k] = h.Until, n
		}
		if p.Rel != nil {
			c.curve = p.Rel.Curve(st.Name, now)
		}
	}
	plan := &policy.Plan{}
	order := make([]int, len(s.Queue))
	for i := range order {
		order[i] = i
	}
	tiers := make([]QoS, len(s.Queue))
	whys := make([]string, len(s.Queue))
	if mode == DGJS {
		for i := range s.Queue {
			tiers[i], whys[i] = p.tier(s, &s.Queue[i], lambda, all)
		}
		slices.SortStableFunc(order, func(a, b int) int { return tiers[a].Rank() - tiers[b].Rank() })
	}
	var best []cand // scratch: the best keep+1 candidates of a job
	eval := func(j *policy.Job) (cands []cand, bigEnough bool) {
		best = best[:0]
		for _, si := range allowed(j, all) {
			if s.Sites[si].Nodes < j.Width {
				continue
			}
			bigEnough = true
			c := &cals[si]
			if !c.ok {
				continue
			}
			sl, ok := c.wait(now, j.Width)
			if !ok {
				continue
			}
			run := time.Duration(float64(j.Estimate) * s.Sites[si].H)
			xfr := s.TransferTime(j.Origin, si, j.DataSize)
			ct := CT(run, xfr, sl)
			if mode != MinMin && !MeetsDeadline(now, ct, j.Deadline) {
				continue
			}
			k := cand{site: si, ct: ct, run: run, xfr: xfr, sl: sl}
			if mode != MinMin {
				k.r = c.curve.R(ct)
				k.rc = Cost(k.r, ct)
			} else {
				k.r = math.NaN()
			}
			// insert into the short sorted list
			pos := len(best)
			for pos > 0 && k.better(best[pos-1], mode == MinMin) {
				pos--
			}
			if pos <= keep {
				best = slices.Insert(best, pos, k)
				if len(best) > keep+1 {
					best = best[:keep+1]
				}
			}
		}
		return best, bigEnough
	}
	decide := func(qi int, cs []cand) {
		j := &s.Queue[qi]
		b := cs[0]
		opt := policy.Option{Parts: []policy.Part{{Site: b.site, Nodes: j.Width}}, Start: now.Add(b.sl), Runtime: b.run, Transfer: b.xfr, Immediate: b.sl == 0}
		if b.sl > 0 {
			if !s.Quiet {
				plan.Pending = append(plan.Pending, policy.Pending{Job: j.ID, Status: policy.NewStatus(policy.Unschedulable, p.Name(),
					fmt.Sprintf("least %s at %s, where %d nodes are free in %v", p.metric(), s.Sites[b.site].Name, j.Width, b.sl))})
			}
			return
		}
		cals[b.site].hold(j.Width, now.Add(b.ct))
		d := policy.Decision{Job: j.ID, Action: policy.Start, Chosen: opt}
		if !s.Quiet {
			reasons := []string{p.explain(s, b)}
			if mode == DGJS {
				reasons = append([]string{whys[qi]}, reasons...)
			}
			for _, o := range cs[1:] {
				d.Beaten = append(d.Beaten, policy.Option{Parts: []policy.Part{{Site: o.site, Nodes: j.Width}}, Start: now.Add(o.sl), Runtime: o.run, Transfer: o.xfr, Immediate: o.sl == 0})
				reasons = append(reasons, "beat "+p.explain(s, o))
			}
			d.Status = policy.NewStatus(policy.Success, p.Name(), reasons...)
		}
		plan.Decisions = append(plan.Decisions, d)
	}
	nothing := func(qi int, bigEnough bool) {
		j := &s.Queue[qi]
		switch {
		case !bigEnough:
			plan.Decisions = append(plan.Decisions, policy.Decision{Job: j.ID, Action: policy.Reject,
				Status: policy.NewStatus(policy.Unresolvable, p.Name(), fmt.Sprintf("no allowed site has %d nodes", j.Width))})
		case !s.Quiet:
			why := "no allowed site big enough is up"
			if bigEnough {
				why = fmt.Sprintf("no site up can finish it by its deadline %s", j.Deadline.UTC().Format(time.RFC3339))
			}
			plan.Pending = append(plan.Pending, policy.Pending{Job: j.ID, Status: policy.NewStatus(policy.Unschedulable, p.Name(), why)})
		}
	}
	if mode != MinMin {
		for _, qi := range order {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			cs, big := eval(&s.Queue[qi])
			if len(cs) == 0 {
				nothing(qi, big)
				continue
			}
			decide(qi, cs)
		}
		return plan, nil
	}
	// Min-min: each round places the job whose best completion time is the
	// least. A job's best only changes when its best site takes a job.
	type mm struct {
		c    []cand
		done bool
	}
	st := make([]mm, len(s.Queue))
	left := 0
	for qi := range s.Queue {
		cs, big := eval(&s.Queue[qi])
		if len(cs) == 0 {
			nothing(qi, big)
			st[qi].done = true
			continue
		}
		st[qi].c = slices.Clone(cs)
		left++
	}
	for ; left > 0; left-- {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pick := -1
		for qi := range st {
			if !st[qi].done && (pick < 0 || st[qi].c[0].better(st[pick].c[0], true)) {
				pick = qi
			}
		}
		if pick < 0 {
			break
		}
		st[pick].done = true
		site := st[pick].c[0].site
		decide(pick, st[pick].c)
		for qi := range st {
			if !st[qi].done && st[qi].c[0].site == site {
				cs, big := eval(&s.Queue[qi])
				if len(cs) == 0 {
					nothing(qi, big)
					st[qi].done = true
					left--
					continue
				}
				st[qi].c = append(st[qi].c[:0], cs...)
			}
		}
	}
	return plan, nil
}

func (p *Planner) metric() string {
	if p.mode() == MinMin {
		return "CT"
	}
	return "RC"
}

func (p *Planner) explain(s *policy.Snapshot, c cand) string {
	if p.mode() == MinMin {
		return fmt.Sprintf("%s: CT %v (run %v + transfer %v + queue %v)", s.Sites[c.site].Name, c.ct, c.run, c.xfr, c.sl)
	}
	return fmt.Sprintf("%s: RC %v = (1 − r %.4f)·CT %v (run %v + transfer %v + queue %v)", s.Sites[c.site].Name, c.rc, c.r, c.ct, c.run, c.xfr, c.sl)
}

// tier is the job's explicit tier or the one Tier derives from its
// deadline, with CT_min the least run + transfer over its allowed sites.
func (p *Planner) tier(s *policy.Snapshot, j *policy.Job, lambda float64, all []int) (QoS, string) {
	if p.TierOf != nil {
		if q, ok := p.TierOf(j); ok && q != Auto {
			return q, fmt.Sprintf("tier %s, as the job asks", q)
		}
	}
	if j.Deadline.IsZero() {
		if s.Quiet {
			return None, ""
		}
		return Tier(j.Submit, j.Deadline, 0, lambda)
	}
	ctMin := time.Duration(math.MaxInt64)
	for _, si := range allowed(j, all) {
		if s.Sites[si].Nodes < j.Width || s.Sites[si].H <= 0 {
			continue
		}
		ct := time.Duration(float64(j.Estimate)*s.Sites[si].H) + s.TransferTime(j.Origin, si, j.DataSize)
		ctMin = min(ctMin, ct)
	}
	if ctMin == time.Duration(math.MaxInt64) {
		ctMin = j.Estimate
	}
	if s.Quiet && ValidLambda(lambda) == nil {
		q, _, _ := tierOf(j.Submit, j.Deadline, ctMin, lambda)
		return q, ""
	}
	return Tier(j.Submit, j.Deadline, ctMin, lambda)
}

// allowed lists the site indices a job may use (all: every index).
func allowed(j *policy.Job, all []int) []int {
	if j.Allowed != nil {
		return j.Allowed
	}
	return all
}

// checkSnapshot refuses what the model cannot use: a job with no width, a
// negative estimate or an allowed site out of range.
func checkSnapshot(s *policy.Snapshot) error {
	for i := range s.Queue {
		j := &s.Queue[i]
		if j.Width < 1 || j.Estimate < 0 {
			return fmt.Errorf("dependable: job %s: width %d and estimate %v (want >= 1 and >= 0)", j.ID, j.Width, j.Estimate)
		}
		for _, a := range j.Allowed {
			if a < 0 || a >= len(s.Sites) {
				return fmt.Errorf("dependable: job %s: allowed site %d out of range (%d sites)", j.ID, a, len(s.Sites))
			}
		}
	}
	return nil
}
