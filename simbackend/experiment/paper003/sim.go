package paper003

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/benefit"
)

// world is one seed's grid and meta-task, shared by every heuristic and
// data size of that seed (so comparisons are paired).
type world struct {
	hostCluster []int       // cluster of each host
	speed       []float64   // speed of each host
	bw          [][]float64 // bytes/s from repository r to cluster c
	tasks       []task
}

type task struct {
	submit   time.Duration
	work     time.Duration // on a host of speed 1
	size     float64       // input size per MB of the sweep's data_mb (a factor around 1)
	repos    []int         // repositories holding the input; the first is the primary copy
	deadline time.Duration // after submit
	worth    policy.Worth
}

// newWorld draws the grid and the tasks of one seed.
func newWorld(s *Spec, seed uint64) *world {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	w := &world{}
	for c, n := range s.Grid.Clusters {
		for k := 0; k < n; k++ {
			w.hostCluster = append(w.hostCluster, c)
			w.speed = append(w.speed, s.Grid.Speed[0]+r.Float64()*(s.Grid.Speed[1]-s.Grid.Speed[0]))
		}
	}
	lo, hi := math.Log(s.Grid.bw[0]), math.Log(s.Grid.bw[1])
	w.bw = make([][]float64, s.Grid.Repositories)
	for rp := range w.bw {
		w.bw[rp] = make([]float64, len(s.Grid.Clusters))
		for c := range w.bw[rp] {
			w.bw[rp][c] = math.Exp(lo + r.Float64()*(hi-lo))
		}
	}
	meanSpeed := (s.Grid.Speed[0] + s.Grid.Speed[1]) / 2
	var at time.Duration
	for i := 0; i < s.Tasks.Count; i++ {
		if s.Tasks.Arrival > 0 && i > 0 {
			at += time.Duration(r.ExpFloat64() * float64(s.Tasks.Arrival))
		}
		wk := time.Duration(float64(s.Tasks.Work[0]) + r.Float64()*float64(s.Tasks.Work[1]-s.Tasks.Work[0]))
		t := task{submit: at, work: wk, size: 0.5 + r.Float64()}
		n := s.Grid.Replicas[0] + r.IntN(s.Grid.Replicas[1]-s.Grid.Replicas[0]+1)
		t.repos = r.Perm(s.Grid.Repositories)[:n]
		f := s.Tasks.Deadline[0] + r.Float64()*(s.Tasks.Deadline[1]-s.Tasks.Deadline[0])
		t.deadline = time.Duration(f * float64(wk) / meanSpeed)
		t.worth = policy.Worth{Shape: policy.Linear, A: s.Tasks.Benefit[0], B: s.Tasks.Benefit[1], C: s.Tasks.Benefit[2]}
		if r.Float64() < s.Tasks.Urgent {
			t.worth = policy.Worth{Shape: policy.Step, A: s.Tasks.Benefit[0], B: s.Tasks.UrgentB, C: s.Tasks.Benefit[0]}
		}
		w.tasks = append(w.tasks, t)
	}
	return w
}

// Result is one run's metrics (seconds for times).
type Result map[string]float64

// simulate runs the repetitive mapping (paper 003's Algorithm 1) of one
// world with one heuristic at one data size: every interval, the tasks
// that arrived and those mapped before but not started are mapped again on
// the hosts' and repositories' current state; a task whose mapping starts
// before the next event starts (it is then fixed), a task whose minimum
// completion misses its deadline is abandoned (reported back to its user,
// as the paper drops it), the others wait for the next event.
func simulate(s *Spec, w *world, h Heuristic, dataMB float64) Result {
	nh := len(w.speed)
	hostFree := make([]time.Duration, nh)                  // when each host is free
	repoFree := make([]time.Duration, s.Grid.Repositories) // when each repository is free
	dt := time.Duration(s.Interval)
	cfg := benefit.Config{Heuristic: h.Name, Blind: h.Blind, ContestMachines: h.Machines}
	var pending []int
	next := 0 // next task to arrive
	res := Result{}
	var makespan, flow time.Duration
	done := 0
	for now := time.Duration(0); next < len(w.tasks) || len(pending) > 0; now += dt {
		for next < len(w.tasks) && w.tasks[next].submit <= now {
			pending = append(pending, next)
			next++
		}
		if len(pending) == 0 {
			continue
		}
		res["events"]++
		prob := &benefit.Problem{Machines: make([]benefit.Machine, nh), Repos: make([]time.Duration, len(repoFree))}
		for m := range prob.Machines {
			prob.Machines[m].Nodes = []time.Duration{max(hostFree[m]-now, 0)}
		}
		for rp := range repoFree {
			prob.Repos[rp] = max(repoFree[rp]-now, 0)
		}
		for _, i := range pending {
			t := &w.tasks[i]
			pt := benefit.Task{Width: 1, ETC: make([]time.Duration, nh), Submit: t.submit - now,
				Deadline: t.submit + t.deadline - now, HasDeadline: true, Worth: t.worth}
			for m := range pt.ETC {
				pt.ETC[m] = time.Duration(float64(t.work) / w.speed[m])
			}
			for _, rp := range t.repos {
				src := benefit.Source{Repo: rp, Tran: make([]time.Duration, nh)}
				for m := range src.Tran {
					src.Tran[m] = time.Duration(dataMB * t.size * 1e6 / w.bw[rp][w.hostCluster[m]] * float64(time.Second))
				}
				pt.Sources = append(pt.Sources, src)
			}
			prob.Tasks = append(prob.Tasks, pt)
		}
		maps := benefit.Map(prob, cfg)
		// Start what starts before the next event, in start order (the
		// mapping's own order on each host and repository).
		order := make([]int, 0, len(maps))
		for k, m := range maps {
			if !m.Dropped && m.Machine >= 0 && m.Start < dt {
				order = append(order, k)
			}
		}
		slices.SortFunc(order, func(a, b int) int { return cmpDur(maps[a].Start, maps[b].Start) })
		keep := pending[:0:0]
		started := map[int]bool{}
		for _, k := range order {
			m := maps[k]
			t := &w.tasks[pending[k]]
			src := prob.Tasks[k].Sources[m.Source]
			hostFree[m.Machine] = now + m.End
			if src.Tran[m.Machine] > 0 {
				repoFree[src.Repo] = max(repoFree[src.Repo], now+m.Start+src.Tran[m.Machine])
			}
			end := now + m.End
			makespan = max(makespan, end)
			flow += end - t.submit
			done++
			if end > t.submit+t.deadline {
				res["late"]++
			}
			res["benefit"] += t.worth.Value(end-t.submit, t.deadline)
			started[k] = true
		}
		for k, m := range maps {
			switch {
			case started[k]:
			case m.Dropped:
				res["abandoned"]++
			default:
				res["remaps"]++
				keep = append(keep, pending[k])
			}
		}
		pending = keep
	}
	res["makespan"] = makespan.Seconds()
	if done > 0 {
		res["mean_flow"] = flow.Seconds() / float64(done)
	}
	for _, k := range Metrics {
		res[k] += 0 // every metric present
	}
	return res
}

func cmpDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
