package coalloc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Sentinel errors. Bad configuration is reported by New and ByName; Plan
// itself fails only when a Selector cannot work on the snapshot.
var (
	// ErrBadOption: an Options field (or a planner name) has a value this
	// package does not know; the message lists the valid ones.
	ErrBadOption = errors.New("coalloc: bad option")
	// ErrTooManySites: Optimal selection was asked to enumerate more sites
	// than it is configured for (its cost is 2^N).
	ErrTooManySites = errors.New("coalloc: too many sites for optimal selection")
)

// Backfill is a backfilling rule (paper 000 Algorithm 4).
type Backfill string

// Backfilling rules.
const (
	None         Backfill = "none"         // strict FCFS: stop at the first job that cannot start
	EASY         Backfill = "easy"         // a later job starts now if it does not delay the head's reservation
	Conservative Backfill = "conservative" // every waiting job gets a reservation; a later job starts now only if it delays none
)

// Planner is the paper-000 framework (Algorithm 1): FCFS over the global
// queue; the head job goes through admission and resource selection; an
// immediate placement starts, a reserved one is held in the availability
// profiles and the jobs behind it are backfilled by the configured rule.
// It is safe for concurrent use: all pass state lives in a State per call.
type Planner struct {
	name   string
	sel    Selector
	bf     Backfill
	single bool // admission as for single-site placement (width <= largest site)
	beaten int
}

var _ policy.Planner = (*Planner)(nil)

// Name implements policy.Planner.
func (p *Planner) Name() string { return p.name }

// Plan implements policy.Planner.
func (p *Planner) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	st := NewState(s)
	plan := &policy.Plan{}
	var head *policy.Decision // the first job of this pass left waiting (reserved)
	var headID, noneWhy string
	for qi := range s.Queue {
		if qi%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("coalloc: plan interrupted at job %d of %d: %w", qi, len(s.Queue), err)
			}
		}
		j := &s.Queue[qi]
		sites, d, pend := admit(s, j, p.single, p.name)
		if d != nil {
			plan.Decisions = append(plan.Decisions, *d)
			continue
		}
		if pend != nil {
			plan.Pending = append(plan.Pending, *pend)
			continue
		}
		if head != nil && p.bf == None {
			if noneWhy == "" {
				noneWhy = fmt.Sprintf("strict FCFS: waits behind job %s (reserved from %s)", headID, clock(s, head.Chosen.Start))
			}
			plan.Pending = append(plan.Pending, policy.Pending{Job: j.ID, Status: policy.NewStatus(policy.Unschedulable, string(None), noneWhy)})
			continue
		}
		k := newCollector(p.beaten)
		k.immediateOnly = head != nil && p.bf == EASY
		if err := p.sel.Select(st, j, sites, k); err != nil {
			return nil, err
		}
		best := k.Best()
		if k.immediateOnly && (best == nil || !best.Immediate) {
			r := fmt.Sprintf("backfill: cannot start now without delaying job %s (reserved from %s)", headID, clock(s, head.Chosen.Start))
			if best != nil {
				r = fmt.Sprintf("backfill: waits for a better placement, %s from %s (end %s), rather than start now; it holds no reservation (EASY reserves only the head, job %s)",
					partList(s, best.Parts), clock(s, s.Now.Add(best.Start)), clock(s, s.Now.Add(best.End())), headID)
			}
			plan.Pending = append(plan.Pending, policy.Pending{Job: j.ID, Status: policy.NewStatus(policy.Unschedulable, string(EASY), r)})
			continue
		}
		if best == nil {
			plan.Pending = append(plan.Pending, policy.Pending{Job: j.ID, Status: policy.NewStatus(policy.Unschedulable, p.sel.Name(),
				fmt.Sprintf("needs %d nodes; the known holds never leave that many free at the eligible sites (%s)", j.Width, siteList(s, sites, st.Eventual)))})
			continue
		}
		dec := policy.Decision{Job: j.ID, Chosen: option(s, best), Beaten: options(s, k.Beaten())}
		switch {
		case best.Immediate:
			st.Take(best.Parts, 0, best.Hold())
			dec.Action = policy.Start
			dec.Backfilled = head != nil
			r := []string{fmt.Sprintf("start now at %s, end %s", partList(s, best.Parts), clock(s, dec.Chosen.End()))}
			plug := p.sel.Name()
			if head != nil {
				plug = string(p.bf)
				r = append(r, fmt.Sprintf("backfilled ahead of job %s (reserved from %s) without delaying it", headID, clock(s, head.Chosen.Start)))
			}
			dec.Status = policy.NewStatus(policy.Success, plug, append(r, beatenReasons(s, dec.Beaten)...)...)
		case head == nil || p.bf == Conservative:
			st.Take(best.Parts, best.Start, best.Hold())
			dec.Action = policy.Reserve
			r := []string{fmt.Sprintf("reserved: earliest start %s at %s, end %s", clock(s, dec.Chosen.Start), partList(s, best.Parts), clock(s, dec.Chosen.End()))}
			r = append(r, whyNotNow(st, j, sites, dec.Beaten, p.single || j.NoSplit)...)
			plug := p.sel.Name()
			if head != nil {
				plug = string(p.bf)
			}
			dec.Status = policy.NewStatus(policy.Wait, plug, r...)
			if head == nil {
				head, headID = &dec, j.ID
			}
		default:
			return nil, fmt.Errorf("coalloc: internal: EASY backfill candidate %s reached the reserve branch", j.ID)
		}
		plan.Decisions = append(plan.Decisions, dec)
	}
	return plan, nil
}

