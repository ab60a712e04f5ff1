package coalloc

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gridsub/gridsub/policy"
)

var (
	_ policy.Incremental = (*Planner)(nil)
	_ policy.Session     = (*Session)(nil)
)

// Session is a Planner's policy.Session: the same passes as Plan, on a
// snapshot the session keeps up to date from the changes it is told, so a
// trace replay neither rebuilds the grid for every pass nor has the planner
// check it. What Plan's memo (memo.go) must verify, by comparing the queue
// and every hold with the last pass's, the session knows: no hold was added
// or released since the last pass, and jobs were only appended. So an
// arrival-only pass starts from where the last one ended at no cost, and
// no pass copies the queue or the holds.
type Session struct {
	p     *Planner
	snap  policy.Snapshot // Quiet; every site's Busy in order of Until
	m     memo
	moved bool         // a hold was added or released since the last pass
	r     reuse        // the plan's memory, the jobs it took out, the sites' profiles
	qbuf  []policy.Job // the queue's memory: snap.Queue is a window of it
}

// NewSession implements policy.Incremental.
func (p *Planner) NewSession(s *policy.Snapshot) (policy.Session, error) {
	if err := checkSnapshot(s); err != nil {
		return nil, err
	}
	ss := &Session{p: p, moved: true, snap: policy.Snapshot{Now: s.Now, Links: s.Links, MultiSite: s.MultiSite, Quiet: true,
		Sites: slices.Clone(s.Sites), Queue: slices.Clone(s.Queue), Uplinks: slices.Clone(s.Uplinks)}}
	if s.Links != nil {
		ss.snap.Links = make([][]policy.Link, len(s.Links))
		for i := range s.Links {
			ss.snap.Links[i] = slices.Clone(s.Links[i])
		}
	}
	for i := range ss.snap.Sites {
		b := slices.Clone(ss.snap.Sites[i].Busy)
		slices.SortStableFunc(b, func(x, y policy.Hold) int { return x.Until.Compare(y.Until) })
		ss.snap.Sites[i].Busy = b
	}
	return ss, nil
}

// Submit implements policy.Session.
func (ss *Session) Submit(j policy.Job) { ss.snap.Queue = append(ss.snap.Queue, j) }

// Hold implements policy.Session.
func (ss *Session) Hold(site, nodes int, until time.Time) error {
	if site < 0 || site >= len(ss.snap.Sites) {
		return fmt.Errorf("coalloc: session: hold at site %d of %d", site, len(ss.snap.Sites))
	}
	st := &ss.snap.Sites[site]
	// After every hold ending no later: Busy stays in order of Until.
	k, _ := slices.BinarySearchFunc(st.Busy, until, func(h policy.Hold, t time.Time) int {
		if h.Until.After(t) {
			return 1
		}
		return -1
	})
	st.Busy = slices.Insert(st.Busy, k, policy.Hold{Nodes: nodes, Until: until})
	st.Free -= nodes
	ss.moved = true
	ss.r.bases.changed(site)
	return nil
}

// Release implements policy.Session.
func (ss *Session) Release(site, nodes int, until time.Time) error {
	if site < 0 || site >= len(ss.snap.Sites) {
		return fmt.Errorf("coalloc: session: release at site %d of %d", site, len(ss.snap.Sites))
	}
	st := &ss.snap.Sites[site]
	k, _ := slices.BinarySearchFunc(st.Busy, until, func(h policy.Hold, t time.Time) int { return h.Until.Compare(t) })
	for ; k < len(st.Busy) && st.Busy[k].Until.Equal(until); k++ {
		if st.Busy[k].Nodes == nodes {
			st.Busy = slices.Delete(st.Busy, k, k+1)
			st.Free += nodes
			ss.moved = true
			ss.r.bases.changed(site)
			return nil
		}
	}
	return fmt.Errorf("coalloc: session: site %s holds no %d node(s) until %s", st.Name, nodes, until.Format(time.RFC3339Nano))
}

// Plan implements policy.Session.
func (ss *Session) Plan(ctx context.Context, now time.Time) (*policy.Plan, error) {
	if now.Before(ss.snap.Now) {
		return nil, fmt.Errorf("coalloc: session: plan at %s, before the last pass (%s)", now.Format(time.RFC3339Nano), ss.snap.Now.Format(time.RFC3339Nano))
	}
	// The last pass's end serves this one only when no hold changed and
	// none has run out (a hold past its end counts as ending soon).
	if ss.moved || !now.Before(ss.firstEnd()) {
		ss.m.mu.Lock()
		ss.m.drop(ss.p)
		ss.m.mu.Unlock()
	}
	ss.moved = false
	ss.snap.Now = now
	plan, err := ss.p.pass(ctx, &ss.snap, &ss.m, true, &ss.r)
	if err != nil {
		return nil, err
	}
	if len(ss.r.gone) > 0 {
		ss.dequeue()
	}
	return plan, nil
}

// firstEnd is the earliest end of a hold (far in the future without one).
func (ss *Session) firstEnd() time.Time {
	var t time.Time
	for i := range ss.snap.Sites {
		if b := ss.snap.Sites[i].Busy; len(b) > 0 && (t.IsZero() || b[0].Until.Before(t)) {
			t = b[0].Until
		}
	}
	if t.IsZero() {
		return time.Unix(1<<62, 0)
	}
	return t
}

// dequeue takes the jobs the last plan started or rejected (ss.r.gone,
// queue indices) out of the queue. The jobs before the last one that leaves
// move back; most leave from the front (the head starts), so few move. Once
// the room freed at the front outgrows the queue, the queue moves to the
// front of its memory, so that Submit seldom needs more.
func (ss *Session) dequeue() {
	gone := ss.r.gone
	slices.Sort(gone)
	q := ss.snap.Queue
	g := len(gone) - 1
	k := gone[g] + 1 // q[k:] stays where it is
	for x := gone[g]; x >= 0; x-- {
		if g >= 0 && gone[g] == x {
			g--
			continue
		}
		k--
		q[k] = q[x]
	}
	clear(q[:k])
	q = q[k:]
	if ss.qbuf == nil || cap(ss.qbuf) < cap(q) {
		ss.qbuf = q // a Submit moved the queue to new memory
	}
	if front := cap(ss.qbuf) - cap(q); front > len(q) {
		n := copy(ss.qbuf[:len(q)], q)
		clear(q[max(0, len(q)-front):]) // what the copy did not overwrite
		q = ss.qbuf[:n]
	}
	ss.snap.Queue = q
}
