package trust

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// PlannerName is the name Trust-Min-min goes by as a policy.Planner.
const PlannerName = "trust-min-min"

// Planner is Trust-Min-min as a policy.Planner, so that the broker and a
// trace replay can run it. Each pass maps the queue onto the live sites with
// MinMinLevels:
//
//   - a site is a cluster: Power = 1/H, Area = Areas[site name] (a site not
//     in Areas is an area of its own), START = now when the site has free
//     nodes, else the earliest end of a hold there;
//   - a job is a task: Work = its estimate (reference seconds), Data = its
//     DataSize read from its origin site (none for a job from outside), its
//     QoS class from Estimate against ComputeHigh and DataSize against
//     DataHigh;
//   - trust: cluster level, trust(origin, site) = the site's Trust (the
//     broker's learned score, policy.Site.Trust; 0 = 1); area level, the
//     mean Trust of the area's live sites;
//   - transfers: Snapshot.Links (a zero link is free).
//
// Jobs that allow only some sites are mapped in groups by their allowed
// set, in queue order of each group's first job, START carried over. A job
// whose chosen site has its width free now starts there (whole, never split
// across sites; the nodes it takes are gone for the rest of the pass);
// others wait, with the chosen site and its predicted start as the reason.
// A job wider than every site it may use is rejected. Pure and
// deterministic; the Snapshot is not modified.
type Planner struct {
	// Areas maps a site name to its local area.
	Areas map[string]string
	// ComputeHigh and DataHigh are the QoS thresholds: a job needs high
	// compute when its estimate is at least ComputeHigh (default 1h), high
	// bandwidth when it moves at least DataHigh bytes (default 100 MB).
	ComputeHigh time.Duration
	DataHigh    int64
}

var _ policy.Planner = (*Planner)(nil)

// Name implements policy.Planner.
func (p *Planner) Name() string { return PlannerName }

