package leastloaded

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gridsub/gridsub/policy"
)

// ErrBadSnapshot: the snapshot is inconsistent (a site's free nodes outside
// 0..nodes); Plan refuses it rather than over-commit a site.
var ErrBadSnapshot = errors.New("leastloaded: bad snapshot")

// Name is the planner's name, in decisions' Status.Plugin and in configs.
const Name = "least-loaded"

// Planner is the least-loaded single-site planner. The zero value is ready
// to use and holds no state: one Planner may serve any number of callers.
type Planner struct{}

var _ policy.Planner = (*Planner)(nil)

// New returns the planner.
func New() *Planner { return &Planner{} }

// Name implements policy.Planner.
func (*Planner) Name() string { return Name }

// Plan implements policy.Planner (see the package comment for the rule).
func (*Planner) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	if err := checkSites(s.Sites); err != nil {
		return nil, err
	}
	return planPass(ctx, s, nil)
}

// checkSites refuses sites whose free nodes are outside 0..nodes.
func checkSites(sites []policy.Site) error {
	for i := range sites {
		st := &sites[i]
		if st.Nodes < 0 || st.Free < 0 || st.Free > st.Nodes {
			return fmt.Errorf("%w: site %d (%s) has %d of %d nodes free", ErrBadSnapshot, i, st.Name, st.Free, st.Nodes)
		}
	}
	return nil
}

// planPass is one pass over a checked snapshot. gone, when not nil, gets the
// queue index of every job the plan starts or rejects, in queue order.
func planPass(ctx context.Context, s *policy.Snapshot, gone *[]int) (*policy.Plan, error) {
	free := make([]int, len(s.Sites))
	for i := range s.Sites {
		free[i] = s.Sites[i].Free
	}
	p := &pass{s: s, free: free, all: make([]int, len(s.Sites))}
	for i := range p.all {
		p.all[i] = i
	}
	plan := &policy.Plan{}
	blocker := "" // the first job that waits for nodes: the jobs behind it wait too
	for qi := range s.Queue {
		if qi&255 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("leastloaded: plan interrupted at job %d of %d: %w", qi, len(s.Queue), err)
			}
		}
		j := &s.Queue[qi]
		sites, why := p.admit(j)
		switch {
		case why != "":
			plan.Decisions = append(plan.Decisions, policy.Decision{Job: j.ID, Action: policy.Reject,
				Status: policy.NewStatus(policy.Unresolvable, Name, why)})
			if gone != nil {
				*gone = append(*gone, qi)
			}
			continue
		case len(sites) == 0: // every site that could hold it is down
			if !s.Quiet {
				plan.Pending = append(plan.Pending, policy.Pending{Job: j.ID,
					Status: policy.NewStatus(policy.Unschedulable, Name, p.downReason(j))})
			}
			continue
		case blocker != "":
			if !s.Quiet {
				plan.Pending = append(plan.Pending, policy.Pending{Job: j.ID,
					Status: policy.NewStatus(policy.Unschedulable, Name, "waits behind job "+blocker+" (first come, first served)")})
			}
			continue
		}
		best := p.best(sites)
		if free[best] < j.Width {
			blocker = j.ID
			if !s.Quiet {
				plan.Pending = append(plan.Pending, policy.Pending{Job: j.ID,
					Status: policy.NewStatus(policy.Unschedulable, Name, p.waitReason(j, sites, best))})
			}
			continue
		}
		plan.Decisions = append(plan.Decisions, p.start(j, sites, best))
		free[best] -= j.Width
		if gone != nil {
			*gone = append(*gone, qi)
		}
	}
	return plan, nil
}

// pass is one Plan call.
type pass struct {
	s    *policy.Snapshot
	free []int // free nodes left after this plan's starts
	all  []int // every site index
	up   []int // admit's result, reused job after job
}

