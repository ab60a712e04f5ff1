package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// Remote duties: what the broker still owes the sites beyond tracking its
// live jobs, kept durable beside the jobs (ValueStore, under DutiesKey) so
// a restart does not forget it:
//
//   - cancels: every remote cancel is recorded before it is sent and
//     dropped once the site took it; one the site could not take (it did
//     not answer) is retried until it does (retryOrphans), also after a
//     restart. So a QoS loser, the sibling of a failed component or a job
//     the user cancelled does not run on because the broker restarted
//     while its site was down (or before the cancel left).
//   - late watches: after a restart, an intended submission not found at
//     its site once Options.SubmitGrace is over counts as never sent and
//     the job goes on (queued again under the next attempt's tag, or the
//     copy submitted again). Its tag is abandoned (Job.Abandoned) and
//     watched: looked up at its site every cycle until the job has ended
//     and lateMargin more has passed, and any remote job carrying it that
//     the job does not own is cancelled, with a late-submission event —
//     so a submission that lands after the grace does not run twice.
//
// A store without ValueStore keeps them in memory only.

// DutiesKey is the ValueStore key of the broker's remote duties.
const DutiesKey = "bridge.remote-duties"

// EventLateSubmission is the event kind of a submission found at its site
// after its tag was abandoned.
const EventLateSubmission = "late-submission"

// dutyCancel is a remote cancel owed to a site.
type dutyCancel struct {
	Job      string         `json:"job"`
	Site     string         `json:"site"`
	RemoteID backends.JobID `json:"remote_id"`
	Why      string         `json:"why,omitempty"`
}

// lateWatch is an abandoned tag watched at its site.
type lateWatch struct {
	Job     string    `json:"job"`
	Site    string    `json:"site"`
	Tag     string    `json:"tag"`
	Attempt int       `json:"attempt"`
	Until   time.Time `json:"until,omitzero"` // zero while the job has not ended
	// Seen are the remote jobs under Tag already dealt with.
	Seen []backends.JobID `json:"seen,omitempty"`
}

type dutyRecord struct {
	Cancels []dutyCancel `json:"cancels,omitempty"`
	Watches []lateWatch  `json:"watches,omitempty"`
}

// duties is what the broker owes the sites beyond tracking its live jobs
// (see the top of this file): the cancels being sent or to retry, and the
// late watches of abandoned tags. Its cancel method, doCancels, is the
// cancel stage (stage_cancel.go). Guarded by the ledger's lock.
type duties struct {
	part
	issuing   []cancelReq    // cancels being sent now (doCancels)
	orphans   []cancelReq    // cancels of remote jobs at sites that did not answer; retried (retryOrphans)
	orphanTry time.Time      // when they were last tried
	bgBusy    bool           // a background retry runs
	bg        sync.WaitGroup // background retries (tests wait for them)
	watches   []lateWatch
	saved     []byte // the record as last stored
	next      time.Time
}

// lateMargin is how long an abandoned tag is still watched after its job
// ended (at least a minute).
func (d *duties) lateMargin() time.Duration { return max(d.opts.SubmitGrace, time.Minute) }

// saveDuties stores the duties when they changed since the last save. A
// failed write is logged and retried at the next change. The ledger's lock held.
func (d *duties) saveDuties(ctx context.Context) {
	vs, ok := d.store.(ValueStore)
	if !ok {
		return
	}
	if d.saved == nil && len(d.issuing)+len(d.orphans)+len(d.watches) == 0 {
		return // nothing owed, nothing stored
	}
	var r dutyRecord
	for _, c := range slices.Concat(d.issuing, d.orphans) {
		if !slices.ContainsFunc(r.Cancels, func(d dutyCancel) bool { return d.Site == c.site && d.RemoteID == c.id }) {
			r.Cancels = append(r.Cancels, dutyCancel{Job: c.job, Site: c.site, RemoteID: c.id, Why: c.why})
		}
	}
	r.Watches = d.watches
	raw, err := json.Marshal(r)
	if err != nil || bytes.Equal(raw, d.saved) {
		return
	}
	if err := vs.SetValue(ctx, DutiesKey, raw); err != nil {
		d.log.Error("store write failed", "key", DutiesKey, "err", err)
		return
	}
	d.saved = raw
}

