package trust

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// tb is what the helpers need from *testing.T and *rapid.T alike.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

func mustMinMin(t tb, tasks []Task, g Grid, trust func(from, to string) float64) []Assignment {
	t.Helper()
	as, err := MinMin(tasks, g, trust)
	if err != nil {
		t.Fatalf("MinMin: %v", err)
	}
	return as
}

// Two tasks, a fast cluster the submitter distrusts and a slow one it trusts.
func TestTrustChangesTheChoice(t *testing.T) {
	g := Grid{Clusters: []Cluster{{Name: "fast", Area: "A", Power: 2}, {Name: "slow", Area: "A", Power: 1}}}
	tasks := []Task{{Name: "t1", Submit: "s", Work: 10}, {Name: "t2", Submit: "s", Work: 4}}
	// Min-min: t2 fast [0,2], then t1 fast [2,7] (fast 7 < slow 10).
	want := []Assignment{{Task: 1, Cluster: 0, Start: 0, Finish: 2}, {Task: 0, Cluster: 0, Start: 2, Finish: 7}}
	if got := mustMinMin(t, tasks, g, nil); !slices.Equal(got, want) {
		t.Errorf("Min-min = %+v, want %+v", got, want)
	}
	// Trust(s,fast) = 0.4: t1 fast 5/0.4 = 12.5 vs slow 10; t2 fast 2/0.4 = 5 vs slow 4:
	// t2 → slow [0,4]; then t1 fast 12.5 vs slow 14/1 → fast [0,5].
	trust := func(from, to string) float64 {
		if from != "s" {
			t.Errorf("trust asked from %q, want the submitter s", from)
		}
		if to == "fast" {
			return 0.4
		}
		return 1
	}
	want = []Assignment{{Task: 1, Cluster: 1, Start: 0, Finish: 4}, {Task: 0, Cluster: 0, Start: 0, Finish: 5}}
	if got := mustMinMin(t, tasks, g, trust); !slices.Equal(got, want) {
		t.Errorf("Trust-Min-min = %+v, want %+v", got, want)
	}
}

// MCT = max(Data-START(s), START(c)) + TRAN + ETC.
func TestMCT(t *testing.T) {
	g := Grid{
		Clusters: []Cluster{
			{Name: "c1", Area: "A", Power: 100, Start: 0, DataStart: 5},
			{Name: "c2", Area: "B", Power: 100, Start: 10},
			{Name: "c3", Area: "A", Power: 200, Start: 0},
		},
		Bandwidth: AreaBandwidth(100, 10),
	}
	task := Task{Name: "t", Work: 1000, Data: 500, Source: "c1"}
	// c1: max(5,0) + 0 + 10 = 15; c2: max(5,10) + 500/10 + 10 = 70; c3: max(5,0) + 500/100 + 5 = 15.
	// Tie between c1 and c3 goes to the earlier cluster.
	got := mustMinMin(t, []Task{task}, g, nil)
	if want := []Assignment{{Task: 0, Cluster: 0, Start: 5, Finish: 15}}; !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	g.Clusters[0].Down = true // c1 failed, its store still serves
	got = mustMinMin(t, []Task{task}, g, nil)
	if want := []Assignment{{Task: 0, Cluster: 2, Start: 5, Finish: 15}}; !slices.Equal(got, want) {
		t.Errorf("c1 down: got %+v, want %+v", got, want)
	}
}

// Trust-Min-min schedules (h,h) before (l,l) even when the (l,l) task is
// shorter; Min-min does not look at classes.
func TestClassOrder(t *testing.T) {
	g := Grid{Clusters: []Cluster{{Name: "c", Power: 1}}}
	tasks := []Task{{Name: "small", Class: LL, Work: 1}, {Name: "big", Class: HH, Work: 100}}
	if got, want := mustMinMin(t, tasks, g, nil), []Assignment{{0, 0, 0, 1}, {1, 0, 1, 101}}; !slices.Equal(got, want) {
		t.Errorf("Min-min = %+v, want %+v", got, want)
	}
	one := func(string, string) float64 { return 1 }
	if got, want := mustMinMin(t, tasks, g, one), []Assignment{{1, 0, 0, 100}, {0, 0, 100, 101}}; !slices.Equal(got, want) {
		t.Errorf("Trust-Min-min = %+v, want %+v", got, want)
	}
}

