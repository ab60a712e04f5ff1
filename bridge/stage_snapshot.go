package bridge

import (
	"context"
	"fmt"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// snapshot builds the policy's view of the world.
func (b *Broker) snapshot(ctx context.Context, now time.Time, rep *CycleReport) (*policy.Snapshot, error) {
	if b.snapSites == nil {
		b.snapSites = make([]policy.Site, len(b.sites))
		b.infoOK = make([]bool, len(b.sites))
		b.infoErr = make([]error, len(b.sites))
	}
	b.notesMu.Lock()
	stale := b.stale
	b.stale = 0
	b.notesMu.Unlock()
	b.eachSite(func(s int) {
		// A site that pushes its changes is asked again only when it changed
		// (or when asking failed last time); the others every cycle.
		if b.sites[s].Pushes && b.infoOK[s] && stale&(1<<uint(min(s, 63))) == 0 && s < 64 {
			return
		}
		in, err := b.sites[s].Backend.Info(ctx)
		b.infoErr[s] = err
		b.infoOK[s] = err == nil && in != nil
		ps := &b.snapSites[s]
		*ps = policy.Site{Name: b.sites[s].Name, H: b.sites[s].H, Busy: ps.Busy[:0]}
		if !b.infoOK[s] {
			ps.Down = true
			return
		}
		ps.Nodes, ps.Free = in.Nodes, in.FreeNodes
		ps.Shape = policy.NodeShape{Cores: in.CoresPerNode, MemBytes: in.MemPerNode, GPUs: in.GPUsPerNode}
		ps.Trust = b.trust[s]
		for _, a := range in.Busy {
			ps.Busy = append(ps.Busy, policy.Hold{Nodes: a.Nodes, Until: a.Until})
		}
	})
	b.mu.Lock()
	for s := range b.sites {
		if !b.infoOK[s] {
			rep.Errors = append(rep.Errors, fmt.Errorf("site %s: info: %w", b.sites[s].Name, b.infoErr[s]))
			b.downKeepsSize(s) // unreachable.go
		} else if b.see(s, b.snapSites[s].Nodes, b.snapSites[s].Shape); b.capacity[s] != b.snapSites[s].Nodes {
			b.resv.learned(ctx, now, s, b.snapSites[s].Nodes)
		}
	}
	b.mu.Unlock()
	// The snapshot and its buffers are reused from cycle to cycle: the
	// policy reads them only during Plan and must not modify them.
	up := b.uplinks()
	b.snap = policy.Snapshot{Now: now, Sites: b.snapSites, Links: b.siteLinks(up), MultiSite: b.opts.MultiSite,
		Quiet: b.opts.NoHistory, Uplinks: up}
	b.mu.Lock()
	// Only jobs submitted by the cycle's now: a submission that arrived while
	// this cycle was polling the sites is planned by the next cycle, so no
	// job is dispatched "before" it was submitted. Concurrent submissions
	// may enter the queue in another order than their times (each takes its
	// time before it is stored), so a late job may sit before an earlier
	// one: every job is checked, and the queue is copied only when one is
	// left out. The cap keeps an append by the policy from writing into the
	// broker's own view of the queue.
	b.snap.Queue = b.copies.tierOrder(b.submittedBy(now)) // tiers.go
	b.mu.Unlock()
	return &b.snap, nil
}
