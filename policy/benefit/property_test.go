package benefit

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"pgregory.net/rapid"
)

// genProblem draws a small mapping problem: 1–6 machines of 1–4 nodes,
// 0–3 repositories, up to 25 tasks with random widths, run times (some
// machines forbidden), sources, deadlines and benefit functions.
func genProblem(t *rapid.T, deadlines bool) *Problem {
	nm := rapid.IntRange(1, 6).Draw(t, "machines")
	nr := rapid.IntRange(0, 3).Draw(t, "repos")
	p := &Problem{Machines: make([]Machine, nm), Repos: make([]time.Duration, nr)}
	for m := range p.Machines {
		n := rapid.IntRange(1, 4).Draw(t, "nodes")
		for k := 0; k < n; k++ {
			p.Machines[m].Nodes = append(p.Machines[m].Nodes, time.Duration(rapid.IntRange(0, 50).Draw(t, "free"))*time.Second)
		}
	}
	for r := range p.Repos {
		p.Repos[r] = time.Duration(rapid.IntRange(0, 30).Draw(t, "repo")) * time.Second
	}
	nt := rapid.IntRange(0, 25).Draw(t, "tasks")
	for i := 0; i < nt; i++ {
		tk := Task{Width: rapid.IntRange(1, 3).Draw(t, "width"), ETC: make([]time.Duration, nm)}
		for m := range tk.ETC {
			tk.ETC[m] = time.Duration(rapid.IntRange(-20, 100).Draw(t, "etc")) * time.Second
			if tk.ETC[m] < 0 {
				tk.ETC[m] = -1
			}
		}
		ns := rapid.IntRange(0, 2).Draw(t, "sources")
		for k := 0; k < ns; k++ {
			s := Source{Repo: rapid.IntRange(-1, nr-1).Draw(t, "srcrepo"), Tran: make([]time.Duration, nm)}
			for m := range s.Tran {
				s.Tran[m] = time.Duration(rapid.IntRange(0, 40).Draw(t, "tran")) * time.Second
			}
			tk.Sources = append(tk.Sources, s)
		}
		if deadlines && rapid.Bool().Draw(t, "hasdl") {
			tk.HasDeadline = true
			tk.Submit = -time.Duration(rapid.IntRange(0, 100).Draw(t, "age")) * time.Second
			tk.Deadline = time.Duration(rapid.IntRange(1, 400).Draw(t, "dl")) * time.Second
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

// refMinMin is a plain Min-min, written independently of Map: repeatedly
// pick the unmapped task with the least minimum completion (ties: lower
// index; machines: earlier, preferred, lower index) and map it.
func refMinMin(p *Problem, blind bool) []Mapping {
	nodes := make([][]time.Duration, len(p.Machines))
	for m := range nodes {
		nodes[m] = slices.Sorted(slices.Values(p.Machines[m].Nodes))
	}
	repos := slices.Clone(p.Repos)
	out := make([]Mapping, len(p.Tasks))
	left := map[int]bool{}
	for i := range p.Tasks {
		left[i] = true
		out[i] = Mapping{Machine: -1, Source: -1, BestAt: -1}
	}
	type opt struct {
		m, src int
		comp   time.Duration
		ok     bool
	}
	bestOf := func(i int) opt {
		t := &p.Tasks[i]
		var b opt
		for m := range nodes {
			if t.ETC[m] < 0 || t.Width > len(nodes[m]) {
				continue
			}
			st := nodes[m][t.Width-1]
			c, src := st+t.ETC[m], -1
			if len(t.Sources) > 0 && blind {
				src = 0
			} else if len(t.Sources) > 0 {
				c = -1
				for k, s := range t.Sources {
					b := st
					if s.Repo >= 0 && s.Tran[m] > 0 {
						b = max(b, repos[s.Repo])
					}
					if x := b + s.Tran[m] + t.ETC[m]; c < 0 || x < c {
						c, src = x, k
					}
				}
			}
			pref := func(m int) bool { return t.Prefer != nil && t.Prefer[m] }
			if !b.ok || c < b.comp || c == b.comp && pref(m) && !pref(b.m) {
				b = opt{m, src, c, true}
			}
		}
		return b
	}
	for len(left) > 0 {
		bi, bo := -1, opt{}
		for i := range p.Tasks {
			if !left[i] {
				continue
			}
			o := bestOf(i)
			if !o.ok {
				delete(left, i)
				continue
			}
			if bi < 0 || o.comp < bo.comp || o.comp == bo.comp && i < bi {
				bi, bo = i, o
			}
		}
		if bi < 0 {
			break
		}
		delete(left, bi)
		t := &p.Tasks[bi]
		begin, tran := nodes[bo.m][t.Width-1], time.Duration(0)
		if bo.src >= 0 {
			s := t.Sources[bo.src]
			if s.Repo >= 0 && s.Tran[bo.m] > 0 {
				begin = max(begin, repos[s.Repo])
			}
			tran = s.Tran[bo.m]
			if s.Repo >= 0 && tran > 0 {
				repos[s.Repo] = begin + tran
			}
		}
		end := max(begin+tran+t.ETC[bo.m], begin+1)
		for k := 0; k < t.Width; k++ {
			nodes[bo.m][k] = end
		}
		slices.Sort(nodes[bo.m])
		out[bi] = Mapping{Machine: bo.m, Source: bo.src, Start: begin, End: end}
	}
	return out
}

// placement strips what Min-min does not define (rounds, Best).
func placement(ms []Mapping) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = fmt.Sprintf("m%d s%d %v-%v dropped=%v", m.Machine, m.Source, m.Start, m.End, m.Dropped)
	}
	return out
}

// With no deadline pressure the benefit heuristic places exactly as
// Min-min does (paper 003's claim), data-aware and data-blind; and the
// engine's Min-min is Min-min.
func TestPropertyNoDeadlineEqualsMinMin(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genProblem(t, false)
		blind := rapid.Bool().Draw(t, "blind")
		want := placement(refMinMin(p, blind))
		for _, h := range []string{Benefit, MinMin} {
			got := placement(Map(p, Config{Heuristic: h, Blind: blind}))
			if !slices.Equal(got, want) {
				t.Fatalf("%s (blind %v) differs from Min-min:\n got %v\nwant %v", h, blind, got, want)
			}
		}
	})
}

