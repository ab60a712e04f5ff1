package trust

import (
	"fmt"
	"math"
)

// Class is a task's QoS class by (compute, bandwidth) need, h = high, l = low.
// Trust-Min-min schedules the classes in the order of their values.
type Class int

// QoS classes in the paper's scheduling order.
const (
	HH Class = iota // high compute, high bandwidth
	HL              // high compute, low bandwidth
	LH              // low compute, high bandwidth
	LL              // low compute, low bandwidth
)

func (c Class) String() string {
	if c >= HH && c <= LL {
		return [...]string{"(h,h)", "(h,l)", "(l,h)", "(l,l)"}[c]
	}
	return fmt.Sprintf("class(%d)", int(c))
}

// Task is one independent task of a meta-task.
type Task struct {
	Name   string
	Submit string  // the node it was submitted from ("" = the broker); trust is read as trust(Submit, cluster)
	Class  Class   // QoS class
	Work   float64 // compute demand: ETC(t,c) = Work / c.Power
	Data   float64 // input bytes, read from Source
	Source string  // cluster whose store holds the input; "" = no input to move
}

// Cluster is one schedulable resource (a gridsub site).
type Cluster struct {
	Name      string
	Area      string  // local area; "" = an area of its own
	Power     float64 // work per unit time, > 0
	Start     float64 // START(c): when it is next free
	DataStart float64 // Data-START of its store: when its store can start serving
	// Down marks a cluster that takes no tasks (it failed) while its store
	// still serves data; MinMin errors if every cluster is down.
	Down bool
}

// Grid is the clusters plus the network between them.
type Grid struct {
	Clusters []Cluster
	// Bandwidth gives bytes per unit time from one cluster's store to another
	// cluster; nil means transfers are free. Within one cluster they are.
	// A value <= 0 means the pair cannot exchange data (MCT = +Inf). It must
	// be pure: one MinMin call asks it once per pair.
	Bandwidth func(from, to Cluster) float64
}

// AreaBandwidth returns a Grid.Bandwidth with one rate inside a local area
// (the same non-empty Area) and another between areas.
func AreaBandwidth(intra, inter float64) func(from, to Cluster) float64 {
	return func(a, b Cluster) float64 {
		if a.Area != "" && a.Area == b.Area {
			return intra
		}
		return inter
	}
}

// Assignment places Tasks[Task] on Clusters[Cluster], busy from Start (data
// transfer first) to Finish = MCT.
type Assignment struct {
	Task, Cluster int
	Start, Finish float64
}

// sched is the MCT state of one MinMin call.
type sched struct {
	g      Grid
	tasks  []Task
	src    []int // index of each task's Source cluster, -1 for none
	starts []float64
	trust  func(from, to string) float64
	tcache []float64 // trust(task t's Submit, cluster c) at t*len(clusters)+c; NaN = not asked yet
	bw     []float64 // Bandwidth(x, c) at x*len(clusters)+c; NaN = not asked yet
	err    error
}

// setTrust switches the trust function (the LA level and the cluster level
// use different ones) and forgets the values cached from the other. trust is
// asked once per (task, cluster) pair: MinMin's contract has it pure.
func (s *sched) setTrust(trust func(from, to string) float64, cache []float64) {
	s.trust, s.tcache = trust, cache
}

func newCache(n int) []float64 {
	c := make([]float64, n)
	for i := range c {
		c[i] = math.NaN()
	}
	return c
}

// mct is MCT(t,c,s) = max(Data-START(s), START(c)) + TRAN(t,c,s) + ETC(t,c),
// with START from starts, and the start of that interval.
func (s *sched) mct(t, c int, starts []float64) (begin, finish float64) {
	tk := &s.tasks[t]
	begin = starts[c]
	tran := 0.0
	if x := s.src[t]; x >= 0 {
		begin = max(begin, s.g.Clusters[x].DataStart)
		if x != c && s.g.Bandwidth != nil && tk.Data > 0 {
			bw := s.bandwidth(x, c)
			if !(bw > 0) {
				return begin, math.Inf(1)
			}
			tran = tk.Data / bw
		}
	}
	return begin, begin + tran + tk.Work/s.g.Clusters[c].Power
}

// bandwidth is g.Bandwidth(Clusters[x], Clusters[c]), asked once per pair
// and call of MinMin (the grid does not change during one).
func (s *sched) bandwidth(x, c int) float64 {
	n := len(s.g.Clusters)
	if s.bw == nil {
		s.bw = newCache(n * n)
	}
	v := s.bw[x*n+c]
	if math.IsNaN(v) {
		v = s.g.Bandwidth(s.g.Clusters[x], s.g.Clusters[c])
		s.bw[x*n+c] = v
	}
	return v
}