// loadDuties reads the duties a previous process left: its cancels are
// retried from the first cycle on, its watches go on. An entry naming a
// site this configuration lacks is dropped with an error; an unreadable
// record is reported and ignored. The ledger's lock held.
func (d *duties) loadDuties(ctx context.Context, rep *RecoverReport) {
	vs, ok := d.store.(ValueStore)
	if !ok {
		return
	}
	raw, ok, err := vs.Value(ctx, DutiesKey)
	if err != nil || !ok {
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("recover: reading %s: %w", DutiesKey, err))
		}
		return
	}
	var r dutyRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		rep.Errors = append(rep.Errors, fmt.Errorf("recover: %s is not a duty record, ignored (pending cancels and late watches of the previous run are lost): %w", DutiesKey, err))
		return
	}
	d.saved = raw
	for _, c := range r.Cancels {
		if _, ok := d.siteIdx[c.Site]; !ok || c.RemoteID == "" {
			rep.Errors = append(rep.Errors, fmt.Errorf("recover: pending cancel of %q at site %q (job %s) dropped: no such site", c.RemoteID, c.Site, c.Job))
			continue
		}
		d.owe(cancelReq{c.Job, c.Site, c.RemoteID, c.Why})
	}
	for _, w := range r.Watches {
		if _, ok := d.siteIdx[w.Site]; !ok || w.Tag == "" {
			rep.Errors = append(rep.Errors, fmt.Errorf("recover: late watch of tag %q at site %q (job %s) dropped: no such site", w.Tag, w.Site, w.Job))
			continue
		}
		d.watches = append(d.watches, w)
	}
}

// intendCancels records cancels about to be sent (doCancels). The ledger's lock held.
func (d *duties) intendCancels(ctx context.Context, cs []cancelReq) {
	d.issuing = append(d.issuing, cs...)
	d.saveDuties(ctx)
}

// cancelSent drops a cancel from those being sent: the site took it, or
// retryCancel keeps it to retry. The ledger's lock held.
func (d *duties) cancelSent(c cancelReq) {
	if k := slices.Index(d.issuing, c); k >= 0 {
		d.issuing = slices.Delete(d.issuing, k, k+1)
	}
}

// mayLand reports whether an intent of j may still be landing at its
// sites after the grace: it was written by the process before a restart
// and the broker allows for submissions in flight at all. The ledger's lock held.
func (d *duties) mayLand(j *Job) bool {
	return d.opts.SubmitGrace > 0 && d.restarted[j.ID] && !j.Intent.IsZero()
}

// abandon gives up the tag of component c of j after the grace: it is
// recorded with the job and watched (see the top of this file). Only a
// site that can look jobs up by tag can be watched. The ledger's lock held.
func (d *duties) abandon(ctx context.Context, j *Job, c Component, tag string, now time.Time) {
	if !d.mayLand(j) {
		return
	}
	if _, ok := backends.AsFinder(d.sites[d.siteIdx[c.Site]].Backend); !ok {
		return
	}
	key := tag + "@" + c.Site
	if slices.Contains(j.Abandoned, key) {
		return
	}
	j.Abandoned = append(j.Abandoned, key)
	d.watches = append(d.watches, lateWatch{Job: j.ID, Site: c.Site, Tag: tag, Attempt: j.Attempts})
	d.note(j, now, "abandoned", c.Site, fmt.Sprintf("attempt %d (tag %s) not found at %s after the grace: counted as never sent; a late submission under that tag will be cancelled",
		j.Attempts, tag, c.Site))
	d.saveDuties(ctx)
}

// rewatch rebuilds the watches of the unfinished jobs Recover loaded from
// their Abandoned tags (a crash between the job's write and the duties'
// loses none). The ledger's lock held.
func (d *duties) rewatch(j *Job) {
	for _, key := range j.Abandoned {
		tag, site, ok := strings.Cut(key, "@")
		if _, known := d.siteIdx[site]; !ok || !known {
			continue
		}
		if slices.ContainsFunc(d.watches, func(w lateWatch) bool { return w.Job == j.ID && w.Tag == tag && w.Site == site }) {
			continue
		}
		d.watches = append(d.watches, lateWatch{Job: j.ID, Site: site, Tag: tag, Attempt: attemptOf(j.ID, tag)})
	}
}

