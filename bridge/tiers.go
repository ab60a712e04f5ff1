package bridge

import (
	"fmt"
	"slices"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Dependability tiers (SPEC.md §5). A job gets one at submission and keeps
// it: TierHigh runs two copies at once (replication), TierLow a primary and
// a backup (primary–backup), TierNone one copy, retried after a failure.
const (
	TierHigh = "high"
	TierLow  = "low"
	TierNone = "none"
)

// DefaultLambda is SPEC.md §5's adjustment λ of the tier rule (the paper's).
const DefaultLambda = 1.5

// DefaultDownAfter is how long a site may fail to answer before the
// components it runs count as lost (TierOptions.DownAfter).
const DefaultDownAfter = 2 * time.Minute

// TierOptions turn the dependability tiers on (Options.Tiers).
type TierOptions struct {
	// Lambda is λ of the tier rule: a job whose deadline t_d satisfies
	// t_d ≤ submit + (1+λ)·CT_min is high, a later deadline is low, no
	// deadline is none (SPEC.md §5's decision: the tighter deadline is the
	// high tier). 0 means DefaultLambda; it must not be negative.
	Lambda float64
	// DownAfter: a site whose status calls keep failing this long has
	// lost the components it runs (they count as StateLost, so backups
	// start and retries go elsewhere). 0 means DefaultDownAfter.
	DownAfter time.Duration
	// Reliability, when set, ranks the sites of copies by reliability
	// cost and learns from the failures the broker sees. nil: copies go
	// to the planner's choice and the next best disjoint site.
	Reliability Reliability
}

// Reliability is the availability model behind the tiers (paper 004's
// Markov predictor, policy/dependable). RC is the reliability cost of
// running for ct at site: (1 − r)·ct, lower is better; it must be
// deterministic for the same observations. Observe tells the model what
// happened at a site at time at: up=false when the site stopped answering,
// up=true when it answers again. Lost says the site lost a job or a node
// while it kept answering (losses.go says what counts); the broker reports
// at most one loss per site per cycle. All are called under the broker's
// lock and must not block or call the broker.
type Reliability interface {
	RC(site string, ct time.Duration) float64
	Observe(site string, up bool, at time.Time)
	Lost(site string, at time.Time)
}

func (t *TierOptions) lambda() float64 {
	if t.Lambda == 0 {
		return DefaultLambda
	}
	return t.Lambda
}

func (t *TierOptions) downAfter() time.Duration {
	if t == nil || t.DownAfter <= 0 {
		return DefaultDownAfter
	}
	return t.DownAfter
}

// checkTier refuses what a request's QoS cannot give on this broker.
func (ik *intake) checkTier(p *problems, req *Request) {
	t := req.QoS
	if t != TierHigh && t != TierLow {
		return
	}
	if ik.opts.Tiers == nil {
		p.addf("QoS", "%q needs a broker with QoS tiers (bridge.Options.Tiers); this one runs one copy per attempt", t)
	} else if req.Window != nil {
		p.addf("QoS", "%q cannot be combined with a reservation window: a reservation holds one site", t)
	}
}

// tierOf derives a job's tier at submission (SPEC.md §5) and says why: an
// explicit tier wins; auto is none without a deadline, else high when the
// deadline is within (1+λ)·CT_min of the submission, low otherwise.
// CT_min is the estimate on the fastest allowed site (run time only: the
// queue and the transfer are not known at submission).
func (ik *intake) tierOf(r *Request, now time.Time) (tier, why string) {
	sites := make([]policy.Site, len(ik.sites))
	for i, s := range ik.sites {
		sites[i] = policy.Site{Name: s.Name, H: s.H}
	}
	t, why := ik.opts.tiering().Tier(&policy.TierDemand{Asked: policy.Tier(r.QoS), Deadline: r.Deadline, Estimate: r.Estimate,
		Sites: r.Sites, Submit: now, Lambda: ik.opts.Tiers.lambda()}, sites)
	return string(t), why
}

// assignTier gives a new job its tier and the submission event saying so.
// Without Options.Tiers the job gets none ("").
func (ik *intake) assignTier(j *Job, now time.Time) {
	if ik.opts.Tiers == nil || j.Req.Window != nil {
		return
	}
	j.Tier, j.TierWhy = ik.tierOf(&j.Req, now)
	if !ik.opts.NoHistory {
		j.Events = append(j.Events, Event{Time: now, Kind: "tier", Msg: tierMsg(j.Tier, j.TierWhy)})
	}
}

func tierMsg(tier, why string) string {
	what := map[string]string{TierHigh: "replication: two copies at once, the first to succeed wins",
		TierLow: "primary–backup: a backup on another site", TierNone: "retry after a failure, elsewhere"}[tier]
	return fmt.Sprintf("tier %s (%s): %s", tier, what, why)
}

func tierRank(t string) int {
	switch t {
	case TierHigh:
		return 0
	case TierLow:
		return 1
	}
	return 2
}

// tierOrder serves the queue high → low → none, FCFS inside a tier (the
// queue is in FCFS order already). It returns q itself when no queued job
// is above none. The ledger's lock held.
func (cp *copies) tierOrder(q []policy.Job) []policy.Job {
	if cp.opts.Tiers == nil {
		return q
	}
	mixed := false
	for i := range q {
		if j := cp.jobs[q[i].ID]; j != nil && j.Tier != TierNone && j.Tier != "" {
			mixed = true
			break
		}
	}
	if !mixed {
		return q
	}
	cp.buf = append(cp.buf[:0], q...)
	slices.SortStableFunc(cp.buf, func(x, y policy.Job) int {
		return tierRank(cp.jobs[x.ID].Tier) - tierRank(cp.jobs[y.ID].Tier)
	})
	return cp.buf[:len(cp.buf):len(cp.buf)]
}