// Plan implements policy.Planner.
func (p *Planner) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	computeHigh, dataHigh := p.ComputeHigh, p.DataHigh
	if computeHigh <= 0 {
		computeHigh = time.Hour
	}
	if dataHigh <= 0 {
		dataHigh = 100 << 20
	}
	plan := &policy.Plan{}
	free := make([]int, len(s.Sites))
	starts := make([]float64, len(s.Sites)) // START, seconds after now
	areaSum, areaN := map[string]float64{}, map[string]int{}
	for i, st := range s.Sites {
		free[i] = st.Free
		if st.Down {
			continue
		}
		if st.Free <= 0 {
			starts[i] = math.Inf(1)
			for _, h := range st.Busy {
				starts[i] = min(starts[i], max(0, h.Until.Sub(s.Now).Seconds()))
			}
			if math.IsInf(starts[i], 1) {
				starts[i] = 0
			}
		}
		a := p.area(st.Name)
		areaSum[a] += siteTrust(st)
		areaN[a]++
	}
	// Group the jobs by the sites they may use, rejecting those no such site can hold.
	type group struct {
		sites []int
		jobs  []int
	}
	var groups []*group
	byKey := map[string]*group{}
	for x, j := range s.Queue {
		var sites []int
		widest, live := 0, false
		for i, st := range s.Sites {
			if st.Down || (j.Allowed != nil && !slices.Contains(j.Allowed, i)) {
				continue
			}
			widest, live = max(widest, st.Nodes), true
			if st.Nodes >= j.Width {
				sites = append(sites, i)
			}
		}
		if len(sites) == 0 {
			if live {
				plan.Decisions = append(plan.Decisions, policy.Decision{Job: j.ID, Action: policy.Reject,
					Status: policy.NewStatus(policy.Unresolvable, PlannerName, fmt.Sprintf("needs %d nodes on one site; the largest it may use has %d", j.Width, widest))})
			} else {
				plan.Pending = append(plan.Pending, policy.Pending{Job: j.ID, Status: policy.NewStatus(policy.Unschedulable, PlannerName, "every site it may use is down")})
			}
			continue
		}
		key := fmt.Sprint(sites)
		g, ok := byKey[key]
		if !ok {
			g = &group{sites: sites}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.jobs = append(g.jobs, x)
	}
	for _, g := range groups {
		grid := Grid{}
		for _, i := range g.sites {
			st := s.Sites[i]
			h := st.H
			if !(h > 0) {
				h = 1
			}
			grid.Clusters = append(grid.Clusters, Cluster{Name: st.Name, Area: p.area(st.Name), Power: 1 / h, Start: starts[i]})
		}
		grid.Bandwidth = func(from, to Cluster) float64 { return bandwidth(s, from.Name, to.Name) }
		tasks := make([]Task, len(g.jobs))
		for k, x := range g.jobs {
			j := s.Queue[x]
			class := LL
			switch hc, hb := j.Estimate >= computeHigh, j.DataSize >= dataHigh; {
			case hc && hb:
				class = HH
			case hc:
				class = HL
			case hb:
				class = LH
			}
			tasks[k] = Task{Name: j.ID, Class: class, Work: j.Estimate.Seconds(), Data: float64(j.DataSize)}
			if j.Origin >= 0 && j.Origin < len(s.Sites) {
				tasks[k].Submit, tasks[k].Source = s.Sites[j.Origin].Name, s.Sites[j.Origin].Name
				if !slices.ContainsFunc(grid.Clusters, func(c Cluster) bool { return c.Name == tasks[k].Source }) {
					// the origin is not a cluster of this group: its data
					// still moves, at the link's rate, from a store-only cluster
					grid.Clusters = append(grid.Clusters, Cluster{Name: tasks[k].Source, Area: p.area(tasks[k].Source), Power: 1, Down: true})
				}
			}
		}
		idx := map[string]int{}
		for i, st := range s.Sites {
			idx[st.Name] = i
		}
		as, err := MinMinLevels(tasks, grid, Levels{
			Cluster: func(_, to string) float64 { return siteTrust(s.Sites[idx[to]]) },
			Area: func(_, to string) float64 {
				if areaN[to] == 0 {
					return 1
				}
				return areaSum[to] / float64(areaN[to])
			},
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", PlannerName, err)
		}
		for _, a := range as {
			j := s.Queue[g.jobs[a.Task]]
			i := idx[grid.Clusters[a.Cluster].Name]
			starts[i] = a.Finish
			st := s.Sites[i]
			h := st.H
			if !(h > 0) {
				h = 1
			}
			run := time.Duration(j.Estimate.Seconds() * h * float64(time.Second))
			opt := policy.Option{Parts: []policy.Part{{Site: i, Nodes: j.Width}}, Start: s.Now.Add(time.Duration(a.Start * float64(time.Second))), Runtime: run,
				Transfer: time.Duration(max(0, a.Finish-a.Start-j.Estimate.Seconds()*h) * float64(time.Second))}
			if free[i] >= j.Width {
				free[i] -= j.Width
				opt.Start, opt.Immediate = s.Now, true
				plan.Decisions = append(plan.Decisions, policy.Decision{Job: j.ID, Action: policy.Start, Chosen: opt,
					Status: policy.NewStatus(policy.Success, PlannerName, fmt.Sprintf("Trust-Min-min chose %s (%s, trust %.2f)", st.Name, tasks[a.Task].Class, siteTrust(st)))})
				continue
			}
			if !s.Quiet {
				plan.Pending = append(plan.Pending, policy.Pending{Job: j.ID, Status: policy.NewStatus(policy.Unschedulable, PlannerName,
					fmt.Sprintf("Trust-Min-min chose %s, where %d of its %d nodes are free", st.Name, free[i], j.Width))})
			}
		}
	}
	return plan, nil
}

func (p *Planner) area(site string) string {
	if a, ok := p.Areas[site]; ok && a != "" {
		return a
	}
	return "site:" + site
}

func siteTrust(st policy.Site) float64 {
	if st.Trust > 0 && st.Trust <= 1 {
		return st.Trust
	}
	return 1
}

// bandwidth is bytes/s from site from to site to by s.Links; a zero or
// missing link is free.
func bandwidth(s *policy.Snapshot, from, to string) float64 {
	fi, ti := -1, -1
	for i, st := range s.Sites {
		if st.Name == from {
			fi = i
		}
		if st.Name == to {
			ti = i
		}
	}
	if fi < 0 || ti < 0 || fi >= len(s.Links) || ti >= len(s.Links[fi]) || s.Links[fi][ti].SecPerByte <= 0 {
		return math.Inf(1)
	}
	return 1 / s.Links[fi][ti].SecPerByte
}
