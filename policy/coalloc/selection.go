package coalloc

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Selector is a resource-selection strategy (paper 000 §4.2): it evaluates
// placements of one job on the current State and offers each to the
// Collector, which keeps the best and a few runners-up.
//
// Contract: Select reads st and never changes its profiles; it is
// deterministic (ties are settled by the Collector's total order, so the
// best does not depend on the order of evaluation; the runner-ups may);
// sites are the job's eligible sites (allowed, not down) in ascending
// order of slowness (h, divided by trust when a site has one below 1), at
// least one, and must not be modified (they are shared between
// jobs); it offers only placements that fit the profiles (immediate ones on
// nodes free over their whole hold, reserved ones at their earliest common
// start). It returns an error only when it cannot work at all (Optimal over
// too many sites).
type Selector interface {
	Name() string
	Select(st *State, j *policy.Job, sites []int, k *Collector) error
}

var (
	_ Selector = Greedy{}
	_ Selector = (*Optimal)(nil)
	_ Selector = SingleSite{}
	_ Selector = NonAdaptive{}
)

// Greedy is Algorithm 3: sites sorted by h (by h/trust when the sites have
// trust scores below 1, SPEC §3); for every window size l, the
// first l sites, sliding (drop the window's site with the fewest free, resp.
// total, nodes; add the next site) until they hold the width; evaluate;
// keep the best. A window never has more sites than the job has nodes.
//
// Cost per job: O(N·L·log L) for N sites and L = min(N, width) in the worst
// case (scarce nodes), O(L²) when the first sites suffice.
//
// A job that names sites (prefer; with Local, its origin when its data must
// move) also has each of those sites evaluated alone (extras), immediate and
// reserved, beside the windows.
type Greedy struct {
	// Local: the job's origin site, where its input is, is evaluated alone
	// too when the job moves data (DataSize > 0).
	Local bool
}

// Name implements Selector.
func (Greedy) Name() string { return "greedy" }

// Select implements Selector.
func (g Greedy) Select(st *State, j *policy.Job, sites []int, k *Collector) error {
	lmax := min(len(sites), j.Width)
	if j.NoSplit {
		lmax = 1
	}
	// Immediate: windows by free nodes now.
	vals := st.vals[:0]
	sum := 0
	for _, s := range sites {
		f := max(st.FreeNow(s), 0)
		vals = append(vals, f)
		sum += f
	}
	st.vals = vals
	if sum >= j.Width {
		for _, win := range st.win.run(vals, j.Width, lmax) {
			st.set = positions(st.set[:0], sites, win)
			st.place(j, st.set, 0, k)
		}
	}
	var exbuf [4]int
	ex := g.extras(j, sites, exbuf[:0])
	for i := range ex {
		if st.FreeNow(ex[i]) >= j.Width {
			st.place(j, ex[i:i+1], 0, k)
		}
	}
	if k.nothingNow() {
		return nil // an EASY candidate that cannot start now wants nothing else
	}
	// Reserved: windows by total nodes (what the site will have once free).
	st.sitesOf = sites
	vals = st.vals[:0]
	for _, s := range sites {
		vals = append(vals, max(st.Eventual(s), 0))
	}
	st.vals = vals
	wins := st.win.run(vals, j.Width, lmax)
	st.win1, st.hold1 = st.win1[:0], st.hold1[:0]
	for range sites {
		st.win1, st.hold1 = append(st.win1, false), append(st.hold1, 0)
	}
	for _, win := range wins {
		if len(win) == 1 {
			st.win1[win[0]] = true
		}
	}
	for _, win := range wins {
		st.set = positions(st.set[:0], sites, win)
		st.reserveAt(j, st.set, k, st.windowBound(j, vals, win))
	}
	for i := range ex {
		if st.Eventual(ex[i]) >= j.Width {
			st.reserveAt(j, ex[i:i+1], k, 0)
		}
	}
	return nil
}

// windowBound is the lower bound reserveAt needs for a greedy window: a
// placement on win may keep any of its sites, so its hold is at least the
// shortest single-site hold of a site that could hold the job alone (unless
// that site is a window itself, whose own evaluation then finds an earlier
// start), or for several sites short of the whole window p·T·(second lowest
// h); 0 (the window's own hold) when nothing shorter is possible.
func (st *State) windowBound(j *policy.Job, vals []int, win []int) time.Duration {
	if len(win) == 1 {
		return 0
	}
	lb := never
	for _, x := range win {
		if vals[x] < j.Width || st.win1[x] {
			continue
		}
		if st.hold1[x] == 0 {
			one := [1]int{st.sitesOf[x]}
			run, xfer := st.model(j, one[:])
			st.hold1[x] = hold(run, xfer)
		}
		lb = min(lb, st.hold1[x])
	}
	if len(win) >= 3 {
		// Two sites or more of the window run at least as long as its two
		// of lowest h (the order is by h/trust, so find them).
		a, b := -1, -1
		for _, x := range win {
			s := st.sitesOf[x]
			switch h := st.Snap.Sites[s].H; {
			case a < 0 || h < st.Snap.Sites[a].H:
				a, b = s, a
			case b < 0 || h < st.Snap.Sites[b].H:
				b = s
			}
		}
		two := [2]int{a, b}
		run, _ := st.model(j, two[:])
		lb = min(lb, hold(run, 0))
	}
	if lb == never {
		return 0
	}
	return lb
}

