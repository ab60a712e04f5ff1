package bridge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// UserLimits bound one user's jobs; 0 is no bound.
//
// MaxQueued bounds the jobs waiting (queued or held, a group's elements
// not yet made included): a submission that would go over is refused
// with ErrOverLimit and the numbers. MaxRunning bounds the jobs
// dispatched or running at once, MaxRunningPerSite those at one site: a
// queued job over either stays queued, held out of planning with the
// reason in its Reason ("waiting: user limit ..."), shown by status and
// explain, until one of the user's jobs ends.
type UserLimits struct {
	MaxQueued         int `json:"max_queued,omitempty"`
	MaxRunning        int `json:"max_running,omitempty"`
	MaxRunningPerSite int `json:"max_running_per_site,omitempty"`
	// Shares are the user's shares of the machine for fair share
	// (Policies.Order); 0: the default entry's, or 1.
	Shares float64 `json:"shares,omitempty"`
}

// DefaultUser is the Options.Users entry of every user without one.
const DefaultUser = "default"

// limitReason starts the Reason of a job held by a user limit.
const limitReason = "waiting: user limit: "

// ownerOf is the user a job counts for: its Request.Owner, or the
// daemon's (Options.Owner).
func (o *Options) ownerOf(r *Request) string {
	if r.Owner == "" {
		return o.Owner
	}
	return r.Owner
}

// limitsOf are the limits of user u.
func (o *Options) limitsOf(u string) UserLimits {
	if l, ok := o.Users[u]; ok {
		return l
	}
	return o.Users[DefaultUser]
}

// checkQueued refuses a submission of req (n jobs: 1, or a group's
// elements) that would take its user over MaxQueued. The ledger's lock
// is taken here; the caller serialises submissions (Broker.Submit holds
// intake.limitMu) so that two of them cannot both pass.
func (b *Broker) checkQueued(req *Request, n int) error {
	u := b.opts.ownerOf(req)
	lim := b.opts.limitsOf(u).MaxQueued
	if lim <= 0 {
		return nil
	}
	b.mu.Lock()
	waiting := 0
	for _, ids := range [][]string{b.queue, b.held} {
		for _, id := range ids {
			j := b.jobs[id]
			if j == nil || b.opts.ownerOf(&j.Req) != u || j.State.Final() {
				continue
			}
			if g := j.Group; g != nil {
				waiting += g.Total - g.Made // its elements to come; the made ones are counted on their own
				continue
			}
			waiting++
		}
	}
	b.mu.Unlock()
	if waiting+n > lim {
		return fmt.Errorf("%w: user %s has %d job(s) waiting and this submission adds %d; max_queued is %d (users: in the configuration). "+
			"Wait for some to start, or cancel some", ErrOverLimit, u, waiting, n, lim)
	}
	return nil
}

// submissionSize is how many jobs a request makes: its group's elements,
// or 1.
func submissionSize(req *Request) int {
	if !req.grouped() {
		return 1
	}
	r := req.clone()
	_, idx := newGroup(&r, &problems{})
	return max(1, len(idx))
}

