package bridge

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// snapshotter is the snapshot stage: it asks every site for its Info
// (concurrently for real sites, in order for simulated ones; a site that
// pushes its changes only when it changed) and builds the policy's view of
// the world from it, the queue and the links. It owns the snapshot, which
// is reused from cycle to cycle: the stages after it read it during the
// cycle only.
type snapshotter struct {
	part
	*reservations // a site's node count, learned for the reservation graph
	*copies       // the queue's order by tier
	snap          policy.Snapshot
	// reported is each site's Free and Busy as its Info gave them, before
	// seeOwnPending counted the broker's own jobs it does not show yet (a
	// pushing site's Info is not asked again every cycle: the count starts
	// from the report each time, never from last cycle's result).
	reported []siteReport
	pendBuf  []int
	// infoKind and infoParts are each site's kind and partitions from the
	// cycle's Info, recorded in the site table (offered) under the lock.
	infoKind  []string
	infoParts [][]string
	infoAccts [][]string // and its accounts (nil: not known)
}

// siteReport is what a site's Info said of its free nodes.
type siteReport struct {
	free int
	busy []policy.Hold
}

// run is the snapshot stage: it writes cs.snap, and a site whose Info
// failed to cs.rep.
func (sn *snapshotter) run(ctx context.Context, cs *cycleState) error {
	snap, err := sn.snapshot(ctx, cs.now, &cs.rep)
	cs.snap = snap
	return err
}

// snapshot builds the policy's view of the world at now.
func (sn *snapshotter) snapshot(ctx context.Context, now time.Time, rep *CycleReport) (*policy.Snapshot, error) {
	if sn.snapSites == nil {
		sn.snapSites = make([]policy.Site, len(sn.sites))
		sn.infoOK = make([]bool, len(sn.sites))
		sn.infoErr = make([]error, len(sn.sites))
		sn.reported = make([]siteReport, len(sn.sites))
		sn.pendBuf = make([]int, len(sn.sites))
		sn.infoKind = make([]string, len(sn.sites))
		sn.infoParts = make([][]string, len(sn.sites))
		sn.infoAccts = make([][]string, len(sn.sites))
	}
	sn.notesMu.Lock()
	stale := sn.stale
	sn.stale = 0
	sn.notesMu.Unlock()
	sn.eachSite(func(s int) {
		// A site that pushes its changes is asked again only when it changed
		// (or when asking failed last time); the others every cycle.
		if sn.sites[s].Pushes && sn.infoOK[s] && stale&(1<<uint(min(s, 63))) == 0 && s < 64 {
			return
		}
		in, err := sn.sites[s].Backend.Info(ctx)
		sn.infoErr[s] = err
		sn.infoOK[s] = err == nil && in != nil
		ps := &sn.snapSites[s]
		*ps = policy.Site{Name: sn.sites[s].Name, H: sn.sites[s].H, Busy: ps.Busy[:0]}
		if !sn.infoOK[s] {
			ps.Down = true
			return
		}
		sn.infoKind[s], sn.infoParts[s] = in.Kind, append(sn.infoParts[s][:0], in.Partitions...)
		sn.infoAccts[s] = nil
		if in.Accounts != nil {
			sn.infoAccts[s] = append([]string{}, in.Accounts...)
		}
		ps.Nodes, ps.Free = in.Nodes, in.FreeNodes
		ps.Shape = policy.NodeShape{Cores: in.CoresPerNode, MemBytes: in.MemPerNode, GPUs: in.GPUsPerNode}
		ps.Trust = sn.trust[s]
		for _, a := range in.Busy {
			ps.Busy = append(ps.Busy, policy.Hold{Nodes: a.Nodes, Until: a.Until})
		}
		r := &sn.reported[s]
		r.free, r.busy = ps.Free, append(r.busy[:0], ps.Busy...)
	})
	sn.mu.Lock()
	for s := range sn.sites {
		if !sn.infoOK[s] {
			rep.Errors = append(rep.Errors, fmt.Errorf("site %s: info: %w", sn.sites[s].Name, sn.infoErr[s]))
			sn.downKeepsSize(s)
			continue
		}
		sn.offered(s, sn.infoKind[s], sn.infoParts[s], sn.infoAccts[s])
		if sn.see(s, sn.snapSites[s].Nodes, sn.snapSites[s].Shape); sn.capacity[s] != sn.snapSites[s].Nodes {
			sn.learned(ctx, now, s, sn.snapSites[s].Nodes)
		}
	}
	sn.seeOwnPending(now)
	sn.mu.Unlock()
	// The snapshot and its buffers are reused from cycle to cycle: the
	// policy reads them only during Plan and must not modify them.
	up := sn.uplinks()
	sn.snap = policy.Snapshot{Now: now, Sites: sn.snapSites, Links: sn.siteLinks(up), MultiSite: sn.opts.MultiSite,
		Quiet: sn.opts.NoHistory, Uplinks: up}
	sn.mu.Lock()
	// Only jobs submitted by the cycle's now: a submission that arrived while
	// this cycle was polling the sites is planned by the next cycle, so no
	// job is dispatched "before" it was submitted. Concurrent submissions
	// may enter the queue in another order than their times (each takes its
	// time before it is stored), so a late job may sit before an earlier
	// one: every job is checked, and the queue is copied only when one is
	// left out. The cap keeps an append by the policy from writing into the
	// broker's own view of the queue.
	sn.snap.Queue = sn.tierOrder(sn.submittedBy(now))
	sn.mu.Unlock()
	return &sn.snap, nil
}