// weighted is MCT divided by trust(Submit, cluster), 1 without a trust function.
func (s *sched) weighted(t, c int, finish float64) float64 {
	if s.trust == nil {
		return finish
	}
	x := t*len(s.g.Clusters) + c
	tr := s.tcache[x]
	if math.IsNaN(tr) {
		tr = s.trust(s.tasks[t].Submit, s.g.Clusters[c].Name)
		s.tcache[x] = tr
	}
	if !(tr > 0) || math.IsInf(tr, 1) {
		if s.err == nil {
			s.err = fmt.Errorf("%w: trust(%q, %q) = %v, want a finite number > 0", ErrTrust, s.tasks[t].Submit, s.g.Clusters[c].Name, tr)
		}
		return math.Inf(1)
	}
	return finish / tr
}

// minmin runs (Trust-)Min-min over the tasks ts and the clusters cs, with
// START read from and written to starts; it returns the task chosen at each
// step and its cluster, in order. Ties go to the earlier task in ts, then the
// earlier cluster in cs.
//
// Each task's best cluster is kept between steps: a step raises START on the
// chosen cluster only, and MCT (and MCT over a trust > 0) never falls when
// START rises, so a task whose best cluster was another keeps it (same
// value, same tie-break); only the tasks whose best was the chosen cluster
// are looked at again. The choices are those of re-evaluating every pair at
// every step.
func (s *sched) minmin(ts, cs []int, starts []float64) []Assignment {
	left := append([]int(nil), ts...)
	type best struct {
		v, b, f float64
		c       int
	}
	row := func(t int) best {
		tv, tc, tb, tf := math.Inf(1), -1, 0.0, 0.0
		for _, c := range cs {
			b, f := s.mct(t, c, starts)
			if v := s.weighted(t, c, f); v < tv || tc < 0 {
				tv, tc, tb, tf = v, c, b, f
			}
		}
		return best{tv, tb, tf, tc}
	}
	bests := make([]best, len(left))
	for x, t := range left {
		bests[x] = row(t)
	}
	res := make([]Assignment, 0, len(left))
	for len(left) > 0 {
		bestX := -1
		for x := range left {
			if bestX < 0 || bests[x].v < bests[bestX].v {
				bestX = x
			}
		}
		t, bb := left[bestX], bests[bestX]
		res = append(res, Assignment{Task: t, Cluster: bb.c, Start: bb.b, Finish: bb.f})
		starts[bb.c] = bb.f
		left = append(left[:bestX], left[bestX+1:]...)
		bests = append(bests[:bestX], bests[bestX+1:]...)
		for x, t := range left {
			if bests[x].c == bb.c {
				bests[x] = row(t)
			}
		}
	}
	return res
}

// MinMin maps a meta-task onto the grid and returns one Assignment per task,
// in the order they were chosen.
//
// With trust == nil it is plain Min-min (the paper's baseline): all tasks and
// all clusters at once, no QoS classes, no levels; repeatedly, for every
// unscheduled task find the cluster of minimum MCT, assign the task whose
// minimum is smallest, and update that cluster's START.
//
// With a trust function it is Trust-Min-min (paper 002 §2.2): the classes
// (h,h), (h,l), (l,h), (l,l) are scheduled one after the other, each in two
// levels.
//   - LA level: the same loop over all clusters with every MCT divided by
//     trust(task.Submit, cluster); the chosen task goes to its cluster's area,
//     and that cluster's START is advanced in a scratch copy (the LA-MCT
//     update). The paper divides the LA's MCT by a trust between areas;
//     MinMin keeps trust per site, so an area's trust-weighted MCT is the
//     best trust-weighted MCT among its clusters (MinMinLevels takes a
//     trust between areas instead).
//   - Cluster level: inside each area (in the order areas first appear in
//     g.Clusters), the tasks sent to it are mapped by the same loop over its
//     clusters against the real START, which carries over to the next class.
//
// trust(from, to) must be a finite number > 0 (Model.Score qualifies); with a
// trust that is 1 everywhere, a single class and a single area, Trust-Min-min
// chooses exactly as Min-min. MCT = max(DataStart(Source), START(c)) +
// Data/Bandwidth(Source, c) + Work/Power. Ties go to the earlier task, then
// the earlier cluster. Pure and deterministic.
func MinMin(tasks []Task, g Grid, trust func(from, to string) float64) ([]Assignment, error) {
	return MinMinLevels(tasks, g, Levels{Cluster: trust})
}

// Levels are Trust-Min-min's trust functions, one per level of the paper's
// hierarchy. Cluster is trust(from cluster, to cluster), used inside each
// local area; Area is trust(from area, to area) between local areas, used at
// the LA level with the areas of the task's Submit cluster and of the target
// (a Submit that names no cluster has area ""). With Area nil the LA level
// uses Cluster too (MinMin's reading); with Cluster nil the result is plain
// Min-min whatever Area is.
type Levels struct {
	Area, Cluster func(from, to string) float64
}

