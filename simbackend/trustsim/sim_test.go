package trustsim

import (
	"context"
	"errors"
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
