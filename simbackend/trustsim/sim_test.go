package trustsim

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/gridsub/gridsub/policy/trust"
)

func seq(t testing.TB, c Config) []RunResult {
	t.Helper()
	rs, err := Sequence(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func rate(rs []RunResult, tasks int) float64 {
	s := 0
	for _, r := range rs {
		s += r.Migrations
	}
	return float64(s) / float64(len(rs)*tasks)
}

// Both policies of one seed meet the same failing clusters run after run
// (common random numbers), a sequence is the same twice, and a run's
// makespan is never below its plan's.
func TestCommonDrawsAndDeterminism(t *testing.T) {
	c := Default()
	c.Tasks, c.Runs = 30, 8
	tm := seq(t, c)
	if again := seq(t, c); !slices.EqualFunc(tm, again, func(a, b RunResult) bool {
		return a.Makespan == b.Makespan && a.Migrations == b.Migrations && slices.Equal(a.Failed, b.Failed)
	}) {
		t.Error("the same sequence twice gave different runs")
	}
	c.Policy = MinMin
	mm := seq(t, c)
	for i := range tm {
		a, b := slices.Clone(tm[i].Failed), slices.Clone(mm[i].Failed)
		slices.Sort(a)
		slices.Sort(b)
		if !slices.Equal(a, b) || len(a) != 4 {
			t.Errorf("run %d: Trust-Min-min lost clusters %v, Min-min %v: want the same 4", i, a, b)
		}
		if tm[i].Makespan < tm[i].Planned || mm[i].Makespan < mm[i].Planned {
			t.Errorf("run %d: a makespan below its plan: %+v %+v", i, tm[i], mm[i])
		}
	}
}

// Trust is learned: with five flaky clusters, Trust-Min-min's migration
// rate over the last runs is below its rate over the first runs in most
// worlds, and then below Min-min's over the same last runs; bundle
// migration moves a failed cluster's tasks to one cluster.
func TestTrustIsLearned(t *testing.T) {
	falls, below := 0, 0
	const seeds, runs, tasks = 5, 40, 50
	for seed := uint64(1); seed <= seeds; seed++ {
		c := Default()
		c.Tasks, c.Runs, c.Seed = tasks, runs, seed
		tm := seq(t, c)
		c.Policy = MinMin
		mm := seq(t, c)
		first, last, mlast := rate(tm[:10], tasks), rate(tm[runs-10:], tasks), rate(mm[runs-10:], tasks)
		t.Logf("seed %d: Trust-Min-min %.3f → %.3f, Min-min last %.3f", seed, first, last, mlast)
		if last < first {
			falls++
		}
		if last < mlast {
			below++
		}
	}
	if falls < 4 {
		t.Errorf("Trust-Min-min's migration rate fell in %d of %d worlds, want at least 4", falls, seeds)
	}
	if below < 3 {
		t.Errorf("learned Trust-Min-min migrated less than Min-min in %d of %d worlds, want at least 3", below, seeds)
	}
}

// The paper's first migration method: the failed cluster's tasks go
// together to the cluster with the least MCT of the whole bundle, divided by
// trust when there is one.
func TestBundleMovesTogether(t *testing.T) {
	g := trust.Grid{Clusters: []trust.Cluster{
		{Name: "dead", Area: "a", Power: 100, Down: true},
		{Name: "fast", Area: "a", Power: 200, Start: 10},
		{Name: "slow", Area: "a", Power: 100},
	}}
	tasks := []trust.Task{{Name: "x", Submit: "dead", Work: 1000}, {Name: "y", Submit: "dead", Work: 1000}}
	as, err := bundle(tasks, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	// fast: 10 + 5 + 5 = 20; slow: 10 + 10 = 20, tie to the lower index.
	if len(as) != 2 || as[0].Cluster != 1 || as[1].Cluster != 1 {
		t.Fatalf("without trust: %+v, want both on fast", as)
	}
	distrust := func(_, to string) float64 {
		if to == "fast" {
			return 0.5
		}
		return 1
	}
	as, err = bundle(tasks, g, distrust)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 2 || as[0].Cluster != 2 || as[1].Cluster != 2 || as[1].Finish != 20 {
		t.Fatalf("with fast distrusted: %+v, want both on slow, the last done at 20", as)
	}
}

func TestValidate(t *testing.T) {
	for _, mod := range []func(*Config){
		func(c *Config) { c.Clusters = 1 },
		func(c *Config) { c.Areas = 30 },
		func(c *Config) { c.FailShare = 1 },
		func(c *Config) { c.Migration = "teleport" },
		func(c *Config) { c.Policy = "max-min" },
		func(c *Config) { c.Flaky = 21 },
		func(c *Config) { c.Model.Floor = 0 },
	} {
		c := Default()
		mod(&c)
		if _, err := Sequence(context.Background(), c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err %v, want ErrConfig", c, err)
		}
	}
}

// The paper's trust as Trust-Min-min reads it: with no history it is the
// QoS comparison alone, so a weak cluster trusts a stronger one 3·ω_power +
// ω_bandwidth and a weaker one ω_bandwidth (the tasks go toward strength);
// failures of the work moved from a to b lower trust(a, b) by (1 − ρ), and
// never push it below PaperTrustFloor.
func TestPaperTrustFormula(t *testing.T) {
	c := Default()
	w := newWorld(c, rand.New(rand.NewPCG(c.Seed, 0x7a57)))
	// The weakest and the strongest cluster of area la0, and a third one.
	var weak, strong string
	for _, cl := range w.clusters {
		if cl.Area != "la0" {
			continue
		}
		if weak == "" || cl.Power < w.nodes[weak].Power {
			weak = cl.Name
		}
		if strong == "" || cl.Power > w.nodes[strong].Power {
			strong = cl.Name
		}
	}
	lv := w.paperLevels(map[trust.Key]trust.Outcomes{})
	m := c.Model
	up, down, self := lv.Cluster(weak, strong), lv.Cluster(strong, weak), lv.Cluster(weak, weak)
	// Direct: ω_power·3 + ω_bw·1 = 2.4 (same area); Indirect over the
	// other 19 nodes, each k's direct trust in strong.
	if wantUp := m.Trust(w.nodes, nil, weak, strong); up != wantUp || !(up > self && self > down) {
		t.Fatalf("trust(weak, strong) %v (want %v), trust(weak, weak) %v, trust(strong, weak) %v: want up > self > down",
			up, wantUp, self, down)
	}
	if d := m.Direct(w.nodes, nil, weak, strong); d != 3*m.ClusterWeights[0]+m.ClusterWeights[1] {
		t.Fatalf("Direct(weak, strong) = %v, want 3·%v + %v", d, m.ClusterWeights[0], m.ClusterWeights[1])
	}
	learned := map[trust.Key]trust.Outcomes{{From: weak, To: strong}: {Completed: 1, Failed: 3}}
	after := w.paperLevels(learned).Cluster(weak, strong)
	wantDirect := (3*m.ClusterWeights[0] + m.ClusterWeights[1]) * (1 - 0.75)
	if want := m.Alpha*wantDirect + m.Beta*m.Indirect(w.nodes, learned, weak, strong); after != want || !(after < up) {
		t.Fatalf("after 3 of 4 failed: trust %v, want %v (below %v)", after, want, up)
	}
	// Every observer's work at strong failed: trust is floored, not 0.
	all := map[trust.Key]trust.Outcomes{}
	for n := range w.nodes {
		all[trust.Key{From: n, To: strong}] = trust.Outcomes{Failed: 1}
	}
	if v := w.paperLevels(all).Cluster(weak, strong); v != PaperTrustFloor {
		t.Fatalf("trust with every ρ = 1: %v, want the floor %v", v, PaperTrustFloor)
	}
	// The area level compares areas' summed power with the area weights.
	if a := w.paperLevels(map[trust.Key]trust.Outcomes{}).Area("la0", "la0"); a != m.Trust(w.areas, nil, "la0", "la0") {
		t.Fatalf("trust(la0, la0) = %v, want %v", a, m.Trust(w.areas, nil, "la0", "la0"))
	}
}

// The two forms differ: on the same seed the paper's trust and the
// normalised score plan differently, and both are deterministic.
func TestTrustFormsDiffer(t *testing.T) {
	c := Default()
	c.Runs, c.Tasks = 5, 40
	paper, again := seq(t, c), seq(t, c)
	c.Policy = TrustMinMinScore
	score := seq(t, c)
	same := true
	for i := range paper {
		if !reflect.DeepEqual(paper[i], again[i]) {
			t.Fatalf("run %d: not deterministic: %+v then %+v", i, paper[i], again[i])
		}
		same = same && paper[i].Makespan == score[i].Makespan
	}
	if same {
		t.Fatal("the paper's trust and the score gave the same makespans in every run")
	}
}