// Every task is mapped once or dropped (or has no machine at all); no
// machine's nodes are used twice at once; repositories serve one transfer
// at a time; every dropped task really could not meet its deadline on the
// state its round saw; no kept (best-effort) task is dropped.
func TestPropertyMappingInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genProblem(t, true)
		h := rapid.SampledFrom([]string{Benefit, MinMin, Sufferage}).Draw(t, "heuristic")
		blind := rapid.Bool().Draw(t, "blind")
		ms := Map(p, Config{Heuristic: h, Blind: blind})
		if len(ms) != len(p.Tasks) {
			t.Fatalf("%d mappings for %d tasks", len(ms), len(p.Tasks))
		}
		type iv struct {
			a, b time.Duration
			w    int
		}
		use := make([][]iv, len(p.Machines))
		repoUse := make([][]iv, len(p.Repos))
		for i, m := range ms {
			tk := &p.Tasks[i]
			if m.Dropped {
				if !tk.HasDeadline || tk.Keep {
					t.Fatalf("task %d dropped without a deadline to miss (keep %v)", i, tk.Keep)
				}
				if want := minCompletion(p, ms, i, m.Round, blind); m.Best != want || m.Best <= tk.Deadline {
					t.Fatalf("task %d dropped in round %d with best %v (recomputed %v), deadline %v", i, m.Round, m.Best, want, tk.Deadline)
				}
				continue
			}
			if m.Machine < 0 {
				if possible(p, i) {
					t.Fatalf("task %d left unmapped though a machine can take it", i)
				}
				continue
			}
			if tk.ETC[m.Machine] < 0 || tk.Width > len(p.Machines[m.Machine].Nodes) {
				t.Fatalf("task %d on machine %d it cannot use", i, m.Machine)
			}
			tran := time.Duration(0)
			if m.Source >= 0 {
				s := tk.Sources[m.Source]
				tran = s.Tran[m.Machine]
				if s.Repo >= 0 && tran > 0 {
					if m.Start < p.Repos[s.Repo] {
						t.Fatalf("task %d reads repo %d at %v before its Data-START %v", i, s.Repo, m.Start, p.Repos[s.Repo])
					}
					repoUse[s.Repo] = append(repoUse[s.Repo], iv{m.Start, m.Start + tran, 1})
				}
			}
			if want := max(m.Start+tran+tk.ETC[m.Machine], m.Start+1); m.End != want {
				t.Fatalf("task %d: end %v, want start %v + tran %v + etc %v", i, m.End, m.Start, tran, tk.ETC[m.Machine])
			}
			use[m.Machine] = append(use[m.Machine], iv{m.Start, m.End, tk.Width})
		}
		for mi, ivs := range use {
			// At every start, the nodes in use (tasks and initial holds) fit.
			for _, x := range ivs {
				busy := x.w
				for _, y := range ivs {
					if y != x && y.a <= x.a && x.a < y.b {
						busy += y.w
					}
				}
				for _, f := range p.Machines[mi].Nodes {
					if f > x.a {
						busy++
					}
				}
				if busy > len(p.Machines[mi].Nodes) {
					t.Fatalf("machine %d over-committed at %v: %d nodes busy of %d", mi, x.a, busy, len(p.Machines[mi].Nodes))
				}
			}
		}
		for r, ivs := range repoUse {
			for a := range ivs {
				for b := a + 1; b < len(ivs); b++ {
					x, y := ivs[a], ivs[b]
					if x.a < y.b && y.a < x.b && x.b > x.a && y.b > y.a {
						t.Fatalf("repository %d serves two transfers at once: %v and %v", r, x, y)
					}
				}
			}
		}
	})
}