// holdOverLimit holds out of the snapshot's queue the jobs whose user is
// at MaxRunning, and takes from each job's allowed sites those where its
// user is at MaxRunningPerSite. A user's queued jobs count against the
// limits in queue order as if each kept one were started: the plan can
// never start more than the limits leave. A held job's Reason says which
// limit; it is cleared once the job is planned again. The ledger's lock
// is taken here.
func (ps *planStage) holdOverLimit(ctx context.Context, now time.Time, snap *policy.Snapshot) userCounts {
	if len(ps.opts.Users) == 0 {
		return nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	running := map[string]int{}
	atSite := map[string]map[string]int{}
	for _, id := range ps.live {
		j := ps.jobs[id]
		if j == nil {
			continue
		}
		u := ps.opts.ownerOf(&j.Req)
		running[u]++
		seen := map[string]bool{}
		for _, c := range j.Comps {
			if c.Site != "" && !seen[c.Site] {
				seen[c.Site] = true
				if atSite[u] == nil {
					atSite[u] = map[string]int{}
				}
				atSite[u][c.Site]++
			}
		}
	}
	kept := map[string]int{}
	out := make([]policy.Job, 0, len(snap.Queue))
	for _, pj := range snap.Queue {
		j := ps.jobs[pj.ID]
		if j == nil {
			out = append(out, pj)
			continue
		}
		u := ps.opts.ownerOf(&j.Req)
		lim := ps.opts.limitsOf(u)
		why := ""
		if lim.MaxRunning > 0 && running[u]+kept[u] >= lim.MaxRunning {
			why = fmt.Sprintf("%s%s has %d job(s) running and %d about to start; max_running is %d", limitReason, u, running[u], kept[u], lim.MaxRunning)
		} else if lim.MaxRunningPerSite > 0 {
			var allowed []int
			var full []string
			for i := range snap.Sites {
				if pj.Allowed != nil && !slices.Contains(pj.Allowed, i) {
					continue
				}
				if atSite[u][snap.Sites[i].Name] >= lim.MaxRunningPerSite {
					full = append(full, snap.Sites[i].Name)
					continue
				}
				allowed = append(allowed, i)
			}
			if len(allowed) == 0 {
				why = fmt.Sprintf("%s%s is at max_running_per_site %d at every site the job may use (%s)", limitReason, u, lim.MaxRunningPerSite, strings.Join(full, ", "))
			} else if len(full) > 0 {
				pj.Allowed = allowed // a new slice: the ledger's view is untouched
			}
		}
		if why != "" {
			if j.Reason != why {
				j.Reason = why
				ps.record(ctx, j, now, "waiting", "", why[len("waiting: "):])
			}
			continue
		}
		if strings.HasPrefix(j.Reason, limitReason) {
			j.Reason = ""
			_ = ps.save(ctx, j)
		}
		kept[u]++
		out = append(out, pj)
	}
	snap.Queue = out
	return atSite
}

// userCounts are each user's jobs dispatched or running, by site name.
type userCounts map[string]map[string]int

// trimOverLimit drops from the plan the starts that would take a user
// over MaxRunningPerSite at a site: the sites of earlier starts of the
// same plan count (holdOverLimit could only take full sites away, not
// know where the planner puts each job). A dropped job stays queued with
// the reason. The ledger's lock is taken here.
func (ps *planStage) trimOverLimit(ctx context.Context, now time.Time, snap *policy.Snapshot, plan *policy.Plan, atSite userCounts) {
	if atSite == nil || plan == nil {
		return
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var keep []policy.Decision
	for k, d := range plan.Decisions {
		j := ps.jobs[d.Job]
		if j == nil || (d.Action != policy.Start && d.Action != policy.Replicate) {
			if keep != nil {
				keep = append(keep, d)
			}
			continue
		}
		u := ps.opts.ownerOf(&j.Req)
		lim := ps.opts.limitsOf(u).MaxRunningPerSite
		var sites []string
		for _, pt := range d.Chosen.Parts {
			if pt.Site >= 0 && pt.Site < len(snap.Sites) && !slices.Contains(sites, snap.Sites[pt.Site].Name) {
				sites = append(sites, snap.Sites[pt.Site].Name)
			}
		}
		over := ""
		for _, s := range sites {
			if lim > 0 && atSite[u][s]+1 > lim {
				over = s
			}
		}
		if over == "" {
			if atSite[u] == nil {
				atSite[u] = map[string]int{}
			}
			for _, s := range sites {
				atSite[u][s]++
			}
			if keep != nil {
				keep = append(keep, d)
			}
			continue
		}
		if keep == nil {
			keep = append(make([]policy.Decision, 0, len(plan.Decisions)), plan.Decisions[:k]...)
		}
		why := fmt.Sprintf("%s%s would have %d job(s) at %s; max_running_per_site is %d", limitReason, u, atSite[u][over]+1, over, lim)
		if j.Reason != why {
			j.Reason = why
			ps.record(ctx, j, now, "waiting", "", why[len("waiting: "):])
		}
	}
	if keep != nil {
		plan.Decisions = keep
	}
}

// orderQueue puts the snapshot's queue in the order of Policies.Order,
// which sees the running jobs and the users' accounted use of the jobs
// that ended (the ledger's, kept in the Store across restarts). An
// Order that fails or answers something that is not a permutation leaves
// the broker's order, with a log line. The ledger's lock is taken here.
func (ps *planStage) orderQueue(snap *policy.Snapshot, now time.Time) {
	o := ps.opts.Policies.Order
	if o == nil || len(snap.Queue) < 2 {
		return
	}
	in := &policy.OrderInput{Now: now, HalfLife: ps.opts.FairShareHalfLife, Shares: map[string]float64{},
		DefaultShares: ps.opts.Users[DefaultUser].Shares}
	for u, l := range ps.opts.Users {
		if l.Shares > 0 && u != DefaultUser {
			in.Shares[u] = l.Shares
		}
	}
	ps.mu.Lock()
	for _, pj := range snap.Queue {
		q := policy.QueuedJob{ID: pj.ID, Nodes: pj.Width}
		if j := ps.jobs[pj.ID]; j != nil {
			q.User, q.Submit = ps.opts.ownerOf(&j.Req), j.Submit
		}
		in.Queue = append(in.Queue, q)
	}
	for _, j := range ps.jobs {
		// A job that ended is in its owner's accounted use (chargeOf); a
		// group's parent runs only through its elements.
		if j.Start.IsZero() || j.State.Final() || j.Group != nil {
			continue
		}
		in.Usage = append(in.Usage, policy.UsageRecord{User: ps.opts.ownerOf(&j.Req), Nodes: j.Req.Nodes, Start: j.Start})
	}
	in.Accounted = ps.accounted()
	ps.mu.Unlock()
	// Map iteration order must not reach the policy.
	slices.SortFunc(in.Usage, func(a, b policy.UsageRecord) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return strings.Compare(a.User, b.User)
	})
	perm, err := o.Order(in)
	if err == nil && !isPerm(perm, len(snap.Queue)) {
		err = fmt.Errorf("the order %v is not a permutation of %d jobs", perm, len(snap.Queue))
	}
	if err != nil {
		ps.log.Error("queue order policy failed; the broker's order is kept this cycle", "policy", o.Name(), "err", err)
		return
	}
	out := make([]policy.Job, len(perm))
	for i, k := range perm {
		out[i] = snap.Queue[k]
	}
	snap.Queue = out
}

func isPerm(p []int, n int) bool {
	if len(p) != n {
		return false
	}
	seen := make([]bool, n)
	for _, k := range p {
		if k < 0 || k >= n || seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}