// admit returns the up sites that can ever hold j alone, or why j can
// never run. No sites and no reason: the sites that could hold it are down.
func (p *pass) admit(j *policy.Job) (up []int, why string) {
	s := p.s
	up = p.up[:0]
	defer func() {
		if up != nil {
			p.up = up
		}
	}()
	if j.Width < 1 {
		return nil, fmt.Sprintf("width %d: a job needs at least 1 node", j.Width)
	}
	if j.Origin < -1 || j.Origin >= len(s.Sites) {
		return nil, fmt.Sprintf("origin site %d does not exist (valid: -1 for none, 0..%d)", j.Origin, len(s.Sites)-1)
	}
	allowed := p.all
	if j.Allowed != nil {
		allowed = j.Allowed
		for _, i := range allowed {
			if i < 0 || i >= len(s.Sites) {
				return nil, fmt.Sprintf("allowed site %d does not exist (valid: 0..%d)", i, len(s.Sites)-1)
			}
		}
	}
	if len(allowed) == 0 {
		return nil, "no site is allowed"
	}
	largest := allowed[0]
	for _, i := range allowed {
		if s.Sites[i].Nodes > s.Sites[largest].Nodes {
			largest = i
		}
		if s.Sites[i].Nodes >= j.Width && !s.Sites[i].Down {
			up = append(up, i)
		}
	}
	if s.Sites[largest].Nodes < j.Width {
		return nil, fmt.Sprintf("needs %d nodes on one site (%s places a job on a single site); the largest allowed site is %s with %d",
			j.Width, Name, s.Sites[largest].Name, s.Sites[largest].Nodes)
	}
	return up, ""
}

// best is the site with the most free nodes left; ties: the lower load
// ratio (nodes - free) / nodes, then the lower index. sites is not empty.
func (p *pass) best(sites []int) int {
	b := sites[0]
	for _, i := range sites[1:] {
		if p.before(i, b) {
			b = i
		}
	}
	return b
}

// before reports whether site i ranks before site k: more free nodes left,
// then a lower load ratio, then a lower index.
func (p *pass) before(i, k int) bool {
	fi, fk := p.free[i], p.free[k]
	if fi != fk {
		return fi > fk
	}
	// load_i < load_k  ⇔  (n_i - f)/n_i < (n_k - f)/n_k  ⇔  (n_i - f)·n_k < (n_k - f)·n_i
	ni, nk := int64(p.s.Sites[i].Nodes), int64(p.s.Sites[k].Nodes)
	if li, lk := (ni-int64(fi))*nk, (nk-int64(fk))*ni; li != lk {
		return li < lk
	}
	return i < k
}

func (p *pass) load(i int) string {
	n := p.s.Sites[i].Nodes
	return strconv.Itoa((100*(n-p.free[i]) + n/2) / n)
}

// start is j's Start decision on site best.
func (p *pass) start(j *policy.Job, sites []int, best int) policy.Decision {
	s := p.s
	parts := []policy.Part{{Site: best, Nodes: j.Width}}
	d := policy.Decision{Job: j.ID, Action: policy.Start,
		Chosen: policy.Option{Parts: parts, Start: s.Now, Runtime: s.Runtime(j, parts), Transfer: s.Transfer(j, parts), Immediate: true},
		Status: policy.NewStatus(policy.Success, Name, fmt.Sprintf("least loaded: %s has %d of %d nodes free (%s%% busy)",
			s.Sites[best].Name, p.free[best], s.Sites[best].Nodes, p.load(best)))}
	if s.Quiet {
		return d
	}
	// The runners-up that could also have taken it now, best first.
	var alts []int
	for _, i := range sites {
		if i != best && p.free[i] >= j.Width && !slices.Contains(alts, i) {
			alts = append(alts, i)
		}
	}
	slices.SortFunc(alts, func(a, b int) int {
		if p.before(a, b) {
			return -1
		}
		return 1
	})
	for _, i := range alts[:min(len(alts), 3)] {
		o := []policy.Part{{Site: i, Nodes: j.Width}}
		d.Beaten = append(d.Beaten, policy.Option{Parts: o, Start: s.Now, Runtime: s.Runtime(j, o), Transfer: s.Transfer(j, o), Immediate: true})
	}
	return d
}

// waitReason explains a job that fits on no site now.
func (p *pass) waitReason(j *policy.Job, sites []int, best int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "needs %d free nodes on one site; the most now: %s with %d (", j.Width, p.s.Sites[best].Name, p.free[best])
	for k, i := range sites {
		if k == 6 {
			fmt.Fprintf(&b, ", %d more", len(sites)-k)
			break
		}
		if k > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d/%d", p.s.Sites[i].Name, p.free[i], p.s.Sites[i].Nodes)
	}
	b.WriteString(" free)")
	return b.String()
}

// downReason explains a job whose every possible site is down.
func (p *pass) downReason(j *policy.Job) string {
	var names []string
	allowed := p.all
	if j.Allowed != nil {
		allowed = j.Allowed
	}
	for _, i := range allowed {
		if p.s.Sites[i].Nodes >= j.Width {
			names = append(names, p.s.Sites[i].Name)
		}
	}
	return fmt.Sprintf("every site that can hold its %d nodes is down: %s", j.Width, strings.Join(names, ", "))
}