// admit checks a job against the sites. It returns the eligible sites (h
// ascending), or a Reject decision (never runnable), or a Pending (not
// runnable while some sites are down).
func admit(s *policy.Snapshot, j *policy.Job, single bool, name string) ([]int, *policy.Decision, *policy.Pending) {
	reject := func(format string, a ...any) ([]int, *policy.Decision, *policy.Pending) {
		return nil, &policy.Decision{Job: j.ID, Action: policy.Reject, Status: policy.NewStatus(policy.Unresolvable, "admit", fmt.Sprintf(format, a...))}, nil
	}
	wait := func(format string, a ...any) ([]int, *policy.Decision, *policy.Pending) {
		return nil, nil, &policy.Pending{Job: j.ID, Status: policy.NewStatus(policy.Unschedulable, "admit", fmt.Sprintf(format, a...))}
	}
	if j.Width < 1 {
		return reject("width %d: a job needs at least 1 node", j.Width)
	}
	all := make([]int, 0, len(s.Sites))
	if j.Allowed == nil {
		for i := range s.Sites {
			all = append(all, i)
		}
	} else {
		for _, i := range j.Allowed {
			if i < 0 || i >= len(s.Sites) {
				return reject("allowed site %d does not exist (valid: 0..%d)", i, len(s.Sites)-1)
			}
			all = append(all, i)
		}
	}
	nodes := func(i int) int { return s.Sites[i].Nodes }
	total, largest := 0, -1
	for _, i := range all {
		total += s.Sites[i].Nodes
		if largest < 0 || s.Sites[i].Nodes > s.Sites[largest].Nodes {
			largest = i
		}
	}
	if len(all) == 0 {
		return reject("no site is allowed")
	}
	oneSite := single || j.NoSplit
	if oneSite && j.Width > s.Sites[largest].Nodes {
		why := "the job may not be split"
		if single {
			why = name + " runs a job on one site only"
		}
		return reject("needs %d nodes on one site (%s); the largest allowed site is %s with %d (%s)",
			j.Width, why, s.Sites[largest].Name, s.Sites[largest].Nodes, siteList(s, all, nodes))
	}
	if j.Width > total {
		return reject("needs %d nodes; the %d allowed sites have %d in all: %s", j.Width, len(all), total, siteList(s, all, nodes))
	}
	var up, down []int
	upTotal, upLargest := 0, 0
	for _, i := range all {
		if s.Sites[i].Down {
			down = append(down, i)
			continue
		}
		up = append(up, i)
		upTotal += s.Sites[i].Nodes
		upLargest = max(upLargest, s.Sites[i].Nodes)
	}
	if len(up) == 0 {
		return wait("all %d allowed sites are down: %s", len(all), siteList(s, down, nil))
	}
	if (oneSite && j.Width > upLargest) || j.Width > upTotal {
		return wait("needs %d nodes; the allowed sites that are up have %d (%s), down: %s", j.Width, upTotal, siteList(s, up, nodes), siteList(s, down, nil))
	}
	st := make([]int, 0, len(up))
	// eligible sites by h ascending, index ascending
	for _, i := range up {
		k := len(st)
		for k > 0 && (s.Sites[st[k-1]].H > s.Sites[i].H || (s.Sites[st[k-1]].H == s.Sites[i].H && st[k-1] > i)) {
			k--
		}
		st = append(st, 0)
		copy(st[k+1:], st[k:])
		st[k] = i
	}
	return st, nil, nil
}

