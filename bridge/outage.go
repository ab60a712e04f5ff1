package bridge

import (
	"context"
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
// restart. b.mu held; remote calls run with it released.
func (b *Broker) retryOrphans(ctx context.Context, now time.Time) {
	if len(b.tiers.orphans) == 0 {
		return
	}
	defer b.saveDuties(ctx)
	all := now.Sub(b.tiers.orphanTry) >= b.opts.Tiers.downAfter() && !b.tiers.bgBusy
	var sync, bg, keep []cancelReq
	for _, o := range b.tiers.orphans {
		s := b.siteIdx[o.site]
		switch {
		case b.opts.Tiers != nil && (b.tiers.downSince == nil || b.tiers.downSince[s].IsZero()):
			sync = append(sync, o)
		case !all:
			keep = append(keep, o)
		case b.sites[s].Simulated:
			sync = append(sync, o)
		default:
			bg = append(bg, o)
		}
	}
	if all {
		b.tiers.orphanTry = now
	}
	b.tiers.orphans = keep
	if len(bg) > 0 {
		// Still owed while they are being sent: a crash meanwhile must
		// find them in the duties record (saved by the defer above).
		b.duties.issuing = append(b.duties.issuing, bg...)
		b.tiers.bgBusy = true
		b.tiers.bg.Add(1)
		go func() {
			defer b.tiers.bg.Done()
			again := b.cancelAll(context.WithoutCancel(ctx), bg)
			b.mu.Lock()
			for _, c := range bg {
				b.cancelSent(c)
			}
			b.owe(again...)
			b.tiers.bgBusy = false
			b.saveDuties(context.WithoutCancel(ctx))
			b.mu.Unlock()
		}()
	}
	if len(sync) == 0 {
		return
	}
	b.duties.issuing = append(b.duties.issuing, sync...) // owed while being sent, as above
	b.mu.Unlock()
	again := b.cancelAll(ctx, sync)
	b.mu.Lock()
	for _, c := range sync {
		b.cancelSent(c)
	}
	b.owe(again...)
}

// cancelAll issues the cancels and returns those that failed for a reason
// that may pass (the site did not answer).
func (b *Broker) cancelAll(ctx context.Context, cs []cancelReq) []cancelReq {
	var again []cancelReq
	for _, o := range cs {
		if err := b.sendCancel(ctx, o); err != nil && backends.Retryable(err) {
			again = append(again, o)
		}
	}
	return again
}

// detectDown counts a site whose status calls keep failing for
// TierOptions.DownAfter as having lost the components it runs: they become
// StateLost (their jobs are returned to be tracked), and their cancel is
// retried until the site answers. The first failed call of an outage is
// reported to the Reliability model as down, every answer as up. b.mu held.
func (b *Broker) detectDown(ctx context.Context, results [][]backends.JobStatus, errs []error, now time.Time) []*Job {
	if b.opts.Tiers == nil || errs == nil {
		return nil
	}
	if b.tiers.downSince == nil {
		b.tiers.downSince = make([]time.Time, len(b.sites))
	}
	rel := b.opts.Tiers.Reliability
	var touched []*Job
	for s := range b.sites {
		name := b.sites[s].Name
		if errs[s] == nil {
			if results[s] == nil {
				continue
			}
			if !b.tiers.downSince[s].IsZero() {
				b.outageOver(s, now) // losses.go
			}
			b.tiers.downSince[s] = time.Time{}
			if rel != nil {
				// Every answer, not only the first after an outage: the
				// model may hold the site down from an earlier run or a
				// failed health probe; an answer from an up site is a no-op.
				rel.Observe(name, true, now)
			}
			continue
		}
		if b.tiers.downSince[s].IsZero() {
			b.tiers.downSince[s] = now
			if rel != nil {
				rel.Observe(name, false, now)
			}
		}
		since := b.tiers.downSince[s]
		if now.Sub(since) < b.opts.Tiers.downAfter() {
			continue
		}
		for _, id := range b.live {
			j := b.jobs[id]
			if j == nil || (j.State != Dispatched && j.State != Running) {
				continue
			}
			for k := range j.Comps {
				c := &j.Comps[k]
				if c.Site != name || c.RemoteID == "" || c.State.Final() {
					continue
				}
				c.State, c.End = backends.StateLost, now
				c.Reason = fmt.Sprintf("site %s has not answered since %s", name, since.UTC().Format(time.RFC3339))
				b.owe(cancelReq{j.ID, name, c.RemoteID, "given up while the site did not answer"})
				if !j.touched {
					j.touched = true
					touched = append(touched, j)
				}
			}
		}
	}
	if len(touched) > 0 {
		b.saveDuties(ctx) // duties.go: the lost components' cancels
	}
	return touched
}

// retryCancel keeps a cancel that failed because the site did not answer,
// to be retried (retryOrphans); durable once the caller saves the duties
// (duties.go). b.mu held.
func (b *Broker) retryCancel(c cancelReq, err error) {
	if backends.Retryable(err) {
		b.owe(c)
	}
}

// owe keeps a cancel to retry, once per remote job. b.mu held.
func (b *Broker) owe(cs ...cancelReq) {
	for _, c := range cs {
		if !slices.ContainsFunc(b.tiers.orphans, func(o cancelReq) bool { return o.site == c.site && o.id == c.id }) {
			b.tiers.orphans = append(b.tiers.orphans, c)
		}
	}
}

// outageGoesOn reports whether site s was already failing before this
// cycle (its failure was reported then). b.mu held.
func (b *Broker) outageGoesOn(s int, now time.Time) bool {
	return b.tiers.downSince != nil && !b.tiers.downSince[s].IsZero() && b.tiers.downSince[s].Before(now)
}
