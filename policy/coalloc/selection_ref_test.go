package coalloc

import (
	"slices"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"pgregory.net/rapid"
)

// Reference implementations, written the slow and obvious way, that the
// real selectors are checked against.

// refEarliest is the first t in {0} ∪ step starts at which the sites
// together keep w nodes free for d, scanning every candidate.
func refEarliest(st *State, sites []int, w int, d time.Duration) (time.Duration, bool) {
	cands := []time.Duration{0}
	for _, s := range sites {
		st.prof[s].steps(func(at time.Duration, _ int) { cands = append(cands, at) })
	}
	slices.Sort(cands)
	for _, t := range cands {
		sum := 0
		for _, s := range sites {
			sum += max(0, st.prof[s].minFree(t, d))
		}
		if sum >= w {
			return t, true
		}
	}
	return never, false
}

// refEval offers the immediate and the earliest reserved placement of j on
// sites to k, without any pruning.
func refEval(st *State, j *policy.Job, sites []int, k *Collector) {
	st.place(j, sites, 0, k)
	run, xfer := st.model(j, sites)
	if t, ok := refEarliest(st, sites, j.Width, hold(run, xfer)); ok {
		st.place(j, sites, t, k)
	}
}

// refOptimal: every subset, no pruning.
func refOptimal(st *State, j *policy.Job, sites []int) *Candidate {
	k := newCollector(0)
	for mask := 1; mask < 1<<len(sites); mask++ {
		var set []int
		for b := range sites {
			if mask&(1<<b) != 0 {
				set = append(set, sites[b])
			}
		}
		if len(set) > j.Width || (j.NoSplit && len(set) > 1) {
			continue
		}
		refEval(st, j, set, k)
	}
	return k.Best()
}

// refWindows is Algorithm 3's window rule done literally on a list: for
// each l, the first l sites; while short, drop the one with the fewest
// (the later one on ties) and append the next.
func refWindows(vals []int, w, lmax int) [][]int {
	var out [][]int
	for l := 1; l <= lmax && l <= len(vals); l++ {
		win := make([]int, l)
		for i := range win {
			win[i] = i
		}
		next := l
		for {
			sum := 0
			for _, p := range win {
				sum += vals[p]
			}
			if sum >= w {
				out = append(out, slices.Sorted(slices.Values(win)))
				break
			}
			if next == len(vals) {
				break
			}
			m := 0
			for i, p := range win {
				if vals[p] < vals[win[m]] || (vals[p] == vals[win[m]] && p > win[m]) {
					m = i
				}
			}
			win = append(slices.Delete(win, m, m+1), next)
			next++
		}
	}
	return out
}

// refGreedy: the literal windows, each evaluated without pruning.
func refGreedy(st *State, j *policy.Job, sites []int) *Candidate {
	return refGreedyLocal(st, j, sites, false)
}

// refGreedyLocal is refGreedy plus each eligible site the job names alone
// (its preferred sites; with local, its origin when data moves), immediate
// and at the earliest start.
func refGreedyLocal(st *State, j *policy.Job, sites []int, local bool) *Candidate {
	lmax := min(len(sites), j.Width)
	if j.NoSplit {
		lmax = 1
	}
	k := newCollector(0)
	var free, total []int
	for _, s := range sites {
		free = append(free, max(st.FreeNow(s), 0))
		total = append(total, max(st.Eventual(s), 0))
	}
	for _, win := range refWindows(free, j.Width, lmax) {
		st.place(j, positions(nil, sites, win), 0, k)
	}
	for _, win := range refWindows(total, j.Width, lmax) {
		set := positions(nil, sites, win)
		run, xfer := st.model(j, set)
		if t, ok := refEarliest(st, set, j.Width, hold(run, xfer)); ok {
			st.place(j, set, t, k)
		}
	}
	for _, s := range sites {
		if slices.Contains(j.Preferred, s) || local && j.DataSize > 0 && s == j.Origin {
			refEval(st, j, []int{s}, k)
		}
	}
	return k.Best()
}

func TestPropertyWindowsMatchLiteralRule(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		vals := rapid.SliceOfN(rapid.IntRange(0, 40), 1, 12).Draw(t, "vals")
		w := rapid.IntRange(1, 120).Draw(t, "w")
		lmax := rapid.IntRange(1, len(vals)).Draw(t, "lmax")
		var ws windowScratch
		got := ws.run(vals, w, lmax)
		want := refWindows(vals, w, lmax)
		if len(got) != len(want) {
			t.Fatalf("windows %v, literal %v", got, want)
		}
		for i := range got {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("windows %v, literal %v", got, want)
			}
		}
	})
}

// TestPropertySelectorsMatchReference: on random grids with random
// reservations already taken, Optimal finds the best placement over all
// subsets and Greedy the best over its windows, exactly as the unpruned
// reference implementations do.
func TestPropertySelectorsMatchReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		st := NewState(s)
		// Some reservations of an earlier part of the pass.
		for r := rapid.IntRange(0, 6).Draw(t, "resv"); r > 0; r-- {
			i := rapid.IntRange(0, len(s.Sites)-1).Draw(t, "rsite")
			n := rapid.IntRange(1, max(1, s.Sites[i].Nodes/2)).Draw(t, "rn")
			at := time.Duration(rapid.IntRange(0, 6*3600).Draw(t, "rat")) * time.Second
			d := time.Duration(rapid.IntRange(60, 4*3600).Draw(t, "rd")) * time.Second
			if st.prof[i].minFree(at, d) >= n {
				st.prof[i].take(at, d, n)
			}
		}
		g := newGridInfo(s)
		for qi := range s.Queue {
			j := &s.Queue[qi]
			sites, d, pn := admit(s, j, false, "test", g)
			if d != nil || pn != nil {
				continue
			}
			for _, c := range []struct {
				sel Selector
				ref func(*State, *policy.Job, []int) *Candidate
			}{{&Optimal{MaxSites: 16}, refOptimal}, {Greedy{}, refGreedy},
				{Greedy{Local: true}, func(st *State, j *policy.Job, sites []int) *Candidate { return refGreedyLocal(st, j, sites, true) }}} {
				k := newCollector(3)
				if err := c.sel.Select(st, j, sites, k); err != nil {
					t.Fatal(err)
				}
				got, want := k.Best(), c.ref(st, j, sites)
				if (got == nil) != (want == nil) || (got != nil && (got.End() != want.End() || got.Immediate != want.Immediate || !slices.Equal(got.Parts, want.Parts))) {
					t.Fatalf("%s on %s: got %+v, reference %+v", c.sel.Name(), j.ID, got, want)
				}
				// As an EASY backfill candidate (only an immediate best is
				// acted on) the answer must be the same: start now exactly
				// when the unpruned best starts now, on the same placement.
				ki := newCollector(3)
				ki.immediateOnly = true
				if err := c.sel.Select(st, j, sites, ki); err != nil {
					t.Fatal(err)
				}
				gi := ki.Best()
				gotNow, wantNow := gi != nil && gi.Immediate, want != nil && want.Immediate
				if gotNow != wantNow || (gotNow && (gi.End() != want.End() || !slices.Equal(gi.Parts, want.Parts))) {
					t.Fatalf("%s on %s as a backfill candidate: got %+v, reference %+v", c.sel.Name(), j.ID, gi, want)
				}
			}
		}
	})
}