// attemptOf reads the attempt number from a tag of job id (RemoteTag,
// CopyTag); 0 when it is not one.
func attemptOf(id, tag string) int {
	rest, ok := strings.CutPrefix(tag, id+"-a")
	if !ok {
		return 0
	}
	if k := strings.IndexByte(rest, '-'); k >= 0 {
		rest = rest[:k]
	}
	n, _ := strconv.Atoi(rest)
	return n
}

// watchLate looks the abandoned tags up at their sites and cancels every
// remote job under one that its job does not own (Comps, Withdrawn): a
// submission that landed after the grace. At most once per lateEvery; a
// site that does not answer is asked again next time. Called by Cycle after
// the poll.
func (d *duties) watchLate(ctx context.Context, now time.Time) {
	d.mu.Lock()
	if len(d.watches) == 0 || now.Before(d.next) {
		d.mu.Unlock()
		return
	}
	d.next = now.Add(d.opts.SubmitGrace / 6)
	keep := d.watches[:0]
	for _, w := range d.watches {
		j := d.jobs[w.Job]
		if w.Until.IsZero() && (j == nil || j.State.Final()) {
			end := now
			if j != nil && !j.End.IsZero() {
				end = j.End
			}
			w.Until = end.Add(d.lateMargin())
		}
		if !w.Until.IsZero() && now.After(w.Until) {
			continue
		}
		keep = append(keep, w)
	}
	d.watches = keep
	ws := slices.Clone(keep)
	owners := make([]string, len(ws))
	for i, w := range ws {
		owners[i] = d.identityOwner(d.jobs[w.Job])
	}
	d.saveDuties(ctx)
	d.mu.Unlock()

	found := make([][]backends.JobStatus, len(ws))
	for i, w := range ws {
		be, err := d.backendFor(ctx, d.siteIdx[w.Site], owners[i])
		if err != nil {
			continue // asked again next time
		}
		if f, ok := backends.AsFinder(be); ok {
			found[i], _ = f.FindByGridID(ctx, w.Tag) // no answer: asked again next time
		}
	}

	d.mu.Lock()
	var cancels []cancelReq
	for i, w := range ws {
		j := d.jobs[w.Job]
		for _, st := range found[i] {
			if slices.Contains(w.Seen, st.ID) || (j != nil && owns(j, w.Site, st.ID)) {
				continue
			}
			k := slices.IndexFunc(d.watches, func(x lateWatch) bool { return x.Job == w.Job && x.Tag == w.Tag && x.Site == w.Site })
			if k < 0 {
				break
			}
			d.watches[k].Seen = append(d.watches[k].Seen, st.ID)
			msg := fmt.Sprintf("late submission of attempt %d found at %s after the grace: cancelled", w.Attempt, w.Site)
			if st.State.Final() {
				msg = fmt.Sprintf("late submission of attempt %d found at %s after the grace: it had already ended %s", w.Attempt, w.Site, st.State)
			} else {
				cancels = append(cancels, cancelReq{w.Job, w.Site, st.ID, fmt.Sprintf("remote job %s: late submission of attempt %d (tag %s)", st.ID, w.Attempt, w.Tag)})
			}
			if j != nil {
				d.record(ctx, j, now, EventLateSubmission, w.Site, msg)
			}
			d.log.Warn(msg, "job", w.Job, "remote", st.ID, "tag", w.Tag)
		}
	}
	d.saveDuties(ctx)
	d.mu.Unlock()
	d.doCancels(ctx, now, cancels)
}

// owns reports whether remote job id at site is one of j's components,
// current or withdrawn.
func owns(j *Job, site string, id backends.JobID) bool {
	is := func(c Component) bool { return c.Site == site && c.RemoteID == id }
	return slices.ContainsFunc(j.Comps, is) || slices.ContainsFunc(j.Withdrawn, is)
}