func possible(p *Problem, i int) bool {
	t := &p.Tasks[i]
	for m := range p.Machines {
		if t.ETC[m] >= 0 && t.Width <= len(p.Machines[m].Nodes) {
			return true
		}
	}
	return false
}

// minCompletion recomputes task i's minimum completion on the state left by
// the mappings of rounds before round (what the heuristic saw when it
// dropped the task), as the heuristic measures it (blind: no transfer).
func minCompletion(p *Problem, ms []Mapping, i, round int, blind bool) time.Duration {
	nodes := make([][]time.Duration, len(p.Machines))
	for m := range nodes {
		nodes[m] = slices.Sorted(slices.Values(p.Machines[m].Nodes))
	}
	repos := slices.Clone(p.Repos)
	var done []int
	for k, m := range ms {
		if !m.Dropped && m.Machine >= 0 && m.Round < round {
			done = append(done, k)
		}
	}
	slices.SortStableFunc(done, func(a, b int) int { return ms[a].Round - ms[b].Round })
	for _, k := range done {
		m := ms[k]
		for w := 0; w < p.Tasks[k].Width; w++ {
			nodes[m.Machine][w] = m.End
		}
		slices.Sort(nodes[m.Machine])
		if m.Source >= 0 {
			if s := p.Tasks[k].Sources[m.Source]; s.Repo >= 0 && s.Tran[m.Machine] > 0 {
				repos[s.Repo] = max(repos[s.Repo], m.Start+s.Tran[m.Machine])
			}
		}
	}
	t := &p.Tasks[i]
	best := time.Duration(-1)
	for m := range nodes {
		if t.ETC[m] < 0 || t.Width > len(nodes[m]) {
			continue
		}
		st := nodes[m][t.Width-1]
		c := st + t.ETC[m]
		if len(t.Sources) > 0 && !blind {
			c = -1
			for _, s := range t.Sources {
				b := st
				if s.Repo >= 0 && s.Tran[m] > 0 {
					b = max(b, repos[s.Repo])
				}
				if x := b + s.Tran[m] + t.ETC[m]; c < 0 || x < c {
					c = x
				}
			}
		}
		if best < 0 || c < best {
			best = c
		}
	}
	return best
}

