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
// answer is kept to retry (retryOrphans). Every other part of the broker
// hands its cancels here (or, for retries, to retryOrphans), never to a
// backend. Called without the ledger's lock.
func (d *duties) doCancels(ctx context.Context, now time.Time, cs []cancelReq) {
	if len(cs) == 0 {
		return
	}
	d.mu.Lock()
	d.intendCancels(ctx, cs) // recorded before they are sent
	d.mu.Unlock()
	for _, c := range cs {
		err := d.sendCancel(ctx, c)
		d.markStale(d.siteIdx[c.site])
		d.mu.Lock()
		d.cancelSent(c)
		if j := d.jobs[c.job]; j != nil { // nil: dropped (Options.Drop)
			if err != nil {
				d.addEvent(j, now, "cancel-failed", c.site, fmt.Sprintf("cancelling %s: %v", c.id, err))
			} else {
				d.addEvent(j, now, "cancelled-remote", c.site, c.why)
			}
			_ = d.persist(ctx, j)
		}
		if err != nil {
			d.retryCancel(c, err)
		}
		d.mu.Unlock()
	}
	d.mu.Lock()
	d.saveDuties(ctx)
	d.mu.Unlock()
}

// sendCancel is the one place that cancels a remote job at a site
// (Backend.Cancel).
func (d *duties) sendCancel(ctx context.Context, c cancelReq) error {
	return d.sites[d.siteIdx[c.site]].Backend.Cancel(ctx, c.id)
}
