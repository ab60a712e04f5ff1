package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// poll asks every site, in one batched call, for the state of the live
// components it runs, and folds the answers into the jobs.
func (b *Broker) poll(ctx context.Context, now time.Time, rep *CycleReport) {
	b.mu.Lock()
	var ids [][]backends.JobID
	if b.polling {
		ids = make([][]backends.JobID, len(b.sites))
		for _, id := range b.live {
			for _, c := range b.jobs[id].Comps {
				if s := b.siteIdx[c.Site]; !c.State.Final() && !b.sites[s].Pushes && c.RemoteID != "" {
					ids[s] = append(ids[s], c.RemoteID)
				}
			}
		}
	}
	b.mu.Unlock()

	var results [][]backends.JobStatus
	var errs []error
	if ids != nil {
		results = make([][]backends.JobStatus, len(b.sites))
		errs = make([]error, len(b.sites))
		b.eachSite(func(s int) {
			if len(ids[s]) == 0 {
				return
			}
			results[s], errs[s] = b.sites[s].Backend.Status(ctx, ids[s])
			if errs[s] == nil && len(results[s]) != len(ids[s]) {
				errs[s] = fmt.Errorf("%w: %d statuses for %d jobs", backends.ErrBadOutput, len(results[s]), len(ids[s]))
			}
		})
	}
	b.notesMu.Lock()
	notes := b.notes
	b.notes = b.spareNotes[:0] // double-buffered: the next cycle's notes reuse this memory
	b.spareNotes = nil
	b.notesMu.Unlock()
	defer func() {
		b.notesMu.Lock()
		b.spareNotes = notes[:0]
		b.notesMu.Unlock()
	}()

	b.mu.Lock()
	touched := b.detectDown(ctx, results, errs, now) // outage.go
	for _, n := range notes {
		if j := b.apply(n.site, n.st, now); j != nil {
			touched = append(touched, j)
		}
	}
	for s := range results {
		if errs[s] != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("site %s: status: %w", b.sites[s].Name, errs[s]))
			lvl := slog.LevelWarn
			if b.outageGoesOn(s, now) { // copies.go: said once per outage
				lvl = slog.LevelDebug
			}
			b.log.Log(ctx, lvl, "status poll failed", "site", b.sites[s].Name, "err", errs[s])
			continue
		}
		rep.Polled += len(results[s])
		for i, st := range results[s] {
			st.ID = ids[s][i] // answers come in request order; trust the order, not the echo
			if j := b.apply(s, st, now); j != nil {
				touched = append(touched, j)
			}
		}
	}
	var cancels []cancelReq
	b.startGroup() // the changes are written together below (persistgroup.go)
	for _, j := range touched {
		if j.touched { // once per job, in the order of first change
			j.touched = false
			cancels = append(cancels, b.trk.track(ctx, j, now, rep)...)
		}
	}
	b.flushGroup(ctx)
	// Only a job that left the live states needs the live list compacted
	// (most changes are a start: dispatched -> running).
	if slices.ContainsFunc(touched, func(j *Job) bool { return j.State != Dispatched && j.State != Running }) {
		b.compactLive()
	}
	b.mu.Unlock()
	b.duties.doCancels(ctx, now, cancels)
	if len(b.ended) > 0 || b.fetch.fetchPending() {
		b.fetch.fetchEnded(ctx, now) // fetch.go
	}
	b.resv.releaseNative(ctx, now)
}

// apply records one component status and returns its job the first time the
// job changes in this cycle (nil otherwise). b.mu held.
func (b *Broker) apply(site int, st backends.JobStatus, now time.Time) *Job {
	id, ok := b.where[compKey{site, st.ID}]
	if !ok {
		return nil
	}
	b.rm.noteEstimate(site, st) // remap.go
	j := b.jobs[id]
	if j.State != Dispatched && j.State != Running {
		return nil
	}
	name := b.sites[site].Name
	for k := range j.Comps {
		c := &j.Comps[k]
		if c.Site != name || c.RemoteID != st.ID || c.State.Final() || st.State == c.State {
			continue
		}
		c.State, c.Reason = st.State, st.Reason
		if st.State.Final() {
			c.ExitCode = st.ExitCode
			c.End = orNow(st.End, now)
			b.noteLoss(site, st, now) // losses.go
		}
		if st.State == backends.StateRunning || (st.State.Final() && c.Start.IsZero() && !st.Start.IsZero()) {
			c.Start = orNow(st.Start, now)
		}
		if !j.touched {
			j.touched = true
			return j
		}
		return nil
	}
	return nil
}

type note struct {
	site int
	st   backends.JobStatus
}

type compKey struct {
	site int
	id   backends.JobID
}
