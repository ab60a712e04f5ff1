package benefit

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"pgregory.net/rapid"
)

// genWideProblem draws a mapping problem big enough to exercise what the
// small ones of genProblem never reach: more machines than a task's top
// list holds (so refreshes fall back to scans), several rounds of
// displacement, and deadline-pressed tasks watched across many commits.
func genWideProblem(t *rapid.T) *Problem {
	nm := rapid.IntRange(1, 24).Draw(t, "machines")
	nr := rapid.IntRange(0, 3).Draw(t, "repos")
	p := &Problem{Machines: make([]Machine, nm), Repos: make([]time.Duration, nr)}
	for m := range p.Machines {
		for k := rapid.IntRange(1, 6).Draw(t, "nodes"); k > 0; k-- {
			p.Machines[m].Nodes = append(p.Machines[m].Nodes, time.Duration(rapid.IntRange(0, 60).Draw(t, "free"))*time.Second)
		}
	}
	for r := range p.Repos {
		p.Repos[r] = time.Duration(rapid.IntRange(0, 30).Draw(t, "repo")) * time.Second
	}
	// Coarse times make ties (equal completions) common: the tie rules
	// are where a faster engine most easily departs from the old one.
	grain := time.Duration(rapid.SampledFrom([]int{1, 10}).Draw(t, "grain")) * time.Second
	for i := rapid.IntRange(0, 120).Draw(t, "tasks"); i > 0; i-- {
		tk := Task{Width: rapid.IntRange(1, 4).Draw(t, "width"), ETC: make([]time.Duration, nm)}
		for m := range tk.ETC {
			tk.ETC[m] = time.Duration(rapid.IntRange(-10, 100).Draw(t, "etc")) * grain / 10
			if tk.ETC[m] < 0 {
				tk.ETC[m] = -1
			}
		}
		for k := rapid.IntRange(0, 2).Draw(t, "sources"); k > 0; k-- {
			s := Source{Repo: rapid.IntRange(-1, nr-1).Draw(t, "srcrepo"), Tran: make([]time.Duration, nm)}
			for m := range s.Tran {
				s.Tran[m] = time.Duration(rapid.IntRange(0, 40).Draw(t, "tran")) * grain / 10
			}
			tk.Sources = append(tk.Sources, s)
		}
		if rapid.Bool().Draw(t, "hasdl") {
			tk.HasDeadline = true
			tk.Submit = -time.Duration(rapid.IntRange(0, 100).Draw(t, "age")) * time.Second
			tk.Deadline = time.Duration(rapid.IntRange(1, 600).Draw(t, "dl")) * time.Second
			tk.Keep = rapid.IntRange(0, 4).Draw(t, "keep") == 0
			switch rapid.IntRange(0, 2).Draw(t, "shape") {
			case 1:
				tk.Worth = policy.Worth{Shape: policy.Linear, A: 100, B: rapid.Float64Range(0.1, 1).Draw(t, "b"), C: rapid.Float64Range(0, 3).Draw(t, "c")}
			case 2:
				tk.Worth = policy.Worth{Shape: policy.Step, A: 100, B: rapid.Float64Range(0.1, 1).Draw(t, "b"), C: 100}
			}
		}
		if rapid.IntRange(0, 3).Draw(t, "prefers") == 0 {
			tk.Prefer = make([]bool, nm)
			tk.Prefer[rapid.IntRange(0, nm-1).Draw(t, "pref")] = true
		}
		p.Tasks = append(p.Tasks, tk)
	}
	return p
}

// The fast engine maps exactly as the engine before the speed work (kept
// in oracle_test.go): every field of every Mapping, for every heuristic,
// data-aware and data-blind, on random problems.
func TestFastEqualsOldEngine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genWideProblem(t)
		cfg := Config{Heuristic: rapid.SampledFrom(Names()).Draw(t, "heuristic"), Blind: rapid.Bool().Draw(t, "blind"), ContestMachines: true} // the old engine contests machines
		want := oldMap(p, cfg)
		got := Map(p, cfg)
		if !reflect.DeepEqual(got, want) {
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%+v: task %d: fast %+v, old %+v", cfg, i, got[i], want[i])
				}
			}
			t.Fatalf("%+v: mappings differ", cfg)
		}
	})
}

// The same on the benchmark's busy grids (50 sites, hundreds of jobs, the
// live planner's problem): the sizes where the two engines' shortcuts are
// all in play.
func TestFastEqualsOldEngineOnBusyGrids(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		for _, jobs := range []int{300, 800} {
			s := benchSnapshot(jobs, 50, seed)
			p, _ := ByName(Benefit)
			prob, _ := p.problem(s, &policy.Plan{})
			for _, h := range Names() {
				cfg := Config{Heuristic: h, ContestMachines: true}
				if got, want := Map(prob, cfg), oldMap(prob, cfg); !slices.Equal(got, want) {
					t.Fatalf("seed %d, %d jobs, %s: the fast engine maps differently", seed, jobs, h)
				}
			}
		}
	}
}