// positions appends to out the site indices of window positions.
func positions(out, sites, win []int) []int {
	for _, w := range win {
		out = append(out, sites[w])
	}
	return out
}

// windowScratch is the reusable memory of windows.
type windowScratch struct {
	vals, sorted, top, h, flat []int
	spans                      []struct{ from, to int }
	out                        [][]int
}

// run computes Algorithm 3's window for every l in 1..lmax over vals (the
// free or total nodes of the sites in h order) and returns the windows that
// reach w, each as sorted positions (valid until the next run). For a fixed
// l, after dropping the minimum and adding the next site s times the window
// is exactly the l-1 largest values of the first l+s-1 sites plus site
// l+s-1, so one min-heap of size l-1 walks it in O(N log l). Values equal:
// the later (slower) site is dropped first.
func (ws *windowScratch) run(vals []int, w, lmax int) [][]int {
	n := len(vals)
	ws.out = ws.out[:0]
	ws.flat = ws.flat[:0]
	if n == 0 {
		return nil
	}
	ws.vals = vals
	// top[l] = sum of the l largest values: no window of l sites can exceed it.
	sorted := append(ws.sorted[:0], vals...)
	slices.Sort(sorted)
	top := append(ws.top[:0], 0)
	for i := range sorted {
		top = append(top, top[i]+sorted[n-1-i])
	}
	ws.sorted, ws.top = sorted, top
	type span struct{ from, to int }
	spans := ws.spans[:0]
	for l := 1; l <= lmax; l++ {
		if top[l] < w {
			continue
		}
		ws.h = ws.h[:0]
		s := 0
		for i := 0; i < l-1; i++ {
			ws.push(i)
			s += vals[i]
		}
		for k := l - 1; k < n; k++ {
			if s+vals[k] >= w {
				from := len(ws.flat)
				ws.flat = append(append(ws.flat, ws.h...), k)
				slices.Sort(ws.flat[from:])
				spans = append(spans, span{from, len(ws.flat)})
				break
			}
			if l == 1 {
				continue
			}
			ws.push(k)
			s += vals[k]
			s -= vals[ws.pop()]
		}
	}
	ws.spans = spans
	for _, sp := range spans {
		ws.out = append(ws.out, ws.flat[sp.from:sp.to])
	}
	return ws.out
}

// less: site position a leaves the window before b.
func (ws *windowScratch) less(a, b int) bool {
	if ws.vals[a] != ws.vals[b] {
		return ws.vals[a] < ws.vals[b]
	}
	return a > b
}

