package benefit

import (
	"math"
	"slices"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Heuristic names, as Options.Heuristic and the planners' names take them.
const (
	Benefit   = "benefit"   // paper 003's benefit-sufferage heuristic
	MinMin    = "min-min"   // Min-min: the task with the least minimum completion first
	Sufferage = "sufferage" // Sufferage (Maheswaran et al.): the task that would lose most by not getting its best machine
)

// Machine is one resource of a mapping problem: a site (live) or a host
// (paper 003's simulation). It takes at most one task per round.
type Machine struct {
	// Nodes holds, for each node, the offset from the problem's origin at
	// which it becomes free for good (0 = free now). A task of width w
	// starts when its w earliest nodes are free.
	Nodes []time.Duration
}

// Source is one place a task's input can be read from.
type Source struct {
	// Repo is the data repository (index into Problem.Repos) that serves
	// the transfer, one transfer at a time in the order they are mapped
	// (paper 003's Data-START: a transfer begins once the repository's
	// last mapped transfer is done); -1 when the source is not contended
	// (a site's own disk, the user's machine). A zero transfer does not
	// use the repository.
	Repo int
	// Tran is TRAN(t, c_j, s_l) to each machine.
	Tran []time.Duration
}

// Task is one job of a mapping problem. Every time is an offset from the
// problem's origin (the mapping event).
type Task struct {
	Width int
	// ETC is the run time on each machine; negative: it cannot run there.
	ETC []time.Duration
	// Sources lists where the input is; none means no input to move. The
	// first is the primary copy: the only one a data-blind heuristic knows.
	Sources []Source
	// Submit and Deadline give the benefit function its clock: t and D of
	// β are measured from Submit. HasDeadline false: no deadline.
	Submit, Deadline time.Duration
	HasDeadline      bool
	// Keep: never drop the task for missing its deadline (best-effort).
	Keep  bool
	Worth policy.Worth
	// Prefer marks machines that win ties (nil: none).
	Prefer []bool
}

// Problem is one mapping event: machines with their availability, the
// repositories' Data-START, and the tasks to map (new, and mapped but not
// started).
type Problem struct {
	Machines []Machine
	Repos    []time.Duration // Data-START of each repository
	Tasks    []Task
}

// Mapping is the answer for one task.
type Mapping struct {
	// Dropped: the task's minimum completion is after its deadline (best
	// holds that minimum); the task is not mapped in this event.
	Dropped bool
	Machine int // -1 when dropped or when no machine can ever take it
	Source  int // index into Task.Sources; -1 without sources
	// Start is when the machine is taken (the transfer begins:
	// max(START, Data-START)); End = Start + TRAN + ETC, on the real
	// (data-aware) model, whatever the heuristic saw.
	Start, End time.Duration
	// Best is the minimum completion the heuristic saw (for a dropped task:
	// the one that missed the deadline), on machine BestAt.
	Best   time.Duration
	BestAt int
	// Round is the round in which the task was mapped (0-based).
	Round int
}

// Config chooses the heuristic.
type Config struct {
	Heuristic string // Benefit, MinMin or Sufferage
	// Blind: the heuristic ignores where the data is (no TRAN, no
	// Data-START, the primary copy only) when it chooses; the mapping's
	// times are still the real ones. Paper 003's data-blind Min-min.
	Blind bool
	// ContestMachines (Benefit only): a task whose best machine another
	// claim of the round holds may displace that holder when its benefit
	// sufferage is higher, as it may a repository's. Off, only the data
	// repository is contested, as paper 003's Algorithm 2 writes it ("mark
	// all data repositories as available"); a task whose machine is taken
	// waits for the next round.
	ContestMachines bool
}

const never = time.Duration(math.MaxInt64)

// cand is a task's best or second-best machine as the heuristic sees it.
type cand struct {
	m, src int
	comp   time.Duration
}

// topK is how many of a task's best machines are kept between scans.
const topK = 8

type tstate struct {
	best, second cand
	suff         float64
	pos          int    // index in the heap; -1 when out of it
	bv, sv       uint32 // versions of the best and second machines when they were last evaluated
	done         bool
	// The topK best machines at the last scan with their versions, and
	// thr: the least completion of every other machine then. A machine
	// of the list re-evaluated below thr is still ahead of all others
	// (theirs only grew), so refresh needs no scan while the best two
	// stay below it.
	top  [topK]cand
	tv   [topK]uint32
	ntop int
	thr  time.Duration
}

type mapper struct {
	p     *Problem
	cfg   Config
	nodes [][]time.Duration
	repos []time.Duration
	ts    []tstate
	out   []Mapping

	// A cache of eval per task and machine, row-major: an entry is valid
	// while its machine's version (mver) and the versions of the task's
	// repositories (rver, summed into tver) are those it was computed at.
	// Completions only grow, and a commit changes one machine (and
	// repository), so most of a rescan is read from here.
	comp []time.Duration
	csrc []int32
	cver []uint32
	mver []uint32
	rver []uint32
	tver []uint32
	// hasRepo: the task reads from a contended repository.
	hasRepo []bool
	// fix holds, for a task without one (or data-blind), the part of its
	// completion on each machine that does not depend on the mapping so
	// far (the run time plus the least transfer; never: it cannot run
	// there), and fsrc the source it reads; row-major like comp.
	fix  []time.Duration
	fsrc []int32
	// seen marks the machines a scan has visited (== stamp).
	seen  []uint32
	stamp uint32
}

// Map runs one mapping event and returns a Mapping per task, in task order.
// It is pure and deterministic. The problem is not modified.
func Map(p *Problem, cfg Config) []Mapping {
	mp := &mapper{p: p, cfg: cfg, repos: slices.Clone(p.Repos), ts: make([]tstate, len(p.Tasks)), out: make([]Mapping, len(p.Tasks))}
	mp.nodes = make([][]time.Duration, len(p.Machines))
	for i, m := range p.Machines {
		mp.nodes[i] = slices.Clone(m.Nodes)
		slices.Sort(mp.nodes[i])
	}
	nm := len(p.Machines)
	mp.comp = make([]time.Duration, len(p.Tasks)*nm)
	mp.csrc = make([]int32, len(p.Tasks)*nm)
	mp.cver = make([]uint32, len(p.Tasks)*nm)
	mp.mver = make([]uint32, nm)
	mp.rver = make([]uint32, len(p.Repos))
	mp.tver = make([]uint32, len(p.Tasks))
	for m := range mp.mver {
		mp.mver[m] = 1
	}
	mp.seen = make([]uint32, nm)
	mp.hasRepo = make([]bool, len(p.Tasks))
	for i, t := range p.Tasks {
		for _, s := range t.Sources {
			mp.hasRepo[i] = mp.hasRepo[i] || s.Repo >= 0
		}
	}
	mp.fixed()
	for i := range mp.out {
		mp.out[i] = Mapping{Machine: -1, Source: -1, BestAt: -1}
		mp.scan(i)
	}
	if cfg.Heuristic == Sufferage {
		mp.sufferage()
	} else {
		mp.minFirst(cfg.Heuristic == Benefit)
	}
	return mp.out
}

// start is START(c, w): when the w earliest nodes of machine m are free.
func (mp *mapper) start(m, w int) (time.Duration, bool) {
	n := mp.nodes[m]
	if w < 1 || w > len(n) {
		return 0, false
	}
	return n[w-1], true
}

// fixed fills fix and fsrc for the tasks that read from no contended
// repository (or every task, data-blind): their completion on a machine is
// START plus a constant, which eval then adds without looking at the task.
func (mp *mapper) fixed() {
	nm := len(mp.nodes)
	mp.fix = make([]time.Duration, len(mp.p.Tasks)*nm)
	mp.fsrc = make([]int32, len(mp.p.Tasks)*nm)
	for i := range mp.p.Tasks {
		if mp.hasRepo[i] && !mp.cfg.Blind {
			continue
		}
		t := &mp.p.Tasks[i]
		for m := 0; m < nm; m++ {
			e := i*nm + m
			mp.fix[e], mp.fsrc[e] = never, -1
			if t.ETC[m] < 0 || t.Width < 1 || t.Width > len(mp.nodes[m]) {
				continue
			}
			switch {
			case len(t.Sources) == 0:
				mp.fix[e] = t.ETC[m]
			case mp.cfg.Blind:
				mp.fix[e], mp.fsrc[e] = t.ETC[m], 0
			default:
				for k, s := range t.Sources {
					if c := s.Tran[m] + t.ETC[m]; c < mp.fix[e] {
						mp.fix[e], mp.fsrc[e] = c, int32(k)
					}
				}
			}
		}
	}
}

// eval is the completion of task i on machine m as the heuristic sees it,
// with the source it would read from.
func (mp *mapper) eval(i, m int) (time.Duration, int) {
	if !mp.hasRepo[i] || mp.cfg.Blind {
		e := i*len(mp.nodes) + m
		f := mp.fix[e]
		if f == never {
			return never, -1
		}
		return mp.nodes[m][mp.p.Tasks[i].Width-1] + f, int(mp.fsrc[e])
	}
	t := &mp.p.Tasks[i]
	etc := t.ETC[m]
	if etc < 0 {
		return never, -1
	}
	st, ok := mp.start(m, t.Width)
	if !ok {
		return never, -1
	}
	best, src := never, -1
	for k, s := range t.Sources {
		b := st
		if s.Repo >= 0 && s.Tran[m] > 0 && mp.repos[s.Repo] > b {
			b = mp.repos[s.Repo]
		}
		if c := b + s.Tran[m] + etc; c < best {
			best, src = c, k
		}
	}
	return best, src
}

// better orders candidates: earlier completion, then a preferred machine,
// then the lower index.
func better(t *Task, a, b cand) bool {
	if a.comp != b.comp {
		return a.comp < b.comp
	}
	pa, pb := t.Prefer != nil && t.Prefer[a.m], t.Prefer != nil && t.Prefer[b.m]
	if pa != pb {
		return pa
	}
	return a.m < b.m
}

// missed reports whether task i cannot meet its deadline anywhere.
func (mp *mapper) missed(i int) bool {
	t := &mp.p.Tasks[i]
	return t.HasDeadline && !t.Keep && mp.ts[i].best.m >= 0 && mp.ts[i].best.comp > t.Deadline
}

// commit maps task i to its best machine at the real times. It returns the
// machine and the repository it used (-1: none).
func (mp *mapper) commit(i, round int) (int, int) {
	t := &mp.p.Tasks[i]
	c := mp.ts[i].best
	st, _ := mp.start(c.m, t.Width)
	begin, tran, repo := st, time.Duration(0), -1
	if c.src >= 0 {
		s := t.Sources[c.src]
		if s.Repo >= 0 && s.Tran[c.m] > 0 { // nothing to move: the repository is not used
			repo = s.Repo
			if mp.repos[repo] > begin {
				begin = mp.repos[repo]
			}
		}
		tran = s.Tran[c.m]
	}
	end := max(begin+tran+t.ETC[c.m], begin+1) // a task holds its nodes for a while, however short
	if repo >= 0 {
		mp.repos[repo] = begin + tran
		mp.rver[repo]++
	}
	mp.mver[c.m]++
	// The task takes the machine's Width earliest nodes until end: the
	// nodes after them (sorted) that are free before end move forward,
	// then the taken ones; what was sorted stays sorted, in O(nodes).
	n := mp.nodes[c.m]
	rest := n[t.Width:]
	p, _ := slices.BinarySearch(rest, end)
	copy(n, rest[:p])
	for k := p; k < p+t.Width; k++ {
		n[k] = end
	}
	mp.out[i] = Mapping{Machine: c.m, Source: c.src, Start: begin, End: end, Best: c.comp, BestAt: c.m, Round: round}
	mp.ts[i].done = true
	return c.m, repo
}

func (mp *mapper) drop(i, round int) {
	mp.out[i] = Mapping{Dropped: true, Machine: -1, Source: -1, Best: mp.ts[i].best.comp, BestAt: mp.ts[i].best.m, Round: round}
	mp.ts[i].done = true
}

// repoOf is the repository candidate c of task i reads from (-1: none, or
// data-blind).
func (mp *mapper) repoOf(i int, c cand) int {
	if c.m < 0 || c.src < 0 || mp.cfg.Blind {
		return -1
	}
	return mp.p.Tasks[i].Sources[c.src].Repo
}

// taskHeap orders pending tasks by minimum completion, then index.
type taskHeap struct {
	ids []int
	mp  *mapper
}

func (h *taskHeap) Len() int { return len(h.ids) }
func (h *taskHeap) Less(a, b int) bool {
	x, y := h.ids[a], h.ids[b]
	cx, cy := h.mp.ts[x].best.comp, h.mp.ts[y].best.comp
	if cx != cy {
		return cx < cy
	}
	return x < y
}
func (h *taskHeap) Swap(a, b int) {
	h.ids[a], h.ids[b] = h.ids[b], h.ids[a]
	h.mp.ts[h.ids[a]].pos = a
	h.mp.ts[h.ids[b]].pos = b
}
func (h *taskHeap) Push(x any) {
	i := x.(int)
	h.mp.ts[i].pos = len(h.ids)
	h.ids = append(h.ids, i)
}
func (h *taskHeap) Pop() any {
	i := h.ids[len(h.ids)-1]
	h.ids = h.ids[:len(h.ids)-1]
	h.mp.ts[i].pos = -1
	return i
}

// minFirst is the benefit heuristic (withSufferage) and Min-min (without).
//
// Each round takes the tasks in ascending minimum completion. A task
// claims its best machine (and, data-aware, its repository) for the round;
// if the machine or repository is claimed already, it displaces the
// holders when its benefit sufferage is higher than each of theirs (they
// wait for the next round, Sufferage-style), and otherwise it loses. After
// the first loser only tasks with a positive benefit sufferage may still
// claim: the ones the deadline presses. The round's claims are then
// committed in claim order, START and Data-START updated, and the next
// round begins. A task whose minimum completion is after its deadline is
// dropped (reported, not mapped) when its turn comes.
//
// With every benefit sufferage zero (no deadline pressure) a round stops at
// its first loser, and every claim before it is exactly Min-min's next pick:
// its machine and repository were untouched by the claims before it, so its
// minimum completion is unchanged and still the least (completions only
// grow). Hence the equality with Min-min, which the property test checks.
func (mp *mapper) minFirst(withSufferage bool) {
	h := newQueue(mp)
	machineHolder := make([]int, len(mp.nodes))
	repoHolder := make([]int, len(mp.repos))
	for k := range machineHolder {
		machineHolder[k] = -1
	}
	for k := range repoHolder {
		repoHolder[k] = -1
	}
	nclaim := make([]int, len(mp.nodes)) // claims on each machine this round
	wclaim := make([]int, len(mp.nodes)) // and their nodes
	claimed := make([]bool, len(mp.p.Tasks))
	var claims, deferred, pressed []int
	var watch *pressWatch
	if withSufferage {
		watch = newPressWatch(mp, h)
	}
	for round := 0; h.Len() > 0; round++ {
		claims, deferred = claims[:0], deferred[:0]
		lost := false
		// unclaim takes back task o's claim (it waits for the next round).
		unclaim := func(o int) {
			if !claimed[o] {
				return
			}
			claimed[o] = false
			c := mp.ts[o].best
			nclaim[c.m]--
			wclaim[c.m] -= mp.p.Tasks[o].Width
			claims = slices.DeleteFunc(claims, func(x int) bool { return x == o })
			if machineHolder[c.m] == o {
				machineHolder[c.m] = -1
				for _, x := range claims {
					if mp.ts[x].best.m == c.m {
						machineHolder[c.m] = x
					}
				}
			}
			if r := mp.repoOf(o, c); r >= 0 && repoHolder[r] == o {
				repoHolder[r] = -1
			}
			deferred = append(deferred, o)
		}
		try := func(i int) bool { // claim for task i; false: it lost
			c := mp.ts[i].best
			w := mp.p.Tasks[i].Width
			r := mp.repoOf(i, c)
			// A machine may take several claims in a round while each
			// starts when it would alone (mp.fits): nothing they change
			// matters to it, as for claims on different machines.
			hm := -1
			if nclaim[c.m] > 0 && !mp.fits(c.m, wclaim[c.m], w) {
				if nclaim[c.m] > 1 || !mp.cfg.ContestMachines {
					return false // shared by several, or machines are not contested
				}
				hm = machineHolder[c.m]
			}
			hr := -1
			if r >= 0 {
				hr = repoHolder[r]
			}
			if hm >= 0 || hr >= 0 {
				s := mp.ts[i].suff
				if !withSufferage || (hm >= 0 && mp.ts[hm].suff >= s) || (hr >= 0 && mp.ts[hr].suff >= s) {
					return false
				}
				for _, o := range []int{hm, hr} {
					if o >= 0 {
						unclaim(o)
					}
				}
				if nclaim[c.m] > 0 && !mp.fits(c.m, wclaim[c.m], w) {
					return false // the repository's holder was not the machine's
				}
			}
			claimed[i] = true
			nclaim[c.m]++
			wclaim[c.m] += w
			machineHolder[c.m] = i
			if r >= 0 {
				repoHolder[r] = i
			}
			claims = append(claims, i)
			return true
		}
		for h.Len() > 0 {
			i := h.popFresh()
			if mp.missed(i) {
				mp.drop(i, round)
				continue
			}
			if !try(i) {
				deferred = append(deferred, i)
				lost = true
				break
			}
		}
		if lost && withSufferage {
			// The tasks the deadline presses may still claim or displace.
			pressed = watch.pressed(mp, h, pressed[:0])
			slices.SortFunc(pressed, func(a, b int) int {
				if c := mp.ts[a].best.comp - mp.ts[b].best.comp; c != 0 {
					return sign(c)
				}
				return a - b
			})
			for _, i := range pressed {
				if mp.missed(i) {
					h.remove(i)
					mp.drop(i, round)
					continue
				}
				if try(i) {
					h.remove(i)
				}
			}
		}
		for _, i := range claims {
			m, r := mp.commit(i, round)
			h.committed(m)
			if watch != nil {
				watch.committed(mp, m, r)
			}
			machineHolder[m], nclaim[m], wclaim[m], claimed[i] = -1, 0, 0, false
		}
		for k := range repoHolder {
			repoHolder[k] = -1
		}
		for _, i := range deferred {
			h.push(i)
		}
	}
}

// fits reports whether a task of width w claiming machine m after claims
// of `taken` nodes in the same round starts when it would alone: the
// machine has at least taken + w nodes free by then (nodes[w-1]); the
// claims before it only ever take nodes, and make them free later.
func (mp *mapper) fits(m, taken, w int) bool {
	n := mp.nodes[m]
	return taken+w <= len(n) && n[taken+w-1] == n[w-1]
}