// BenchmarkRemapOldVsNew times one mapping event of the old and the fast
// engine on the same busy grid, alternately, at 250–4000 jobs and 50 sites,
// and reports both (ms-old-map, ms-new-map: CPU time of the process, so
// that other processes on a shared machine count less), their ratio (on a noisy shared
// machine the ratio is the figure to trust) and the whole pass of the live
// planner (ms-plan: the snapshot turned into a problem, mapped, and the
// decisions written: issue 17's "one remapping pass"). Run with
//
//	go test -run '^$' -bench RemapOldVsNew -benchtime 1x ./policy/benefit
//
// (each op is several alternating rounds; the minimum of each is kept).
func BenchmarkRemapOldVsNew(b *testing.B) {
	sizes := []int{250, 500, 1000, 2000, 4000}
	for _, jobs := range sizes {
		b.Run(fmt.Sprintf("%dx50", jobs), func(b *testing.B) {
			s := benchSnapshot(jobs, 50, 1)
			p, _ := ByName(Benefit)
			prob, _ := p.problem(s, &policy.Plan{})
			cfg := Config{Heuristic: Benefit, ContestMachines: true}
			reps := max(3, 8000/jobs)
			bestOld, bestNew, bestPlan := time.Duration(1<<62), time.Duration(1<<62), time.Duration(1<<62)
			for i := 0; i < b.N; i++ {
				for r := 0; r < reps; r++ {
					t := cpuTime()
					oldMap(prob, cfg)
					bestOld = min(bestOld, cpuTime()-t)
					t = cpuTime()
					Map(prob, cfg)
					bestNew = min(bestNew, cpuTime()-t)
					t = cpuTime()
					if _, err := p.Plan(context.Background(), s); err != nil {
						b.Fatal(err)
					}
					bestPlan = min(bestPlan, cpuTime()-t)
				}
			}
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(bestOld), "ms-old-map")
			b.ReportMetric(ms(bestNew), "ms-new-map")
			b.ReportMetric(float64(bestOld)/float64(bestNew), "old/new")
			b.ReportMetric(ms(bestPlan), "ms-plan")
		})
	}
}

// cpuTime is the process's CPU time so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestRemapUnder20ms is issue 17's bar, measured on demand (timing
// assertions do not belong in a suite run on a loaded 2-core machine):
// GRIDSUB_BENCH=1 go test -run RemapUnder20ms ./policy/benefit.
func TestRemapUnder20ms(t *testing.T) {
	if os.Getenv("GRIDSUB_BENCH") == "" {
		t.Skip("timing: set GRIDSUB_BENCH=1")
	}
	s := benchSnapshot(2000, 50, 1)
	p, _ := ByName(Benefit)
	best := time.Duration(1 << 62)
	for r := 0; r < 15; r++ {
		t0 := time.Now()
		if _, err := p.Plan(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(t0))
	}
	t.Logf("one remapping pass, 2000 jobs x 50 sites: %v (best of 15)", best)
	if best >= 20*time.Millisecond {
		t.Fatalf("one remapping pass over 2000 jobs and 50 sites took %v (bar: under 20 ms)", best)
	}
}

// TestDecisionWording holds the appended wording of a Start or Reserve
// decision to what fmt wrote before, on the busy grid's 800 decisions
// (deadlines, benefit functions and none).
func TestDecisionWording(t *testing.T) {
	s := benchSnapshot(800, 50, 3)
	p, _ := ByName(Benefit)
	pl, err := p.Plan(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]*policy.Job{}
	for k := range s.Queue {
		jobs[s.Queue[k].ID] = &s.Queue[k]
	}
	site := map[int]string{}
	for i := range s.Sites {
		site[i] = s.Sites[i].Name
	}
	n := 0
	for _, d := range pl.Decisions {
		if d.Action != policy.Start && d.Action != policy.Reserve {
			continue
		}
		j, o := jobs[d.Job], d.Chosen
		var round int
		if _, err := fmt.Sscanf(d.Status.Reasons[0][strings.LastIndex(d.Status.Reasons[0], "(round "):], "(round %d)", &round); err != nil {
			t.Fatalf("%s: %q: %v", d.Job, d.Status.Reasons[0], err)
		}
		want := fmt.Sprintf("%s: predicted completion %s at %s (round %d)", p.Name(), o.End().UTC().Format(time.RFC3339), site[o.Parts[0].Site], round)
		if !j.Deadline.IsZero() {
			want += fmt.Sprintf(", benefit %.4g", j.Worth.Value(o.End().Sub(j.Submit), j.Deadline.Sub(j.Submit)))
		}
		if d.Status.Reasons[0] != want {
			t.Fatalf("%s: %q, fmt wrote %q", d.Job, d.Status.Reasons[0], want)
		}
		n++
	}
	if n < 400 {
		t.Fatalf("only %d start/reserve decisions checked", n)
	}
}
