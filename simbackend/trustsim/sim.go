package trustsim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/trust"
)

// Sentinel errors.
var (
	// ErrConfig: a Config field is out of range (the message names it).
	ErrConfig = errors.New("trustsim: bad configuration")
)

// Policies.
const (
	// TrustMinMin is Trust-Min-min as the paper writes it: QoS classes, LA
	// then cluster level, MCT divided by the paper's unnormalised trust
	// α·Direct + β·Indirect with Direct = (Σ ω_k·p_k)(1 − ρ), p_k ∈ {0, 1, 3}
	// (trust.Model.Trust), which rises toward clusters stronger than the
	// submitting one, floored at PaperTrustFloor.
	TrustMinMin = "trust-min-min"
	// TrustMinMinScore is Trust-Min-min with gridsub's normalised score in
	// (0, 1] instead (trust.Model.Score, or Config.Trust): a pooled success
	// rate in which the QoS terms only weigh the witnesses, so trust can
	// only lower a target's rank, never raise a strong cluster's.
	TrustMinMinScore = "trust-min-min-score"
	MinMin           = "min-min" // plain Min-min: no classes, no levels, no trust
	// QoSMinMin is Trust-Min-min with every trust fixed at 1 (classes and
	// levels, nothing learned): the ablation that separates what trust
	// learns from what the class order and the two levels do.
	QoSMinMin = "qos-min-min"
)

// Migration methods of the paper (§2.2.3 (3)).
const (
	OneByOne = "one-by-one" // the failed cluster's unfinished tasks re-planned by the policy itself
	Bundle   = "bundle"     // moved together to the one cluster with the least (trust-weighted) bundle MCT
)

// PaperTrustFloor is the least trust TrustMinMin divides by. The paper's
// trust is 0 when every observer's ρ toward the target is 1 or the QoS
// comparisons are all 0, and the paper does not say what MCT/0 means; the
// floor makes such a target the last resort, never impossible.
const PaperTrustFloor = 1e-3

// Policies lists the policies, Trust-Min-min first.
func Policies() []string { return []string{TrustMinMin, TrustMinMinScore, MinMin, QoSMinMin} }

// Migrations lists the migration methods.
func Migrations() []string { return []string{OneByOne, Bundle} }

// Config is one sequence of runs.
type Config struct {
	Clusters    int        // 20 in the paper
	Areas       int        // local areas, 4 in the paper; cluster c is in area c·Areas/Clusters
	Power       [2]float64 // CPU speed range, MHz (500–800)
	IntraBps    float64    // bytes/s between clusters of one area (100 Mbps)
	InterBps    float64    // bytes/s between areas (1 Mbps)
	Tasks       int        // tasks per run (100, 150, 200)
	Work        [2]float64 // task run time range on a 500 MHz CPU, seconds
	Data        [2]float64 // input size range, bytes
	FailShare   float64    // share of clusters failing in every run (0.2)
	Runs        int        // runs in sequence (100)
	Flaky       int        // clusters likelier to fail than the others
	FlakyWeight float64    // how much likelier (1 = failures uniform: nothing to learn)
	Migration   string     // OneByOne or Bundle
	Policy      string     // TrustMinMin or MinMin
	Seed        uint64     // the world and every run's draw; the same for every policy
	Model       trust.Model
	// Trust learns the trust TrustMinMinScore reads (policy.Trust, the
	// interface the live broker's daemon uses), each cluster and each
	// local area as the observer that asks; nil: paper 002's model with
	// Model's constants (trust.Policy). TrustMinMin reads Model.Trust.
	Trust policy.Trust
}

// Default is the paper's experiment with 100 tasks, Trust-Min-min, one by
// one, and this package's choices for what the paper leaves open.
func Default() Config {
	return Config{
		Clusters: 20, Areas: 4, Power: [2]float64{500, 800}, IntraBps: 100e6 / 8, InterBps: 1e6 / 8,
		Tasks: 100, Work: [2]float64{10, 100}, Data: [2]float64{100e3, 2.1e6},
		FailShare: 0.2, Runs: 100, Flaky: 5, FlakyWeight: 30,
		Migration: OneByOne, Policy: TrustMinMin, Seed: 1, Model: trust.DefaultModel(),
	}
}