// MinMinLevels is MinMin with a separate trust at the local-area level (the
// paper divides MCT(t, LA) by Trust(LA_k, LA_j)). The contract is MinMin's;
// an Area value outside (0, +Inf) is an ErrTrust error as well.
func MinMinLevels(tasks []Task, g Grid, lv Levels) ([]Assignment, error) {
	trust := lv.Cluster
	if len(g.Clusters) == 0 {
		return nil, fmt.Errorf("%w: no clusters", ErrGrid)
	}
	byName := make(map[string]int, len(g.Clusters))
	starts := make([]float64, len(g.Clusters))
	for c, cl := range g.Clusters {
		if !(cl.Power > 0) || math.IsInf(cl.Power, 1) {
			return nil, fmt.Errorf("%w: cluster %q has power %v, want a finite number > 0", ErrGrid, cl.Name, cl.Power)
		}
		if _, dup := byName[cl.Name]; dup {
			return nil, fmt.Errorf("%w: two clusters are named %q", ErrGrid, cl.Name)
		}
		byName[cl.Name] = c
		starts[c] = cl.Start
	}
	s := &sched{g: g, tasks: tasks, src: make([]int, len(tasks)), starts: starts}
	clCache := newCache(len(tasks) * len(g.Clusters))
	s.setTrust(trust, clCache)
	for t, tk := range tasks {
		s.src[t] = -1
		switch {
		case !(tk.Work >= 0) || math.IsInf(tk.Work, 1):
			return nil, fmt.Errorf("%w: task %q has work %v, want a finite number >= 0", ErrTask, tk.Name, tk.Work)
		case !(tk.Data >= 0) || math.IsInf(tk.Data, 1):
			return nil, fmt.Errorf("%w: task %q has data %v, want a finite number >= 0", ErrTask, tk.Name, tk.Data)
		case tk.Class < HH || tk.Class > LL:
			return nil, fmt.Errorf("%w: task %q has class %v, want one of HH, HL, LH, LL", ErrTask, tk.Name, tk.Class)
		}
		if tk.Source != "" {
			x, ok := byName[tk.Source]
			if !ok {
				return nil, fmt.Errorf("%w: task %q reads from %q, which is not a cluster of the grid", ErrTask, tk.Name, tk.Source)
			}
			s.src[t] = x
		}
	}
	var all []int
	for c, cl := range g.Clusters {
		if !cl.Down {
			all = append(all, c)
		}
	}
	if len(all) == 0 && len(tasks) > 0 {
		return nil, fmt.Errorf("%w: every cluster is down", ErrGrid)
	}
	if trust == nil {
		ts := make([]int, len(tasks))
		for t := range ts {
			ts[t] = t
		}
		return s.minmin(ts, all, starts), nil
	}

	// Areas in order of first appearance; a cluster without one is its own.
	var areas [][]int
	areaOf := make([]int, len(g.Clusters))
	seen := map[string]int{}
	for c, cl := range g.Clusters {
		if cl.Down {
			continue
		}
		a, ok := seen[cl.Area]
		if !ok || cl.Area == "" {
			a = len(areas)
			areas = append(areas, nil)
			if cl.Area != "" {
				seen[cl.Area] = a
			}
		}
		areas[a] = append(areas[a], c)
		areaOf[c] = a
	}
	laTrust, laCache := trust, clCache
	if lv.Area != nil {
		laCache = newCache(len(tasks) * len(g.Clusters))
		areaName := make(map[string]string, len(g.Clusters))
		for _, cl := range g.Clusters {
			areaName[cl.Name] = cl.Area
		}
		laTrust = func(from, to string) float64 { return lv.Area(areaName[from], areaName[to]) }
	}
	var res []Assignment
	for class := HH; class <= LL; class++ {
		var ts []int
		for t, tk := range tasks {
			if tk.Class == class {
				ts = append(ts, t)
			}
		}
		if len(ts) == 0 {
			continue
		}
		scratch := append([]float64(nil), starts...)
		perArea := make([][]int, len(areas))
		s.setTrust(laTrust, laCache)
		las := s.minmin(ts, all, scratch)
		s.setTrust(trust, clCache)
		for _, a := range las {
			perArea[areaOf[a.Cluster]] = append(perArea[areaOf[a.Cluster]], a.Task)
		}
		for a, ats := range perArea {
			if len(ats) > 0 {
				res = append(res, s.minmin(ats, areas[a], starts)...)
			}
		}
	}
	if s.err != nil {
		return nil, s.err
	}
	return res, nil
}