func (ws *windowScratch) push(x int) {
	h := append(ws.h, x)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !ws.less(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	ws.h = h
}

func (ws *windowScratch) pop() int {
	h := ws.h
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && ws.less(h[l], h[m]) {
			m = l
		}
		if r < len(h) && ws.less(h[r], h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	ws.h = h
	return top
}

// DefaultMaxOptimalSites is the most sites Optimal enumerates by default
// (2^16 subsets, tens of milliseconds per job); HardMaxOptimalSites is the
// most it can be configured to.
const (
	DefaultMaxOptimalSites = 16
	HardMaxOptimalSites    = 24
)

// Optimal is Algorithm 2: every single site and every subset, immediate on
// free nodes, reserved at the subset's earliest common start; min completion
// wins. O(2^N) in the eligible sites, so it refuses more than MaxSites.
type Optimal struct {
	MaxSites int
}

// Name implements Selector.
func (*Optimal) Name() string { return "optimal" }

// Select implements Selector.
func (o *Optimal) Select(st *State, j *policy.Job, sites []int, k *Collector) error {
	n := len(sites)
	if n > o.MaxSites {
		return fmt.Errorf("%w: job %s may use %d sites, optimal selection enumerates at most %d (use greedy, or restrict Allowed)",
			ErrTooManySites, j.ID, n, o.MaxSites)
	}
	// Two passes over the subsets: immediate placements first, so the
	// reserved pass can prune against the best of them.
	set := make([]int, 0, n)
	for pass := 0; pass < 2; pass++ {
		if pass == 1 && k.nothingNow() {
			break // an EASY candidate that cannot start now wants nothing else
		}
		for mask := uint32(1); mask < 1<<n; mask++ {
			m := bits.OnesCount32(mask)
			if m > j.Width || (j.NoSplit && m > 1) {
				continue
			}
			set = set[:0]
			free, total, lastFree := 0, 0, 0
			for b := 0; b < n; b++ {
				if mask&(1<<b) != 0 {
					s := sites[b]
					set = append(set, s)
					lastFree = max(st.FreeNow(s), 0)
					free += lastFree
					total += max(st.Eventual(s), 0)
				}
			}
			if total < j.Width {
				continue
			}
			// Now, a set whose slowest site is not needed is a smaller
			// set's placement (the split leaves that site out). Free now
			// is not free for the whole hold, though: when the smaller set
			// cannot hold the job, the reserved pass finds this set's
			// placement at offset 0, except for an EASY candidate, which
			// searches no reservation; it must try the set now.
			if pass == 0 && m > 1 && free-lastFree >= j.Width && !k.immediateOnly {
				continue
			}
			// Cannot beat the best even starting now (see reserveAt). The
			// immediate pass compares with the best so far only: Limit is 0
			// for an EASY candidate with none yet, which means "search no
			// reservation", not "start nothing".
			limit := k.bestEnd()
			if pass == 1 {
				limit = k.Limit()
			}
			if hold(st.model(j, set)) > limit {
				continue
			}
			if pass == 0 {
				if free >= j.Width {
					st.place(j, set, 0, k)
				}
				continue
			}
			st.reserveAt(j, set, k, 0)
		}
	}
	return nil
}

// SingleSite is the Yahyapour single-site strategy: each eligible site alone,
// local or remote, immediate if it can, else at its earliest start; earliest
// completion wins. O(N) per job.
type SingleSite struct{}

// Name implements Selector.
func (SingleSite) Name() string { return "single-site" }

// Select implements Selector.
func (SingleSite) Select(st *State, j *policy.Job, sites []int, k *Collector) error {
	one := make([]int, 1)
	for _, s := range sites {
		if one[0] = s; st.FreeNow(s) >= j.Width {
			st.place(j, one, 0, k)
		}
	}
	if k.nothingNow() {
		return nil // an EASY candidate that cannot start now wants nothing else
	}
	for _, s := range sites {
		if one[0] = s; st.Eventual(s) >= j.Width {
			st.reserveAt(j, one, k, 0)
		}
	}
	return nil
}

// NonAdaptive is Yahyapour's multi-site strategy under a homogeneity
// assumption: it ignores h and p and prefers, in order, the local site, a
// remote single site (least transfer), then several sites (most free nodes
// first, the local one first), starting now if any of those can; otherwise
// the earliest start, ties again local > remote > multi-site. The predicted
// times it reports are still the real model's (equations 1–3), because that
// is what will happen.
//
// With Single set it is the local-first single-site baseline: the same
// order without the multi-site class (local now > a remote site now > the
// earliest start, ties local first), blind to h like the multi-site one.
type NonAdaptive struct {
	Single bool
}

// Name implements Selector.
func (n NonAdaptive) Name() string {
	if n.Single {
		return "local-first"
	}
	return "non-adaptive"
}

// Select implements Selector.
func (n NonAdaptive) Select(st *State, j *policy.Job, sites []int, k *Collector) error {
	// Order: local, then remote by transfer time, then index.
	order := slices.Clone(sites)
	slices.SortStableFunc(order, func(a, b int) int {
		if (a == j.Origin) != (b == j.Origin) {
			if a == j.Origin {
				return -1
			}
			return 1
		}
		ta := st.Snap.TransferTime(j.Origin, a, j.DataSize)
		tb := st.Snap.TransferTime(j.Origin, b, j.DataSize)
		if ta != tb {
			return cmp.Compare(ta, tb)
		}
		return a - b
	})
	// Each class is tried in turn; the first class with an immediate
	// placement wins, judged by preference, not by predicted end.
	one := make([]int, 1)
	for _, s := range order {
		one[0] = s
		tmp := newCollector(0)
		if st.FreeNow(s) >= j.Width && st.place(j, one, 0, tmp) {
			k.Add(*tmp.Best())
			return nil
		}
	}
	multi := func(vals func(int) int) []int {
		if j.NoSplit || n.Single {
			return nil
		}
		ms := slices.Clone(order)
		slices.SortStableFunc(ms, func(a, b int) int {
			if (a == j.Origin) != (b == j.Origin) {
				if a == j.Origin {
					return -1
				}
				return 1
			}
			return vals(b) - vals(a)
		})
		sum := 0
		for i, s := range ms {
			sum += max(vals(s), 0)
			if sum >= j.Width {
				return ms[:i+1]
			}
		}
		return nil
	}
	if set := multi(st.FreeNow); len(set) > 1 {
		tmp := newCollector(0)
		if st.place(j, set, 0, tmp) {
			k.Add(*tmp.Best())
			return nil
		}
	}
	if k.immediateOnly {
		return nil // nothing can start now, and nothing else is wanted
	}
	// Nothing now: earliest start, ties by preference class.
	var best *Candidate
	var bestRank int
	consider := func(c *Candidate, rank int) {
		if c == nil {
			return
		}
		if best == nil || c.Start < best.Start || (c.Start == best.Start && rank < bestRank) {
			cc := *c
			best, bestRank = &cc, rank
		}
	}
	for i, s := range order {
		if st.Eventual(s) < j.Width {
			continue
		}
		one[0] = s
		tmp := newCollector(0)
		st.reserveAt(j, one, tmp, 0)
		consider(tmp.Best(), i)
	}
	if set := multi(st.Eventual); len(set) > 1 {
		tmp := newCollector(0)
		st.reserveAt(j, set, tmp, 0)
		consider(tmp.Best(), len(order))
	}
	if best != nil {
		k.Add(*best)
	}
	return nil
}