func TestMinMinErrors(t *testing.T) {
	ok := Grid{Clusters: []Cluster{{Name: "a", Power: 1}}}
	for _, c := range []struct {
		name  string
		tasks []Task
		g     Grid
		trust func(string, string) float64
		want  error
	}{
		{"no clusters", nil, Grid{}, nil, ErrGrid},
		{"no power", nil, Grid{Clusters: []Cluster{{Name: "a"}}}, nil, ErrGrid},
		{"duplicate", nil, Grid{Clusters: []Cluster{{Name: "a", Power: 1}, {Name: "a", Power: 2}}}, nil, ErrGrid},
		{"all down", []Task{{}}, Grid{Clusters: []Cluster{{Name: "a", Power: 1, Down: true}}}, nil, ErrGrid},
		{"unknown source", []Task{{Name: "t", Source: "zz"}}, ok, nil, ErrTask},
		{"negative work", []Task{{Name: "t", Work: -1}}, ok, nil, ErrTask},
		{"NaN data", []Task{{Name: "t", Data: math.NaN()}}, ok, nil, ErrTask},
		{"bad class", []Task{{Name: "t", Class: 7}}, ok, nil, ErrTask},
		{"zero trust", []Task{{Name: "t"}}, ok, func(string, string) float64 { return 0 }, ErrTrust},
	} {
		if _, err := MinMin(c.tasks, c.g, c.trust); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
}

func genGrid(t *rapid.T, areas int) Grid {
	n := rapid.IntRange(1, 6).Draw(t, "clusters")
	g := Grid{Bandwidth: AreaBandwidth(100, 1)}
	for c := 0; c < n; c++ {
		g.Clusters = append(g.Clusters, Cluster{
			Name:      fmt.Sprintf("c%d", c),
			Area:      fmt.Sprintf("la%d", rapid.IntRange(0, areas-1).Draw(t, "area")),
			Power:     float64(rapid.IntRange(1, 8).Draw(t, "power")),
			Start:     float64(rapid.IntRange(0, 20).Draw(t, "start")),
			DataStart: float64(rapid.IntRange(0, 20).Draw(t, "dstart")),
			Down:      c > 0 && rapid.IntRange(0, 4).Draw(t, "down") == 0,
		})
	}
	return g
}

func genTasks(t *rapid.T, g Grid, classes int) []Task {
	ts := make([]Task, rapid.IntRange(0, 12).Draw(t, "tasks"))
	for x := range ts {
		src := ""
		if s := rapid.IntRange(-1, len(g.Clusters)-1).Draw(t, "src"); s >= 0 {
			src = g.Clusters[s].Name
		}
		ts[x] = Task{
			Name:   fmt.Sprintf("t%d", x),
			Submit: g.Clusters[rapid.IntRange(0, len(g.Clusters)-1).Draw(t, "submit")].Name,
			Class:  Class(rapid.IntRange(0, classes-1).Draw(t, "class")),
			Work:   float64(rapid.IntRange(0, 100).Draw(t, "work")),
			Data:   float64(rapid.IntRange(0, 100).Draw(t, "data")),
			Source: src,
		}
	}
	return ts
}

// Every task is placed once on a live cluster, its interval is its MCT, and
// the intervals on one cluster follow each other.
func checkSchedule(t *rapid.T, tasks []Task, g Grid, as []Assignment) {
	if len(as) != len(tasks) {
		t.Fatalf("%d assignments for %d tasks", len(as), len(tasks))
	}
	seen := make([]bool, len(tasks))
	free := make([]float64, len(g.Clusters))
	for c, cl := range g.Clusters {
		free[c] = cl.Start
	}
	// Replay per cluster in order of Start: each begins no earlier than the
	// cluster is free and than its store is ready.
	byStart := slices.Clone(as)
	slices.SortStableFunc(byStart, func(a, b Assignment) int {
		return cmp.Compare(a.Start, b.Start)
	})
	for _, a := range byStart {
		if seen[a.Task] {
			t.Fatalf("task %d placed twice", a.Task)
		}
		seen[a.Task] = true
		cl, tk := g.Clusters[a.Cluster], tasks[a.Task]
		if cl.Down {
			t.Fatalf("task %d on down cluster %s", a.Task, cl.Name)
		}
		if a.Start < free[a.Cluster] {
			t.Fatalf("task %d starts at %v on %s, busy until %v", a.Task, a.Start, cl.Name, free[a.Cluster])
		}
		tran := 0.0
		if tk.Source != "" {
			src := g.Clusters[slices.IndexFunc(g.Clusters, func(c Cluster) bool { return c.Name == tk.Source })]
			if a.Start < src.DataStart {
				t.Fatalf("task %d starts at %v before its store at %v", a.Task, a.Start, src.DataStart)
			}
			if src.Name != cl.Name {
				tran = tk.Data / g.Bandwidth(src, cl)
			}
		}
		if want := a.Start + tran + tk.Work/cl.Power; math.Abs(a.Finish-want) > 1e-9 {
			t.Fatalf("task %d finishes at %v, want %v", a.Task, a.Finish, want)
		}
		free[a.Cluster] = a.Finish
	}
}

func TestMinMinProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := genGrid(t, 3)
		tasks := genTasks(t, g, 4)
		checkSchedule(t, tasks, g, mustMinMin(t, tasks, g, nil))
		tv := map[string]float64{}
		for _, c := range g.Clusters {
			tv[c.Name] = rapid.Float64Range(0.05, 1).Draw(t, "trust")
		}
		trust := func(_, to string) float64 { return tv[to] }
		checkSchedule(t, tasks, g, mustMinMin(t, tasks, g, trust))
	})
}