func rng2(r [2]float64, lo, hi float64) bool { return r[0] >= lo && r[1] >= r[0] && r[1] <= hi }

// Validate reports the first field out of range, wrapping ErrConfig.
func (c Config) Validate() error {
	bad := func(f string, v any, want string) error {
		return fmt.Errorf("%w: %s = %v, want %s", ErrConfig, f, v, want)
	}
	switch {
	case c.Clusters < 2 || c.Clusters > 1000:
		return bad("clusters", c.Clusters, "2..1000")
	case c.Areas < 1 || c.Areas > c.Clusters:
		return bad("areas", c.Areas, "1..clusters")
	case !rng2(c.Power, 1e-3, 1e9) || c.Power[0] <= 0:
		return bad("power", c.Power, "[min, max] > 0")
	case !(c.IntraBps > 0 && c.IntraBps <= 1e15) || !(c.InterBps > 0 && c.InterBps <= 1e15):
		return bad("bandwidth", [2]float64{c.IntraBps, c.InterBps}, "> 0 bytes/s inside and between areas")
	case c.Tasks < 1 || c.Tasks > 100000:
		return bad("tasks", c.Tasks, "1..100000")
	case !rng2(c.Work, 0, 1e9):
		return bad("work", c.Work, "[min, max] seconds >= 0")
	case !rng2(c.Data, 0, 1e15):
		return bad("data", c.Data, "[min, max] bytes >= 0")
	case !(c.FailShare >= 0 && c.FailShare < 1):
		return bad("fail_share", c.FailShare, "[0, 1)")
	case c.Runs < 1 || c.Runs > 100000:
		return bad("runs", c.Runs, "1..100000")
	case c.Flaky < 0 || c.Flaky > c.Clusters:
		return bad("flaky", c.Flaky, "0..clusters")
	case !(c.FlakyWeight >= 1 && c.FlakyWeight <= 1e6):
		return bad("flaky_weight", c.FlakyWeight, "1..1e6")
	case c.Migration != OneByOne && c.Migration != Bundle:
		return bad("migration", c.Migration, "one-by-one or bundle")
	case !slices.Contains(Policies(), c.Policy):
		return bad("policy", c.Policy, "trust-min-min, trust-min-min-score, min-min or qos-min-min")
	}
	if err := c.Model.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// RunResult is one run of a sequence.
type RunResult struct {
	Makespan   float64 // seconds, with the failures and migrations
	Planned    float64 // the plan's makespan before any failure
	Migrations int     // task moves off failed clusters (a task may move twice)
	Failed     []int   // the clusters that failed, in failure order
}

type cluster struct {
	trust.Cluster
	weight float64 // relative chance of being among a run's failures
}

type world struct {
	c        Config
	clusters []cluster
	nodes    map[string]trust.Node
	areas    map[string]trust.Node
}

func newWorld(c Config, r *rand.Rand) *world {
	w := &world{c: c, nodes: map[string]trust.Node{}, areas: map[string]trust.Node{}}
	flaky := r.Perm(c.Clusters)[:c.Flaky]
	for i := range c.Clusters {
		cl := cluster{Cluster: trust.Cluster{
			Name:  fmt.Sprintf("c%02d", i),
			Area:  fmt.Sprintf("la%d", i*c.Areas/c.Clusters),
			Power: c.Power[0] + r.Float64()*(c.Power[1]-c.Power[0]),
		}, weight: 1}
		if slices.Contains(flaky, i) {
			cl.weight = c.FlakyWeight
		}
		w.clusters = append(w.clusters, cl)
		w.nodes[cl.Name] = trust.Node{Name: cl.Name, Area: cl.Area, Power: cl.Power}
		a := w.areas[cl.Area]
		a.Name, a.Power = cl.Area, a.Power+cl.Power
		w.areas[cl.Area] = a
	}
	return w
}

// draw is one run's tasks and failures.
type draw struct {
	tasks []trust.Task
	fails []int
	at    []float64 // share of the planned makespan at which fails[i] fails
}

func (w *world) draw(r *rand.Rand) draw {
	c := w.c
	var d draw
	midW, midD := (c.Work[0]+c.Work[1])/2, (c.Data[0]+c.Data[1])/2
	for x := range c.Tasks {
		work := c.Work[0] + r.Float64()*(c.Work[1]-c.Work[0])
		data := c.Data[0] + r.Float64()*(c.Data[1]-c.Data[0])
		class := trust.LL
		switch {
		case work >= midW && data >= midD:
			class = trust.HH
		case work >= midW:
			class = trust.HL
		case data >= midD:
			class = trust.LH
		}
		d.tasks = append(d.tasks, trust.Task{
			Name:   fmt.Sprintf("t%d", x),
			Submit: w.clusters[r.IntN(c.Clusters)].Name,
			Source: w.clusters[r.IntN(c.Clusters)].Name,
			Class:  class,
			Work:   work * c.Power[0], // seconds on the slowest CPU × its MHz
			Data:   data,
		})
	}
	nf := int(c.FailShare*float64(c.Clusters) + 0.5)
	for len(d.fails) < nf {
		total := 0.0
		for i, cl := range w.clusters {
			if !slices.Contains(d.fails, i) {
				total += cl.weight
			}
		}
		pick := r.Float64() * total
		for i, cl := range w.clusters {
			if slices.Contains(d.fails, i) {
				continue
			}
			if pick -= cl.weight; pick < 0 || i == len(w.clusters)-1 {
				d.fails = append(d.fails, i)
				break
			}
		}
		d.at = append(d.at, r.Float64())
	}
	return d
}

// Sequence runs c.Runs runs in sequence and returns each one's result.
// Trust-Min-min learns from every run's outcomes before the next (failed
// tasks count against the pair (mover, cluster), completions for it; the
// mover is the task's submitting cluster, or the failed cluster it migrated
// from); Min-min learns nothing. For one seed every policy meets the same
// clusters, tasks and failing clusters (common random numbers); a cluster
// fails at the same share of each policy's own planned makespan. ctx is
// checked between runs.
func Sequence(ctx context.Context, c Config) ([]RunResult, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	w := newWorld(c, rand.New(rand.NewPCG(c.Seed, 0x7a57)))
	runs := rand.New(rand.NewPCG(c.Seed, 0x2006))
	learned := map[trust.Key]trust.Outcomes{}
	var out []RunResult
	for range c.Runs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d := w.draw(runs)
		var lv trust.Levels
		var err error
		switch c.Policy {
		case TrustMinMin:
			lv = w.paperLevels(learned)
		case TrustMinMinScore:
			if lv, err = w.levels(learned); err != nil {
				return nil, err
			}
		case QoSMinMin:
			one := func(string, string) float64 { return 1 }
			lv = trust.Levels{Area: one, Cluster: one}
		}
		res, outcomes, err := w.simulate(d, lv)
		if err != nil {
			return nil, err
		}
		if c.Policy == TrustMinMin || c.Policy == TrustMinMinScore {
			for k, o := range outcomes {
				learned[k] = learned[k].Add(o)
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// paperLevels is the paper's trust learned so far (trust.Model.Trust, not
// normalised): between clusters over the clusters' outcomes, between areas
// over the same outcomes pooled by area, each node's QoS parameters its CPU
// power (an area's: the sum of its clusters') and, as every cluster of the
// paper's set-up has the same links, no bandwidth to compare (p = 1). Each
// value is floored at PaperTrustFloor. Computed once per run.
func (w *world) paperLevels(learned map[trust.Key]trust.Outcomes) trust.Levels {
	m := w.c.Model
	byArea := map[trust.Key]trust.Outcomes{}
	for k, o := range learned {
		ak := trust.Key{From: w.nodes[k.From].Area, To: w.nodes[k.To].Area}
		byArea[ak] = byArea[ak].Add(o)
	}
	table := func(nodes map[string]trust.Node, out map[trust.Key]trust.Outcomes) func(from, to string) float64 {
		t := m.Trusts(nodes, out) // Trust(a, b) for every pair
		for k, v := range t {
			t[k] = max(v, PaperTrustFloor)
		}
		return func(from, to string) float64 {
			if v, ok := t[trust.Key{From: from, To: to}]; ok {
				return v
			}
			return 1 // not a node of the grid: the trust between equals
		}
	}
	return trust.Levels{Area: table(w.areas, byArea), Cluster: table(w.nodes, learned)}
}

// levels is the trust learned so far, as Trust-Min-min-score reads it: between
// clusters over the clusters' outcomes, between areas over the same outcomes
// pooled by area, each asked of the trust policy with the asking cluster
// (area) as the observer (paper 002's model: direct trust from the asker's
// own outcomes, indirect from every other node's, β adapting to the
// asker's experience of each witness). Computed once per run: trust does
// not change while a run is planned.
func (w *world) levels(learned map[trust.Key]trust.Outcomes) (trust.Levels, error) {
	tp := w.c.Trust
	if tp == nil {
		tp = trust.Policy{Model: w.c.Model}
	}
	byArea := map[policy.TrustKey]policy.Outcomes{}
	byCluster := make(map[policy.TrustKey]policy.Outcomes, len(learned))
	for k, o := range learned {
		byCluster[policy.TrustKey(k)] = policy.Outcomes(o)
		ak := policy.TrustKey{From: w.nodes[k.From].Area, To: w.nodes[k.To].Area}
		byArea[ak] = byArea[ak].Add(policy.Outcomes(o))
	}
	table := func(nodes map[string]trust.Node, out map[policy.TrustKey]policy.Outcomes) (map[trust.Key]float64, error) {
		sites := make([]policy.TrustNode, 0, len(nodes))
		for _, n := range nodes {
			sites = append(sites, policy.TrustNode(n))
		}
		t := make(map[trust.Key]float64, len(nodes)*len(nodes))
		for _, a := range sites {
			sc, err := tp.Scores(&policy.TrustInput{Observer: a, Sites: sites, Outcomes: out})
			if err != nil {
				return nil, fmt.Errorf("trust policy %s: %w", tp.Name(), err)
			}
			for b, v := range sc {
				t[trust.Key{From: a.Name, To: b}] = v
			}
		}
		return t, nil
	}
	cl, err := table(w.nodes, byCluster)
	if err != nil {
		return trust.Levels{}, err
	}
	ar, err := table(w.areas, byArea)
	if err != nil {
		return trust.Levels{}, err
	}
	get := func(t map[trust.Key]float64) func(from, to string) float64 {
		return func(from, to string) float64 {
			if v, ok := t[trust.Key{From: from, To: to}]; ok {
				return v
			}
			return 1 // a pair nobody knows: no history
		}
	}
	return trust.Levels{Area: get(ar), Cluster: get(cl)}, nil
}

type placed struct {
	task          int
	from          string
	cluster       int
	start, finish float64
}

func (w *world) grid() trust.Grid {
	g := trust.Grid{Bandwidth: trust.AreaBandwidth(w.c.IntraBps, w.c.InterBps)}
	for _, cl := range w.clusters {
		g.Clusters = append(g.Clusters, cl.Cluster)
	}
	return g
}

// simulate plans d's tasks, fails its clusters and migrates their
// unfinished tasks; lv.Cluster == nil is plain Min-min.
func (w *world) simulate(d draw, lv trust.Levels) (RunResult, map[trust.Key]trust.Outcomes, error) {
	g := w.grid()
	as, err := trust.MinMinLevels(d.tasks, g, lv)
	if err != nil {
		return RunResult{}, nil, err
	}
	var res RunResult
	var live []placed
	for _, a := range as {
		live = append(live, placed{a.Task, d.tasks[a.Task].Submit, a.Cluster, a.Start, a.Finish})
		res.Planned = max(res.Planned, a.Finish)
	}
	out := map[trust.Key]trust.Outcomes{}
	type failure struct {
		c  int
		at float64
	}
	var fs []failure
	for x, c := range d.fails {
		fs = append(fs, failure{c, d.at[x] * res.Planned})
	}
	slices.SortStableFunc(fs, func(a, b failure) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	down := make([]bool, len(g.Clusters))
	for _, f := range fs {
		down[f.c] = true
		res.Failed = append(res.Failed, f.c)
		var victims []int // task indexes
		var keep []placed
		for _, p := range live {
			if p.cluster == f.c && p.finish > f.at {
				k := trust.Key{From: p.from, To: g.Clusters[f.c].Name}
				o := out[k]
				o.Failed++
				out[k] = o
				victims = append(victims, p.task)
				continue
			}
			keep = append(keep, p)
		}
		live = keep
		res.Migrations += len(victims)
		if len(victims) == 0 {
			continue
		}
		mg := trust.Grid{Bandwidth: g.Bandwidth}
		for c, cl := range g.Clusters {
			cl.Down = down[c]
			cl.Start, cl.DataStart = f.at, f.at
			for _, p := range live {
				if p.cluster == c {
					cl.Start = max(cl.Start, p.finish)
				}
			}
			mg.Clusters = append(mg.Clusters, cl)
		}
		moved := make([]trust.Task, len(victims))
		for x, t := range victims {
			moved[x] = d.tasks[t]
			moved[x].Submit = g.Clusters[f.c].Name // moved from the failed cluster
		}
		var mas []trust.Assignment
		if w.c.Migration == Bundle {
			mas, err = bundle(moved, mg, lv.Cluster)
		} else {
			mas, err = trust.MinMinLevels(moved, mg, lv)
		}
		if err != nil {
			return RunResult{}, nil, err
		}
		for _, a := range mas {
			live = append(live, placed{victims[a.Task], moved[a.Task].Submit, a.Cluster, a.Start, a.Finish})
		}
	}
	for _, p := range live {
		k := trust.Key{From: p.from, To: g.Clusters[p.cluster].Name}
		o := out[k]
		o.Completed++
		out[k] = o
		res.Makespan = max(res.Makespan, p.finish)
	}
	if len(live) != len(d.tasks) {
		return RunResult{}, nil, fmt.Errorf("trustsim: %d tasks finished of %d", len(live), len(d.tasks))
	}
	return res, out, nil
}

// bundle is the paper's first migration method: the unfinished tasks move
// together, as one task, to the live cluster with the least MCT of the
// whole bundle (its tasks one after the other there, each reading its own
// input) divided by trust(failed cluster, target); without trust, the least
// MCT. Ties go to the lower cluster index.
func bundle(tasks []trust.Task, g trust.Grid, tr func(from, to string) float64) ([]trust.Assignment, error) {
	best, bestV := -1, 0.0
	var bestAs []trust.Assignment
	for c, cl := range g.Clusters {
		if cl.Down {
			continue
		}
		one := trust.Grid{Bandwidth: g.Bandwidth, Clusters: slices.Clone(g.Clusters)}
		for x := range one.Clusters {
			one.Clusters[x].Down = x != c
		}
		as, err := trust.MinMin(tasks, one, nil)
		if err != nil {
			return nil, err
		}
		end := cl.Start
		for _, a := range as {
			end = max(end, a.Finish)
		}
		v := end
		if tr != nil {
			t := tr(tasks[0].Submit, cl.Name)
			if !(t > 0) {
				return nil, fmt.Errorf("trustsim: trust(%s, %s) = %v", tasks[0].Submit, cl.Name, t)
			}
			v = end / t
		}
		if best < 0 || v < bestV {
			best, bestV, bestAs = c, v, as
		}
	}
	if best < 0 {
		return nil, fmt.Errorf("trustsim: every cluster is down")
	}
	return bestAs, nil
}
