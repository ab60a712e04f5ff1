package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// Creating a bound reservation's native reservation without harming the
// work around it (issue #23):
//
//   - when the binding preempted grid jobs, the native reservation is
//     created only once the site shows the nodes free (Info's free nodes):
//     a batch system that still counts the cancelled jobs' nodes busy
//     refuses the reservation (PBS: "No available resources on nodes"),
//     and the preempted work would have been lost for nothing;
//   - a creation the site refuses is asked again at the next binding,
//     while the window still holds the job (its latest start, Latest -
//     Estimate), each refusal recorded with the site's reason; only then
//     does the reservation fail, with the last reason.
//
// Both wait in Reservation.Waiting (stored): a broker restarted meanwhile
// carries on. A refusal is first checked against the site's own record
// (the reservation may exist after all: a crash after it was made, before
// it was recorded), so one is never made twice.

// latestStart is the last moment a reservation's native reservation can
// start and still hold the job's walltime inside its window.
func latestStart(j *Job) time.Time { return j.Resv.Latest.Add(-ceilSecond(j.Req.Estimate)) }

// createNative is one try at a waiting binding: wait while the site does
// not show the nodes free, else create the native reservation.
func (rsv *reservations) createNative(ctx context.Context, j *Job, now time.Time, rep *BindReport) {
	rsv.mu.Lock()
	r := j.Resv
	site := r.Site
	s, ok := rsv.siteIdx[site]
	rsv.mu.Unlock()
	if !ok {
		rsv.mu.Lock()
		rsv.failReserved(ctx, j, now, fmt.Sprintf("bound to %q, which is no site of this broker", site))
		rep.Failed++
		rsv.mu.Unlock()
		return
	}
	in, err := rsv.sites[s].Backend.Info(ctx)
	if err == nil && in != nil && in.FreeNodes >= j.Req.Nodes {
		rsv.create(ctx, j, now, rep)
		return
	}
	rsv.mu.Lock()
	defer rsv.mu.Unlock()
	if now.After(latestStart(j)) {
		why := fmt.Sprintf("%s did not show %d node(s) free before %s, the latest start its window allows", site, j.Req.Nodes, latestStart(j).Format(time.RFC3339))
		if err != nil {
			why += fmt.Sprintf(" (it did not answer: %v)", err)
		}
		r.State, r.Waiting = ResvFailed, false
		rsv.rrg.Remove(j.ID)
		rsv.endAs(j, now, Failed, "failed", site, "reservation failed: "+why)
		_ = rsv.save(ctx, j)
		rep.Failed++
	}
}

// create creates the native reservation of a binding at its site and
// records the outcome: bound; asked again later (the site could not be
// asked, or refused while the window still allows a try); or failed, with
// the site's reason.
func (rsv *reservations) create(ctx context.Context, j *Job, now time.Time, rep *BindReport) {
	rsv.mu.Lock()
	r := j.Resv
	site, name, start := r.Site, r.Name, r.Start
	s := rsv.siteIdx[site]
	rsv.mu.Unlock()
	rv, ok := backends.AsReserver(rsv.sites[s].Backend)
	if !ok {
		rsv.mu.Lock()
		rsv.failReserved(ctx, j, now, fmt.Sprintf("site %s cannot make advance reservations", site))
		rep.Failed++
		rsv.mu.Unlock()
		return
	}
	if start.Before(now) {
		start = now
	}
	id, err := rv.CreateReservation(ctx, &backends.ReservationSpec{Name: name, Start: start, Duration: ceilSecond(j.Req.Estimate), Nodes: j.Req.Nodes})
	if err != nil && errors.Is(err, backends.ErrRejected) {
		// Made after all (by this call before a cut, or before a crash)?
		if got, serr := rv.ShowReservation(ctx, backends.ResvID(name)); serr == nil {
			id, err = got.ID, nil
		}
	}
	rsv.markStale(s)
	rsv.mu.Lock()
	defer rsv.mu.Unlock()
	switch {
	case err == nil:
		r.State, r.Native, r.Waiting = ResvBound, id, false
		rsv.record(ctx, j, now, "bound", site, fmt.Sprintf("reservation %s at %s: %d node(s) from %s for %s", id, site, j.Req.Nodes, start.Format(time.RFC3339), ceilSecond(j.Req.Estimate)))
		rep.Bound++
	case backends.Retryable(err) && !errors.Is(err, backends.ErrRejected):
		// The site could not be asked: the intent stays, settled next time.
		rep.Errors = append(rep.Errors, fmt.Errorf("job %s: reserving at %s: %w", j.ID, site, err))
		rsv.record(ctx, j, now, "binding-retry", site, fmt.Sprintf("creating the reservation: %v; asked again at the next binding", err))
	case !now.After(latestStart(j)):
		// Refused while the window still allows a later start: asked again.
		r.Waiting = true
		rsv.record(ctx, j, now, "binding-retry", site, fmt.Sprintf("%s refused the reservation: %v; asked again at the next binding, until %s (the latest start its window allows)",
			site, err, latestStart(j).Format(time.RFC3339)))
	default:
		r.State, r.Waiting = ResvFailed, false // nothing was created: nothing to delete
		rsv.rrg.Remove(j.ID)
		rsv.endAs(j, now, Failed, "failed", site, fmt.Sprintf("reservation failed: site %s refused it: %v", site, err))
		_ = rsv.save(ctx, j)
		rep.Failed++
	}
}
