package trust

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// A small version of paper 002's experiment: 20 clusters in 4 local areas,
// CPU 500–800 MHz, 100 Mbps inside an area and 1 Mbps between, 100 tasks per
// run submitted from random clusters and reading their input from a random
// cluster's store, and 4 clusters (20 %) failing in every run at a uniformly
// random point of its planned makespan. Unfinished tasks of a failed cluster
// migrate by the same scheduler (the paper's second method, no migration
// cost). The paper does not say which clusters fail; if it were uniform there
// would be nothing to learn, so here five clusters are flaky (flakyWeight
// times as likely to be among the four). Trust-Min-min learns from the
// outcomes of every run; Min-min has nothing to learn. EXPSEED=n in the
// environment picks another world (default 65).

// flakyWeight is how much likelier a flaky cluster is to be among the failing four.
const flakyWeight = 30

type expCluster struct {
	Cluster
	flaky bool
}

type world struct {
	clusters []expCluster
	nodes    map[string]Node
}

func newWorld(r *rand.Rand) world {
	w := world{nodes: map[string]Node{}}
	flaky := r.Perm(20)[:5]
	for c := 0; c < 20; c++ {
		cl := expCluster{Cluster: Cluster{
			Name:  fmt.Sprintf("c%02d", c),
			Area:  fmt.Sprintf("la%d", c/5),
			Power: float64(500 + r.IntN(301)), // MHz
		}, flaky: slices.Contains(flaky, c)}
		w.clusters = append(w.clusters, cl)
		w.nodes[cl.Name] = Node{Name: cl.Name, Area: cl.Area, Power: cl.Power}
	}
	return w
}

// run is one run's draw: the tasks, which clusters fail and when (as a
// fraction of the scheduler's own planned makespan).
type run struct {
	tasks []Task
	fails []int
	at    []float64
}

func (w world) draw(r *rand.Rand) run {
	var rn run
	for x := 0; x < 100; x++ {
		rn.tasks = append(rn.tasks, Task{
			Name:   fmt.Sprintf("t%d", x),
			Submit: w.clusters[r.IntN(20)].Name,
			Source: w.clusters[r.IntN(20)].Name,
			Class:  Class(r.IntN(4)),
			Work:   float64(500 * (10 + r.IntN(91))), // 10–100 s on a 500 MHz CPU
			Data:   float64(100_000 + r.IntN(2_000_000)),
		})
	}
	// four distinct clusters, flaky ones ten times as likely
	for len(rn.fails) < 4 {
		total := 0
		for c, cl := range w.clusters {
			if !slices.Contains(rn.fails, c) {
				total += map[bool]int{true: flakyWeight, false: 1}[cl.flaky]
			}
		}
		pick := r.IntN(total)
		for c, cl := range w.clusters {
			if slices.Contains(rn.fails, c) {
				continue
			}
			if pick -= map[bool]int{true: flakyWeight, false: 1}[cl.flaky]; pick < 0 {
				rn.fails = append(rn.fails, c)
				break
			}
		}
		rn.at = append(rn.at, r.Float64())
	}
	return rn
}

type placed struct {
	task          int
	from          string // who moved it there: its submitter, or the cluster it migrated from
	cluster       int
	start, finish float64
}

// simulate runs one draw under one scheduler and returns the number of
// migrations, the makespan, and the outcomes it produced.
func (w world) simulate(t *testing.T, rn run, trust func(from, to string) float64) (migrations int, makespan float64, out map[Key]Outcomes) {
	g := Grid{Bandwidth: AreaBandwidth(100e6/8, 1e6/8)}
	for _, cl := range w.clusters {
		g.Clusters = append(g.Clusters, cl.Cluster)
	}
	as, err := MinMin(rn.tasks, g, trust)
	if err != nil {
		t.Fatal(err)
	}
	var live []placed
	planned := 0.0
	for _, a := range as {
		live = append(live, placed{a.Task, rn.tasks[a.Task].Submit, a.Cluster, a.Start, a.Finish})
		planned = max(planned, a.Finish)
	}
	out = map[Key]Outcomes{}
	type failure struct {
		c  int
		at float64
	}
	var fs []failure
	for x, c := range rn.fails {
		fs = append(fs, failure{c, rn.at[x] * planned})
	}
	slices.SortFunc(fs, func(a, b failure) int { return cmp.Compare(a.at, b.at) })
	down := make([]bool, len(g.Clusters))
	for _, f := range fs {
		down[f.c] = true
		var victims []Task
		var keep []placed
		for _, p := range live {
			if p.cluster == f.c && p.finish > f.at {
				k := Key{p.from, g.Clusters[f.c].Name}
				o := out[k]
				o.Failed++
				out[k] = o
				tk := rn.tasks[p.task]
				tk.Submit = g.Clusters[f.c].Name // moved from the failed cluster
				tk.Name = fmt.Sprint(p.task)
				victims = append(victims, tk)
				continue
			}
			keep = append(keep, p)
		}
		live = keep
		migrations += len(victims)
		if len(victims) == 0 {
			continue
		}
		// Reschedule the victims on the clusters still up, from now on.
		mg := Grid{Bandwidth: g.Bandwidth}
		for c, cl := range g.Clusters {
			cl.Down = down[c]
			cl.Start = f.at
			cl.DataStart = f.at
			for _, p := range live {
				if p.cluster == c {
					cl.Start = max(cl.Start, p.finish)
				}
			}
			mg.Clusters = append(mg.Clusters, cl)
		}
		mas, err := MinMin(victims, mg, trust)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range mas {
			var task int
			fmt.Sscan(victims[a.Task].Name, &task)
			live = append(live, placed{task, victims[a.Task].Submit, a.Cluster, a.Start, a.Finish})
		}
	}
	for _, p := range live {
		k := Key{p.from, g.Clusters[p.cluster].Name}
		o := out[k]
		o.Completed++
		out[k] = o
		makespan = max(makespan, p.finish)
	}
	if len(live) != len(rn.tasks) {
		t.Fatalf("%d tasks finished of %d", len(live), len(rn.tasks))
	}
	return migrations, makespan, out
}

