package leastloaded

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

// Session is the planner's policy.Session: Plan's pass on a snapshot the
// session keeps from the changes it is told. Over the plugin boundary this
// is what lets the host send a handful of changes per pass instead of the
// whole grid and queue.
//
// The rule only reads each site's free nodes, so the session keeps those
// (and the holds, to check each Release against a Hold); a site's Busy
// list stays as the starting snapshot gave it.
type Session struct {
	snap  policy.Snapshot // Quiet
	holds map[hold]int    // live holds, counted
	gone  []int           // queue indices the last pass took out
}

type hold struct {
	site, nodes int
	until       time.Time
}

// NewSession implements policy.Incremental. It refuses the snapshots Plan
// refuses.
func (*Planner) NewSession(s *policy.Snapshot) (policy.Session, error) {
	if err := checkSites(s.Sites); err != nil {
		return nil, err
	}
	ss := &Session{holds: map[hold]int{}, snap: policy.Snapshot{Now: s.Now, Sites: slices.Clone(s.Sites),
		Queue: slices.Clone(s.Queue), Links: s.Links, Uplinks: s.Uplinks, MultiSite: s.MultiSite, Quiet: true}}
	for i := range ss.snap.Sites {
		for _, h := range ss.snap.Sites[i].Busy {
			ss.holds[hold{i, h.Nodes, h.Until.UTC()}]++
		}
	}
	return ss, nil
}

// Submit implements policy.Session.
func (ss *Session) Submit(j policy.Job) { ss.snap.Queue = append(ss.snap.Queue, j) }

// Hold implements policy.Session.
func (ss *Session) Hold(site, nodes int, until time.Time) error {
	if site < 0 || site >= len(ss.snap.Sites) {
		return fmt.Errorf("leastloaded: session: hold at site %d of %d", site, len(ss.snap.Sites))
	}
	st := &ss.snap.Sites[site]
	if nodes < 1 || nodes > st.Free {
		return fmt.Errorf("leastloaded: session: hold of %d node(s) at %s, which has %d free", nodes, st.Name, st.Free)
	}
	st.Free -= nodes
	ss.holds[hold{site, nodes, until.UTC()}]++
	return nil
}

// Release implements policy.Session.
func (ss *Session) Release(site, nodes int, until time.Time) error {
	if site < 0 || site >= len(ss.snap.Sites) {
		return fmt.Errorf("leastloaded: session: release at site %d of %d", site, len(ss.snap.Sites))
	}
	k := hold{site, nodes, until.UTC()}
	if ss.holds[k] == 0 {
		return fmt.Errorf("leastloaded: session: site %s holds no %d node(s) until %s", ss.snap.Sites[site].Name, nodes, until.Format(time.RFC3339Nano))
	}
	if ss.holds[k]--; ss.holds[k] == 0 {
		delete(ss.holds, k)
	}
	ss.snap.Sites[site].Free += nodes
	return nil
}

// Plan implements policy.Session: Plan's pass at now, Quiet; the jobs it
// starts or rejects leave the queue.
func (ss *Session) Plan(ctx context.Context, now time.Time) (*policy.Plan, error) {
	if now.Before(ss.snap.Now) {
		return nil, fmt.Errorf("leastloaded: session: plan at %s, before the last pass (%s)", now.Format(time.RFC3339Nano), ss.snap.Now.Format(time.RFC3339Nano))
	}
	ss.snap.Now = now
	ss.gone = ss.gone[:0]
	p, err := planPass(ctx, &ss.snap, &ss.gone)
	if err != nil {
		return nil, err
	}
	if len(ss.gone) > 0 {
		q, k := ss.snap.Queue, 0
		for i := range q {
			if k < len(ss.gone) && ss.gone[k] == i {
				k++
				continue
			}
			q[i-k] = q[i]
		}
		clear(q[len(q)-k:])
		ss.snap.Queue = q[:len(q)-k]
	}
	return p, nil
}
