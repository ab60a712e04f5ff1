package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// Site outages, for the QoS tiers (copies.go): a site that stops answering
// has lost the components it runs, and the cancels that could not reach it
// are retried until it answers.

// retryOrphans re-issues cancels that failed because the site did not
// answer, so a copy given up at an unreachable site does not run on once
// the site is back: at once for a site whose last status call answered,
// else at most once per TierOptions.DownAfter — and for a real site then in
// the background, since a call to a site whose controller is down blocks
// for many seconds (~9 s for squeue) and must not hold up the cycle.
// Without tiers (no outage detection) every retry waits the DownAfter
// period. Durable: the duties record (duties.go) keeps them across a
// restart. The ledger's lock held; remote calls run with it released.
func (d *duties) retryOrphans(ctx context.Context, now time.Time) {
	if len(d.orphans) == 0 {
		return
	}
	defer d.saveDuties(ctx)
	all := now.Sub(d.orphanTry) >= d.opts.Tiers.downAfter() && !d.bgBusy
	var sync, bg, keep []cancelReq
	for _, o := range d.orphans {
		s := d.siteIdx[o.site]
		switch {
		case d.opts.Tiers != nil && (d.downSince == nil || d.downSince[s].IsZero()):
			sync = append(sync, o)
		case !all:
			keep = append(keep, o)
		case d.sites[s].Simulated:
			sync = append(sync, o)
		default:
			bg = append(bg, o)
		}
	}
	if all {
		d.orphanTry = now
	}
	d.orphans = keep
	if len(bg) > 0 {
		// Still owed while they are being sent: a crash meanwhile must
		// find them in the duties record (saved by the defer above).
		d.issuing = append(d.issuing, bg...)
		d.bgBusy = true
		d.bg.Add(1)
		go func() {
			defer d.bg.Done()
			again := d.cancelAll(context.WithoutCancel(ctx), bg)
			d.mu.Lock()
			for _, c := range bg {
				d.cancelSent(c)
			}
			d.owe(again...)
			d.bgBusy = false
			d.saveDuties(context.WithoutCancel(ctx))
			d.mu.Unlock()
		}()
	}
	if len(sync) == 0 {
		return
	}
	d.issuing = append(d.issuing, sync...) // owed while being sent, as above
	d.mu.Unlock()
	again := d.cancelAll(ctx, sync)
	d.mu.Lock()
	for _, c := range sync {
		d.cancelSent(c)
	}
	d.owe(again...)
}

// cancelAll issues the cancels and returns those that failed for a reason
// that may pass (the site did not answer).
func (d *duties) cancelAll(ctx context.Context, cs []cancelReq) []cancelReq {
	var again []cancelReq
	for _, o := range cs {
		if err := d.sendCancel(ctx, o); err != nil && backends.Retryable(err) {
			again = append(again, o)
		}
	}
	return again
}

// detectDown handles a site whose status calls keep failing for
// TierOptions.DownAfter. "The scheduler does not answer" is not "the jobs
// are gone" (SLURM keeps jobs running while only slurmctld is down): a
// component of a job without copies becomes StateUnknown, its job stays
// where it is and is not rerun anywhere until the site answers and the
// job is confirmed gone (the poll after the outage reconciles it). Only a
// copy of a job whose QoS tier already runs copies (hasCopies) counts as
// lost — the tier's other copy, or its backup, carries the job — and its
// cancel is retried until the site answers, so the surplus copy is
// cancelled as soon as it does. The first failed call of an outage is
// reported to the Reliability model as down, every answer as up. The
// ledger's lock held.
func (p *poller) detectDown(ctx context.Context, results [][]backends.JobStatus, errs []error, now time.Time) []*Job {
	if p.opts.Tiers == nil || errs == nil {
		return nil
	}
	if p.downSince == nil {
		p.downSince = make([]time.Time, len(p.sites))
	}
	rel := p.opts.Tiers.Reliability
	var touched []*Job
	for s := range p.sites {
		name := p.sites[s].Name
		if errs[s] == nil {
			if results[s] == nil {
				continue
			}
			if !p.downSince[s].IsZero() {
				p.outageOver(s, now)
			}
			p.downSince[s] = time.Time{}
			if rel != nil {
				// Every answer, not only the first after an outage: the
				// model may hold the site down from an earlier run or a
				// failed health probe; an answer from an up site is a no-op.
				rel.Observe(name, true, now)
			}
			continue
		}
		if errors.Is(errs[s], backends.ErrNeedsLogin) {
			// Waiting for `gridsub login`: not an outage. Its components
			// keep their state; nothing is given up or moved for it.
			continue
		}
		if p.downSince[s].IsZero() {
			p.downSince[s] = now
			if rel != nil {
				rel.Observe(name, false, now)
			}
		}
		since := p.downSince[s]
		if now.Sub(since) < p.opts.Tiers.downAfter() {
			continue
		}
		for _, id := range p.live {
			j := p.jobs[id]
			if j == nil || (j.State != Dispatched && j.State != Running) {
				continue
			}
			copies := hasCopies(j)
			for k := range j.Comps {
				c := &j.Comps[k]
				if c.Site != name || c.RemoteID == "" || c.State.Final() {
					continue
				}
				if !copies {
					if c.State != backends.StateUnknown {
						c.State = backends.StateUnknown
						c.Reason = fmt.Sprintf("unknown: site %s has not answered since %s; the job is not rerun until the site answers and confirms it gone",
							name, since.UTC().Format(time.RFC3339))
						p.record(ctx, j, now, "unknown", name, fmt.Sprintf("remote job %s: %s", c.RemoteID, c.Reason))
					}
					continue
				}
				c.State, c.End = backends.StateLost, now
				c.Reason = fmt.Sprintf("site %s has not answered since %s", name, since.UTC().Format(time.RFC3339))
				p.duties.owe(cancelReq{j.ID, name, c.RemoteID, "given up while the site did not answer"})
				if !j.touched {
					j.touched = true
					touched = append(touched, j)
				}
			}
		}
	}
	if len(touched) > 0 {
		p.duties.saveDuties(ctx) // the lost components' cancels
	}
	return touched
}

// retryCancel keeps a cancel that failed because the site did not answer,
// to be retried (retryOrphans); durable once the caller saves the duties
// (duties.go). The ledger's lock held.
func (d *duties) retryCancel(c cancelReq, err error) {
	if backends.Retryable(err) {
		d.owe(c)
	}
}

// owe keeps a cancel to retry, once per remote job. The ledger's lock held.
func (d *duties) owe(cs ...cancelReq) {
	for _, c := range cs {
		if !slices.ContainsFunc(d.orphans, func(o cancelReq) bool { return o.site == c.site && o.id == c.id }) {
			d.orphans = append(d.orphans, c)
		}
	}
}