// genSnapshot draws a small live grid: 1–5 sites (some down, some with
// overdue holds), links or uplinks, and up to 20 jobs with widths (some too
// wide), origins, data, allowed and preferred sites, deadlines and worth.
func genSnapshot(t *rapid.T) *policy.Snapshot {
	n := rapid.IntRange(1, 5).Draw(t, "sites")
	s := &policy.Snapshot{Now: t0, MultiSite: 1}
	for i := 0; i < n; i++ {
		nodes := rapid.IntRange(1, 16).Draw(t, "nodes")
		free := rapid.IntRange(0, nodes).Draw(t, "free")
		site := policy.Site{Name: fmt.Sprintf("s%d", i), Nodes: nodes, Free: free, H: rapid.SampledFrom([]float64{0.5, 1, 1.5}).Draw(t, "h")}
		for left := nodes - free; left > 0; {
			k := rapid.IntRange(1, left).Draw(t, "hold")
			site.Busy = append(site.Busy, policy.Hold{Nodes: k, Until: t0.Add(time.Duration(rapid.IntRange(-60, 4*3600).Draw(t, "until")) * time.Second)})
			left -= k
		}
		site.Down = rapid.IntRange(0, 6).Draw(t, "down") == 0
		s.Sites = append(s.Sites, site)
		s.Uplinks = append(s.Uplinks, policy.Link{SecPerByte: rapid.Float64Range(0, 1e-6).Draw(t, "up")})
	}
	if rapid.Bool().Draw(t, "links") {
		s.Links = make([][]policy.Link, n)
		for i := range s.Links {
			s.Links[i] = make([]policy.Link, n)
			for k := range s.Links[i] {
				if k != i {
					s.Links[i][k] = policy.Link{SecPerByte: 1e-7}
				}
			}
		}
	}
	for i := rapid.IntRange(0, 20).Draw(t, "jobs"); i > 0; i-- {
		j := policy.Job{ID: fmt.Sprintf("j%02d", i), Width: rapid.IntRange(1, 20).Draw(t, "width"),
			Estimate: time.Duration(rapid.IntRange(60, 7200).Draw(t, "est")) * time.Second,
			Submit:   t0.Add(-time.Duration(rapid.IntRange(0, 600).Draw(t, "age")) * time.Second), Origin: rapid.IntRange(-1, n-1).Draw(t, "origin"),
			DataSize: int64(rapid.IntRange(0, 1e9).Draw(t, "data"))}
		if rapid.Bool().Draw(t, "restrict") {
			j.Allowed = []int{rapid.IntRange(0, n-1).Draw(t, "allowed")}
		}
		if rapid.Bool().Draw(t, "prefer") {
			j.Preferred = []int{rapid.IntRange(0, n-1).Draw(t, "preferred")}
		}
		if rapid.Bool().Draw(t, "deadline") {
			j.Deadline = j.Submit.Add(time.Duration(rapid.IntRange(60, 6*3600).Draw(t, "dl")) * time.Second)
			j.BestEffort = rapid.IntRange(0, 3).Draw(t, "be") == 0
			if rapid.Bool().Draw(t, "worth") {
				j.Worth = policy.Worth{Shape: policy.Linear, A: 100, B: 0.5, C: 0.1}
			}
		}
		s.Queue = append(s.Queue, j)
	}
	return s
}

// The planner keeps the Planner contract on random grids: at most one
// decision per job; Start parts never exceed a site's free nodes and use
// only up, allowed sites that can hold the job; the same snapshot gives the
// same plan; Quiet changes no Start or Reject; every rejection says why.
func TestPropertyPlannerContract(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		p, _ := ByName(rapid.SampledFrom(Names()).Draw(t, "heuristic"))
		a, err := p.Plan(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := p.Plan(context.Background(), s)
		if !reflect.DeepEqual(a, b) {
			t.Fatal("two plans of one snapshot differ")
		}
		used := make([]int, len(s.Sites))
		seen := map[string]bool{}
		jobs := map[string]policy.Job{}
		for _, j := range s.Queue {
			jobs[j.ID] = j
		}
		var acts []string
		for _, d := range a.Decisions {
			if seen[d.Job] {
				t.Fatalf("two decisions for %s", d.Job)
			}
			seen[d.Job] = true
			j := jobs[d.Job]
			switch d.Action {
			case policy.Start:
				pt := d.Chosen.Parts[0]
				st := s.Sites[pt.Site]
				if len(d.Chosen.Parts) != 1 || pt.Nodes != j.Width || st.Down || j.Allowed != nil && !slices.Contains(j.Allowed, pt.Site) {
					t.Fatalf("start %+v of %+v", d.Chosen, j)
				}
				used[pt.Site] += pt.Nodes
				acts = append(acts, d.Job+" start "+st.Name)
			case policy.Reject:
				if len(d.Status.Reasons) == 0 {
					t.Fatalf("rejection of %s without a reason", d.Job)
				}
				if j.BestEffort && strings.Contains(d.Status.String(), "deadline") {
					t.Fatalf("best-effort job %s rejected for its deadline", d.Job)
				}
				acts = append(acts, d.Job+" reject")
			}
		}
		for i, u := range used {
			if u > s.Sites[i].Free {
				t.Fatalf("site %d: starts of %d nodes, %d free", i, u, s.Sites[i].Free)
			}
		}
		q := *s
		q.Quiet = true
		qp, _ := p.Plan(context.Background(), &q)
		var qacts []string
		for _, d := range qp.Decisions {
			switch d.Action {
			case policy.Start:
				qacts = append(qacts, d.Job+" start "+s.Sites[d.Chosen.Parts[0].Site].Name)
			case policy.Reject:
				qacts = append(qacts, d.Job+" reject")
			default:
				t.Fatalf("quiet plan has a %s decision", d.Action)
			}
		}
		if !slices.Equal(acts, qacts) {
			t.Fatalf("quiet acts differently:\n%v\n%v", acts, qacts)
		}
	})
}
