package coalloc

import (
	"slices"
	"sync"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// The arrival-only fast path of Quiet passes.
//
// A trace replay plans once per event; under load most passes start nothing
// and the next event is often only an arrival. When the sites are exactly as
// the last pass saw them (same free nodes, same holds with the same ends,
// none of which has come), the queue is that pass's queue with jobs
// appended, and that pass decided nothing (no start, no rejection), then a
// full pass at the later Now would find every earlier job still unable to
// start, and would reserve the same instants for them:
//
//   - the profiles, in absolute time, are the same (no hold ended between the
//     two instants), so every earliest start found then is found again: a
//     start that was infeasible at the old Now still is, in absolute time;
//   - an earlier job could not start at the old Now: either it lacked free
//     nodes now (unchanged: nothing ends before the first hold's end), or its
//     hold would have overlapped a reservation, and a later start only
//     reaches further into it.
//
// So the pass reuses that pass's final state (profiles with the reservations
// it held) shifted to the new Now and looks ahead over the appended jobs
// only. When none of them may start, the pass is over at once. Otherwise it
// runs as a full pass does, the same code, from where the remembered pass
// stopped: under EASY and strict FCFS from the first appended job when a
// head waits (else from the first job: the head is still to be reserved),
// under Conservative from the first job it did not reserve (the jobs it
// left are reserved first, as a full pass would, then the appended ones).
// TestPropertyMemoMatchesFullPass checks chains of such passes against a
// planner that makes full passes.
type memo struct {
	mu        sync.Mutex
	st        *State    // the last pass's state at its end; nil: nothing remembered
	now       time.Time // the last pass's Now
	queued    int       // the length of its queue
	ids       []string  // its queue, by job id (not kept for a Session)
	sites     []siteKey
	busy      []policy.Hold // every site's holds, concatenated
	up        []policy.Link
	links     [][]policy.Link
	multi     float64
	firstEnd  time.Time // the earliest hold end: the fast path is valid before it
	headID    string
	headStart time.Time // the head's reserved start
	hits      int       // passes planned by the fast path (tests read it)
	// fcfsBlocked: under strict FCFS, some job of the queue can neither
	// start nor is it rejected or kept out by admission, so nothing after
	// it may start (quietScan).
	fcfsBlocked bool
	// resume (Conservative): the jobs before it are reserved in st (or
	// kept out, or unplaceable); the pass left the later ones unreserved.
	resume int
}

// siteKey is what a pass reads of a site, Busy aside.
type siteKey struct {
	nodes, free, busy int
	h, trust          float64
	down              bool
	shape             policy.NodeShape
}

func keyOf(s *policy.Site) siteKey {
	return siteKey{nodes: s.Nodes, free: s.Free, busy: len(s.Busy), h: s.H, trust: s.Trust, down: s.Down, shape: s.Shape}
}

// remember keeps st, the state a full Quiet pass ended with, for the next
// pass. It returns false when the pass is not one the fast path can follow
// (then the caller keeps st). vouched: the next pass's caller will vouch
// for it (a Session), so no copy of s is kept to check it against.
func (m *memo) remember(p *Planner, s *policy.Snapshot, st *State, acted bool, head *policy.Decision, fcfsBlocked bool, reached int, vouched bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if acted {
		m.drop(p)
		return false
	}
	if m.st != nil && m.st != st {
		p.pool.Put(m.st)
	}
	m.st, m.now = st, s.Now
	m.queued = len(s.Queue)
	if !vouched {
		m.ids = m.ids[:0]
		for i := range s.Queue {
			m.ids = append(m.ids, s.Queue[i].ID)
		}
		m.sites, m.busy = m.sites[:0], m.busy[:0]
		m.firstEnd = time.Time{}
		for i := range s.Sites {
			m.sites = append(m.sites, keyOf(&s.Sites[i]))
			for _, h := range s.Sites[i].Busy {
				m.busy = append(m.busy, h)
				if m.firstEnd.IsZero() || h.Until.Before(m.firstEnd) {
					m.firstEnd = h.Until
				}
			}
		}
		m.up = append(m.up[:0], s.Uplinks...)
		m.links, m.multi = s.Links, s.MultiSite
	}
	m.headID, m.headStart = "", time.Time{}
	if head != nil {
		m.headID, m.headStart = head.Job, head.Chosen.Start
	}
	m.fcfsBlocked = fcfsBlocked
	m.resume = 0
	if p.bf == Conservative {
		m.resume = reached
	}
	return true
}

// drop forgets the memo. m.mu held.
func (m *memo) drop(p *Planner) {
	if m.st != nil {
		p.pool.Put(m.st)
	}
	m.st = nil
}

// matches reports whether s follows the remembered pass as the fast path
// requires, beyond what take checks for every caller (a remembered state,
// a Now no earlier, a queue no shorter). m.mu held.
func (m *memo) matches(s *policy.Snapshot) bool {
	if len(s.Sites) != len(m.sites) || s.MultiSite != m.multi || !slices.Equal(s.Uplinks, m.up) || !sameLinks(s.Links, m.links) {
		return false
	}
	// Every hold must still be running at the new Now (a hold past its end
	// is counted as ending "soon", relative to Now).
	if !m.firstEnd.IsZero() && !s.Now.Before(m.firstEnd) {
		return false
	}
	k := 0
	for i := range s.Sites {
		site := &s.Sites[i]
		if keyOf(site) != m.sites[i] {
			return false
		}
		for _, h := range site.Busy {
			if h.Nodes != m.busy[k].Nodes || !h.Until.Equal(m.busy[k].Until) {
				return false
			}
			k++
		}
	}
	for i, id := range m.ids {
		if s.Queue[i].ID != id {
			return false
		}
	}
	return true
}

func sameLinks(a, b [][]policy.Link) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// take hands the remembered pass's final state to the pass planning s, when
// s follows that pass as the fast path requires: the state shifted to s.Now,
// the head it left waiting (nil when that pass stopped before reserving
// one: nothing could start), the index of the first job it did not plan,
// and whether strict FCFS was blocked before it. st is nil otherwise. The
// memo is empty afterwards: the pass remembers its own end. vouched: the
// caller has checked that s follows the remembered pass (a Session).
func (m *memo) take(p *Planner, s *policy.Snapshot, vouched bool) (st *State, head *policy.Decision, first, resume int, fcfsBlocked bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil || s.Now.Before(m.now) || len(s.Queue) < m.queued || (!vouched && !m.matches(s)) {
		m.drop(p)
		return nil, nil, 0, 0, false
	}
	st = m.st
	st.Snap = s
	if d := s.Now.Sub(m.now); d > 0 {
		for i := range st.prof {
			st.prof[i].shift(d)
		}
	}
	if m.headID != "" {
		st.head = policy.Decision{Job: m.headID, Chosen: policy.Option{Start: m.headStart}}
		head = &st.head
	}
	m.hits++
	m.st = nil
	return st, head, m.queued, m.resume, m.fcfsBlocked
}

// fromText names the head for reasons: "g42 (reserved from 10:04:05)".
func fromText(s *policy.Snapshot, head *policy.Decision) string {
	return head.Job + " (reserved from " + clock(s, head.Chosen.Start) + ")"
}

// shift moves the profile's origin d later (every step start d earlier; the
// first step starts at 0 still). No step other than the first may start
// before d.
func (p *profile) shift(d time.Duration) {
	for k := range p.b {
		at := p.b[k].at
		for i := range at {
			at[i] -= d
		}
	}
	if len(p.b) > 0 {
		p.b[0].at[0] = 0
	}
	p.pmOK = false
}