func mean(xs []int) float64 {
	s := 0
	for _, x := range xs {
		s += x
	}
	return float64(s) / float64(len(xs))
}

// TestExperimentMigrationsFallAsTrustIsLearned runs the experiment twice over:
// a learning series of runs (each run's outcomes feed the broker's ρ before
// the next), and, at checkpoints along it, the schedulers on one fixed set of
// evaluation runs that nobody learns from, so that the learning curve is not
// drowned in the run-to-run noise of 4 failures among 100 tasks. Trust is
// learned as gridsub's broker learns it: every placement is work the broker
// moved (From = ""), and trust(from, to) is Model.Scores' score of the target.
func TestExperimentMigrationsFallAsTrustIsLearned(t *testing.T) {
	if testing.Short() {
		t.Skip("the experiment takes a few seconds")
	}
	const runs, evals = 60, 40
	checkpoints := []int{0, 2, 5, 10, 20, 40, 60}
	r := rand.New(rand.NewPCG(2006, expSeed()))
	w := newWorld(r)
	eval := make([]run, evals)
	er := rand.New(rand.NewPCG(2006, 1))
	for x := range eval {
		eval[x] = w.draw(er)
	}
	m := DefaultModel()
	sites := make([]Node, 0, len(w.nodes))
	for _, cl := range w.clusters {
		sites = append(sites, w.nodes[cl.Name])
	}
	learned := map[Key]Outcomes{} // From = "": the broker moved all the work
	// evaluate returns the mean migrations and makespan over the evaluation runs.
	evaluate := func(trust func(from, to string) float64) (float64, float64) {
		var ms []int
		span := 0.0
		for _, rn := range eval {
			n, mk, _ := w.simulate(t, rn, trust)
			ms = append(ms, n)
			span += mk / evals
		}
		return mean(ms), span
	}
	minEval, minSpan := evaluate(nil)
	var curve []float64
	var trustMig, minMig []int
	for x := 0; x <= runs; x++ {
		scores := m.Scores(Node{}, sites, learned)
		trust := func(_, to string) float64 { return scores[to] }
		if slices.Contains(checkpoints, x) {
			e, span := evaluate(trust)
			curve = append(curve, e)
			t.Logf("after %2d runs, over %d evaluation runs: mean migrations Trust-Min-min %5.2f, Min-min %5.2f; mean makespan %4.0f s, %4.0f s",
				x, evals, e, minEval, span, minSpan)
		}
		if x == runs {
			break
		}
		rn := w.draw(r)
		tm, tms, out := w.simulate(t, rn, trust)
		for k, o := range out {
			learned[Key{"", k.To}] = learned[Key{"", k.To}].Add(o)
		}
		mm, mms, _ := w.simulate(t, rn, nil)
		trustMig, minMig = append(trustMig, tm), append(minMig, mm)
		t.Logf("learning run %2d: migrations Trust-Min-min %2d, Min-min %2d; makespan %4.0f s, %4.0f s; failed %v", x+1, tm, mm, tms, mms, rn.fails)
	}
	half := runs / 2
	t.Logf("learning runs, mean migrations first half → second half: Trust-Min-min %.1f → %.1f, Min-min %.1f → %.1f",
		mean(trustMig[:half]), mean(trustMig[half:]), mean(minMig[:half]), mean(minMig[half:]))
	scores := m.Scores(Node{}, sites, learned)
	var flakyMax, steadyMin float64 = 0, 1
	for _, cl := range w.clusters {
		if cl.flaky {
			flakyMax = max(flakyMax, scores[cl.Name])
		} else {
			steadyMin = min(steadyMin, scores[cl.Name])
		}
	}
	t.Logf("learned scores: flaky clusters at most %.3f, steady clusters at least %.3f", flakyMax, steadyMin)

	if !(flakyMax < steadyMin) {
		t.Errorf("a flaky cluster's learned score %.3f is not below every steady one (%.3f)", flakyMax, steadyMin)
	}
	first, last := curve[0], curve[len(curve)-1]
	if !(last < 0.8*first) {
		t.Errorf("Trust-Min-min's evaluation migrations went %.2f → %.2f, want a fall of more than 20 %%", first, last)
	}
	if !(last < minEval) {
		t.Errorf("learned Trust-Min-min migrates %.2f, Min-min %.2f: want fewer", last, minEval)
	}
	if a, b := mean(minMig[:half]), mean(minMig[half:]); !(b > 0.75*a && b < 1.25*a) {
		t.Errorf("Min-min's migrations over the learning runs went %.1f → %.1f, want flat (within 25 %%)", a, b)
	}
}

func expSeed() uint64 {
	var s uint64 = 65
	fmt.Sscan(os.Getenv("EXPSEED"), &s)
	return s
}
