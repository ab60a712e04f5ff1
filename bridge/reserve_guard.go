package bridge

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/reserve"
)

// Reservations that do not harm running work (issue #23): a grid job is
// not started at a site where it would still run when an admitted
// reservation's window opens, unless the admission graph accounts for it.
//
// While some advance reservation is admitted and not yet bound, every
// start the planner decides is offered to the graph first, as a booking of
// its own: each part's nodes at its site from now for the job's predicted
// run (ET = now, LT = now + run, fixed). The graph admits it only if every
// reservation it holds still fits with it — elsewhere, or later within its
// slack. Admitted, the job starts and its booking stays in the graph until
// the job leaves the live set (releaseRunBookings), so the binding of the
// reservations plans around it instead of preempting it (gridRunning
// leaves booked jobs out: the booking already holds their nodes). Refused,
// the job is not started this cycle: it stays queued with the graph's
// reason, and the planner's view of it leaves that site out while
// reservations are pending (holdOff), so the next plan starts it at
// another of its sites if one can take it.
//
// Bookings are in memory: after a restart the graph is rebuilt from the
// admitted reservations only, and the jobs running then are plain running
// work to binding (delayed around or, at worst, preempted), as before.

// notStartedPrefix starts the Reason of a job bookRun held back.
const notStartedPrefix = "not started at "

// runBookID is the graph id of part k of job id's booking.
func runBookID(id string, k int) string { return "run:" + id + ":" + strconv.Itoa(k) }

// windowsPending reports whether some admitted reservation is not bound
// yet (the graph decides its site and start at binding). The ledger's
// lock held.
func (rsv *reservations) windowsPending() bool {
	if rsv.rrg == nil {
		return false
	}
	for _, id := range rsv.reserved {
		if j := rsv.jobs[id]; j != nil && j.State == Reserved && j.Resv != nil &&
			(j.Resv.State == ResvAdmitted || j.Resv.State == ResvBinding) {
			return true
		}
	}
	return false
}

// bookRun offers the start d of job j to the graph (see above): true when
// the graph admitted every part (or no reservation is pending), false with
// the graph's reason when starting now would take nodes an admitted
// window needs. The ledger's lock held.
func (rsv *reservations) bookRun(j *Job, d *policy.Decision, names []string, now time.Time) (bool, string) {
	ok, why, site := rsv.tryBook(j, d, names, now)
	if !ok {
		rsv.holdOff(j, site)
	}
	return ok, why
}

// tryBook is bookRun's offer to the graph; site is the refused part's.
func (rsv *reservations) tryBook(j *Job, d *policy.Decision, names []string, now time.Time) (bool, string, string) {
	if !rsv.windowsPending() {
		return true, "", ""
	}
	run := d.Chosen.Runtime + d.Chosen.Transfer
	if run <= 0 {
		run = j.Req.Estimate
	}
	if run <= 0 {
		return true, "", ""
	}
	g := rsv.graph()
	for k, p := range d.Chosen.Parts {
		q := reserve.Request{ID: runBookID(j.ID, k), ET: now, LT: now.Add(run), Dur: run, Width: p.Nodes, Allowed: []string{names[p.Site]}}
		if st := g.Admit(q, now, nil); st.Code != policy.Success {
			for i := range k {
				g.Remove(runBookID(j.ID, i))
			}
			return false, fmt.Sprintf(notStartedPrefix+"%s: it would still run there (for %s) when an admitted reservation window opens, and the reservations admitted cannot all be held around it (%s); it waits",
				names[p.Site], run, strings.Join(st.Reasons, "; ")), names[p.Site]
		}
	}
	if rsv.runBooked == nil {
		rsv.runBooked = map[string]int{}
	}
	rsv.runBooked[j.ID] = len(d.Chosen.Parts)
	return true, "", ""
}

// holdOff narrows the planner's view of queued job j to its allowed sites
// other than site (unless none would be left), so that the next plan
// looks for a start elsewhere instead of choosing the site the graph
// refused again. The narrowing lasts while reservations are pending
// (restoreHeldOff). The ledger's lock held.
func (rsv *reservations) holdOff(j *Job, site string) {
	i := slices.Index(rsv.queue, j.ID)
	if i < 0 {
		return
	}
	if rsv.heldOff == nil {
		rsv.heldOff = map[string][]string{}
	}
	off := rsv.heldOff[j.ID]
	if !slices.Contains(off, site) {
		off = append(off, site)
		rsv.heldOff[j.ID] = off
	}
	pj := rsv.policyJob(j)
	var keep []int
	for s := range rsv.sites {
		if (pj.Allowed == nil || slices.Contains(pj.Allowed, s)) && !slices.Contains(off, rsv.names[s]) {
			keep = append(keep, s)
		}
	}
	if len(keep) > 0 {
		pj.Allowed = keep
	}
	rsv.pq[i] = pj
}

// restoreHeldOff gives the jobs holdOff narrowed their full view back
// once no reservation is pending any more. The ledger's lock held.
func (rsv *reservations) restoreHeldOff() {
	if len(rsv.heldOff) == 0 || rsv.windowsPending() {
		return
	}
	for id := range rsv.heldOff {
		if i := slices.Index(rsv.queue, id); i >= 0 {
			rsv.pq[i] = rsv.policyJob(rsv.jobs[id])
		}
	}
	clear(rsv.heldOff)
}

// releaseRunBookings removes from the graph the bookings of jobs that are
// no longer submitted or running (ended, requeued, refused). The ledger's
// lock held.
func (rsv *reservations) releaseRunBookings() {
	for id, n := range rsv.runBooked {
		if j := rsv.jobs[id]; j != nil && (j.State == Submitting || j.State == Dispatched || j.State == Running) {
			continue
		}
		for k := range n {
			rsv.rrg.Remove(runBookID(id, k))
		}
		delete(rsv.runBooked, id)
	}
}