// With one area, one class and a trust of 1 everywhere, Trust-Min-min is
// Min-min.
func TestTrustOneIsMinMin(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := genGrid(t, 1)
		tasks := genTasks(t, g, 1)
		a := mustMinMin(t, tasks, g, nil)
		b := mustMinMin(t, tasks, g, func(string, string) float64 { return 1 })
		if !slices.Equal(a, b) {
			t.Fatalf("Min-min %+v, Trust-Min-min with trust 1 %+v", a, b)
		}
	})
}

// MinMinLevels: the LA level divides by the trust between areas, so a
// distrusted area loses a task its cluster-level trust alone would have
// sent there; with Area nil it is MinMin.
func TestMinMinLevelsAreaTrust(t *testing.T) {
	g := Grid{Clusters: []Cluster{
		{Name: "a1", Area: "A", Power: 100},
		{Name: "b1", Area: "B", Power: 90},
	}}
	tasks := []Task{{Name: "t", Submit: "a1", Class: HH, Work: 900}}
	one := func(string, string) float64 { return 1 }
	as, err := MinMinLevels(tasks, g, Levels{Cluster: one})
	if err != nil || len(as) != 1 || as[0].Cluster != 0 {
		t.Fatalf("without area trust: %+v %v, want a1 (faster)", as, err)
	}
	distrustA := func(from, to string) float64 {
		if from != "A" {
			t.Errorf("area trust asked from %q, want the submitter's area A", from)
		}
		if to == "A" {
			return 0.5
		}
		return 1
	}
	as, err = MinMinLevels(tasks, g, Levels{Area: distrustA, Cluster: one})
	if err != nil || len(as) != 1 || as[0].Cluster != 1 {
		t.Fatalf("with area A distrusted: %+v %v, want b1", as, err)
	}
	bad := func(string, string) float64 { return 0 }
	if _, err := MinMinLevels(tasks, g, Levels{Area: bad, Cluster: one}); !errors.Is(err, ErrTrust) {
		t.Errorf("area trust 0: err %v, want ErrTrust", err)
	}
	want, _ := MinMin(tasks, g, one)
	got, _ := MinMinLevels(tasks, g, Levels{Cluster: one})
	if !slices.Equal(want, got) {
		t.Errorf("MinMinLevels with Area nil %+v != MinMin %+v", got, want)
	}
}