// seeOwnPending counts against each site's free nodes the broker's own
// jobs there that the site's report does not include yet: every live
// component not seen running (just submitted, or pending in the site's
// queue). A batch system reports a job's nodes as busy only once it has
// started it; until then its idle nodes are already promised, and a burst
// planned on them would pile up pending at one site while another has
// nodes idle. Each such component takes its nodes from Free (never below
// zero: a site already full is not made fuller) and holds them as a Busy
// block until now plus the job's estimate, so Free + sum(Busy) = Nodes
// still holds. A component seen running is in the report (its nodes are
// busy there); one that started since the last poll is counted twice for
// at most a poll, erring towards sending less. A site whose report already
// counts nodes as taken with no busy block for them (Nodes > Free +
// sum(Busy): a site that holds nodes for the jobs it accepted) has those
// nodes absorb the pending jobs first. The ledger's lock held.
func (sn *snapshotter) seeOwnPending(now time.Time) {
	pend := sn.pendBuf
	clear(pend)
	sn.asReported()
	// Nodes the report counts as taken without a busy block to show for
	// them (Nodes - Free - sum(Busy)) may be the broker's own pending
	// jobs, counted by a site that reserves nodes for what it accepted:
	// they absorb the pending jobs first, so no job is counted twice.
	for s := range sn.snapSites {
		if !sn.infoOK[s] {
			continue
		}
		ps := &sn.snapSites[s]
		held := ps.Free
		for _, h := range ps.Busy {
			held += h.Nodes
		}
		pend[s] = -max(0, ps.Nodes-held)
	}
	for _, id := range sn.live {
		j, ok := sn.jobs[id]
		if !ok || (j.State != Dispatched && j.State != Running) {
			continue
		}
		for k := range j.Comps {
			c := &j.Comps[k]
			if c.Passive || c.State == backends.StateRunning || c.State.Final() {
				continue
			}
			s, ok := sn.siteIdx[c.Site]
			if !ok || !sn.infoOK[s] {
				continue
			}
			ps := &sn.snapSites[s]
			n := c.Nodes
			if pend[s] < 0 { // absorbed by the report's unexplained nodes
				a := min(n, -pend[s])
				pend[s] += a
				n -= a
			}
			if n = min(n, ps.Free); n <= 0 {
				continue
			}
			ps.Free -= n
			ps.Busy = append(ps.Busy, policy.Hold{Nodes: n, Until: now.Add(j.Req.Estimate)})
			pend[s] += n
		}
	}
	for s, n := range pend {
		if n > 0 {
			slices.SortStableFunc(sn.snapSites[s].Busy, func(a, b policy.Hold) int { return a.Until.Compare(b.Until) })
		}
	}
}

// asReported sets every site of the snapshot back to its free nodes and
// busy blocks as its Info reported them, without seeOwnPending's holds:
// the remap stage judges a job waiting at a site by that site's own
// profile, where the job's own hold would make its start look later.
func (sn *snapshotter) asReported() {
	for s := range sn.snapSites {
		if !sn.infoOK[s] {
			continue
		}
		ps := &sn.snapSites[s]
		r := &sn.reported[s]
		ps.Free, ps.Busy = r.free, append(ps.Busy[:0], r.busy...)
	}
}
