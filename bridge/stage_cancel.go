package bridge

import (
	"context"
	"fmt"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// cancelReq is a remote cancel: remote job id of grid job job at site, and
// why (the job's event says it).
type cancelReq struct {
	job, site string
	id        backends.JobID
	why       string
}

// run is the cancel stage of a cycle: it sends the cancels the stages
// before it handed on (cs.cancels), as doCancels does.
func (d *duties) run(ctx context.Context, cs *cycleState) {
	d.doCancels(ctx, cs.now, cs.cancels)
	cs.cancels = nil
}

// doCancels is the cancel stage: it sends cs, each recorded in the duties
// record before it is sent (duties.go), with a cancelled-remote (or
// cancel-failed) event on its job; one that failed because the site did not
// answer is kept to retry (retryOrphans). Each real site's cancels go in
// order on their own goroutine (siteTable.eachSite), so a site that hangs
// costs the stage its own command deadline and holds up no other site's;
// simulated sites' go in order, inline, keeping replays deterministic.
// Every other part of the broker hands its cancels here (or, for retries,
// to retryOrphans), never to a backend. Called without the ledger's lock.
func (d *duties) doCancels(ctx context.Context, now time.Time, cs []cancelReq) {
	if len(cs) == 0 {
		return
	}
	d.mu.Lock()
	d.intendCancels(ctx, cs) // recorded before they are sent
	d.mu.Unlock()
	bySite := make([][]cancelReq, len(d.sites))
	for _, c := range cs {
		s := d.siteIdx[c.site]
		bySite[s] = append(bySite[s], c)
	}
	d.eachSite(func(s int) {
		for _, c := range bySite[s] {
			d.cancelOne(ctx, now, c)
		}
	})
	d.mu.Lock()
	d.saveDuties(ctx)
	d.mu.Unlock()
}

// cancelOne sends one cancel and records its outcome.
func (d *duties) cancelOne(ctx context.Context, now time.Time, c cancelReq) {
	err := d.sendCancel(ctx, c)
	d.markStale(d.siteIdx[c.site])
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cancelSent(c)
	if j := d.jobs[c.job]; j != nil { // nil: dropped (Options.Drop)
		kind, msg := "cancelled-remote", c.why
		if err != nil {
			kind, msg = "cancel-failed", fmt.Sprintf("cancelling %s: %v", c.id, err)
		}
		d.record(ctx, j, now, kind, c.site, msg)
	}
	if err != nil {
		d.retryCancel(c, err)
	}
}

// sendCancel is the one place that cancels a remote job at a site
// (Backend.Cancel), through the identity of the job's owner there
// (siteTable.backendFor; a job the ledger no longer holds goes through
// the site's own). Called without the ledger's lock.
func (d *duties) sendCancel(ctx context.Context, c cancelReq) error {
	s := d.siteIdx[c.site]
	owner := ""
	if d.ids != nil {
		d.mu.Lock()
		owner = d.identityOwner(d.jobs[c.job])
		d.mu.Unlock()
	}
	be, err := d.backendFor(ctx, s, owner)
	if err != nil {
		return err
	}
	return be.Cancel(ctx, c.id)
}
