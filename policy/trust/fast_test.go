package trust

import (
	"fmt"
	"math"
	"testing"

	"pgregory.net/rapid"
)

// rescan is Min-min as the paper states it: every unscheduled (task,
// cluster) pair re-evaluated at every step. sched.minmin keeps each task's
// best between steps; the two must choose alike.
func rescan(s *sched, ts, cs []int, starts []float64) []Assignment {
	left := append([]int(nil), ts...)
	var res []Assignment
	for len(left) > 0 {
		bestX, bestC := -1, -1
		bestV, bestB, bestF := math.Inf(1), 0.0, 0.0
		for x, t := range left {
			tv, tc, tb, tf := math.Inf(1), -1, 0.0, 0.0
			for _, c := range cs {
				b, f := s.mct(t, c, starts)
				if v := s.weighted(t, c, f); v < tv || tc < 0 {
					tv, tc, tb, tf = v, c, b, f
				}
			}
			if tv < bestV || bestX < 0 {
				bestX, bestC, bestV, bestB, bestF = x, tc, tv, tb, tf
			}
		}
		t := left[bestX]
		res = append(res, Assignment{Task: t, Cluster: bestC, Start: bestB, Finish: bestF})
		starts[bestC] = bestF
		left = append(left[:bestX], left[bestX+1:]...)
	}
	return res
}

// Small integer works, powers and starts make ties frequent, so the
// tie-breaks (earlier task, then earlier cluster) are exercised.
func TestMinMinKeepsBestsIsFullRescan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := genGrid(t, 3)
		tasks := genTasks(t, g, 1)
		var trust func(from, to string) float64
		if rapid.Bool().Draw(t, "trusted") {
			tv := map[string]float64{}
			for _, c := range g.Clusters {
				tv[c.Name] = float64(rapid.IntRange(1, 4).Draw(t, "trust")) / 4
			}
			trust = func(_, to string) float64 { return tv[to] }
		}
		src := make([]int, len(tasks))
		for x, tk := range tasks {
			src[x] = -1
			for c, cl := range g.Clusters {
				if cl.Name == tk.Source {
					src[x] = c
				}
			}
		}
		var ts, cs []int
		for x := range tasks {
			ts = append(ts, x)
		}
		for c := range g.Clusters {
			cs = append(cs, c)
		}
		run := func(f func(*sched, []int, []int, []float64) []Assignment) ([]Assignment, []float64) {
			starts := make([]float64, len(g.Clusters))
			for c, cl := range g.Clusters {
				starts[c] = cl.Start
			}
			s := &sched{g: g, tasks: tasks, src: src, starts: starts}
			s.setTrust(trust, newCache(len(tasks)*len(g.Clusters)))
			return f(s, ts, cs, starts), starts
		}
		got, gotStarts := run((*sched).minmin)
		want, wantStarts := run(rescan)
		if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(gotStarts) != fmt.Sprint(wantStarts) {
			t.Fatalf("kept bests:\n%v\nfull rescan:\n%v", got, want)
		}
	})
}

// Trusts gives every pair exactly (to the bit) what Trust gives.
func TestTrustsIsTrust(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := DefaultModel()
		n := rapid.IntRange(0, 7).Draw(t, "nodes")
		nodes := map[string]Node{}
		var names []string
		for i := range n {
			name := fmt.Sprintf("n%d", i)
			if i == 0 && rapid.Bool().Draw(t, "broker") {
				name = "" // the broker's own name
			}
			names = append(names, name)
			nodes[name] = Node{Area: fmt.Sprintf("a%d", rapid.IntRange(0, 2).Draw(t, "area")),
				Power: float64(rapid.IntRange(0, 4).Draw(t, "power")), Bandwidth: float64(rapid.IntRange(0, 4).Draw(t, "bw"))}
		}
		out := map[Key]Outcomes{}
		for range rapid.IntRange(0, 30).Draw(t, "outcomes") {
			if n == 0 {
				break
			}
			k := Key{names[rapid.IntRange(0, n-1).Draw(t, "from")], names[rapid.IntRange(0, n-1).Draw(t, "to")]}
			out[k] = Outcomes{Completed: float64(rapid.IntRange(0, 9).Draw(t, "c")),
				Failed: float64(rapid.IntRange(0, 9).Draw(t, "f")), Unreachable: float64(rapid.IntRange(0, 3).Draw(t, "u"))}
		}
		all := m.Trusts(nodes, out)
		if len(all) != n*n {
			t.Fatalf("%d pairs for %d nodes", len(all), n)
		}
		for _, i := range names {
			for _, j := range names {
				if got, want := all[Key{i, j}], m.Trust(nodes, out, i, j); math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("Trusts[%q→%q] = %v, Trust = %v", i, j, got, want)
				}
			}
		}
	})
}