// whyNotNow says why a reserved job does not start now: per site when the
// job must run on one site ("Harbin: 16 free < 48 needed"), else in sum.
func whyNotNow(st *State, j *policy.Job, sites []int, beaten []policy.Option, oneSite bool) []string {
	for _, o := range beaten {
		if o.Immediate {
			return []string{fmt.Sprintf("starting now at %s would end later, %s", partList(st.Snap, o.Parts), clock(st.Snap, o.End()))}
		}
	}
	free := 0
	for _, i := range sites {
		free += max(st.FreeNow(i), 0)
	}
	if oneSite {
		var r []string
		for k, i := range sites {
			if k == 4 {
				r = append(r, fmt.Sprintf("and %d more sites", len(sites)-k))
				break
			}
			if f := st.FreeNow(i); f < j.Width {
				r = append(r, fmt.Sprintf("%s: %d free < %d needed", siteName(st.Snap, i), max(f, 0), j.Width))
			} else {
				r = append(r, fmt.Sprintf("%s: %d free, but not for the whole run", siteName(st.Snap, i), f))
			}
		}
		return r
	}
	if free >= j.Width {
		return []string{fmt.Sprintf("%d nodes are free now, but not at sites that can hold the job for its whole run", free)}
	}
	return []string{fmt.Sprintf("no immediate start: %d nodes free at the eligible sites (%s), %d needed", free, siteList(st.Snap, sites, st.FreeNow), j.Width)}
}

func beatenReasons(s *policy.Snapshot, b []policy.Option) []string {
	if len(b) == 0 {
		return nil
	}
	o := b[0]
	how := "now"
	if !o.Immediate {
		how = "from " + clock(s, o.Start)
	}
	return []string{fmt.Sprintf("over %s %s (end %s)", partList(s, o.Parts), how, clock(s, o.End()))}
}

func option(s *policy.Snapshot, c *Candidate) policy.Option {
	return policy.Option{Parts: c.Parts, Start: s.Now.Add(c.Start), Runtime: c.Run, Transfer: c.Xfer, Immediate: c.Immediate}
}

func options(s *policy.Snapshot, cs []Candidate) []policy.Option {
	if len(cs) == 0 {
		return nil
	}
	out := make([]policy.Option, len(cs))
	for i := range cs {
		out[i] = option(s, &cs[i])
	}
	return out
}

// clock formats a time for reasons: the UTC clock time, with the date when it
// is not Now's day.
func clock(s *policy.Snapshot, t time.Time) string {
	t, now := t.UTC().Round(time.Second), s.Now.UTC()
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04:05")
}

// partList names the parts: "Beijing(32)+Shanghai(16)"; long lists are cut.
func partList(s *policy.Snapshot, parts []policy.Part) string {
	var b strings.Builder
	for i, p := range parts {
		if i == 4 {
			fmt.Fprintf(&b, "+%d more sites", len(parts)-i)
			break
		}
		if i > 0 {
			b.WriteByte('+')
		}
		fmt.Fprintf(&b, "%s(%d)", siteName(s, p.Site), p.Nodes)
	}
	return b.String()
}

// siteList names sites, with a number each when val is set: "Beijing 128,
// Shanghai 64"; long lists are cut.
func siteList(s *policy.Snapshot, sites []int, val func(int) int) string {
	var b strings.Builder
	for i, x := range sites {
		if i == 6 {
			fmt.Fprintf(&b, " and %d more", len(sites)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(siteName(s, x))
		if val != nil {
			fmt.Fprintf(&b, " %d", val(x))
		}
	}
	return b.String()
}

func siteName(s *policy.Snapshot, i int) string {
	if n := s.Sites[i].Name; n != "" {
		return n
	}
	return fmt.Sprintf("site%d", i)
}
