package bridge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// tracker folds component states into job states and ends jobs (track,
// finish, end), and retries a failed attempt.
type tracker struct {
	part
	*copies       // the copies of QoS-tiered jobs
	*reservations // a job's reservation ends with it
	*intake       // the output root, checked again before a fetch
}

// run is the track stage: it folds the components of every job the poll
// stage changed (cs.touched) into the job's state, once per job in the
// order of its first change, and hands the remote cancels that follows
// (the siblings of a failed component, the losing copies) to the cancel
// stage (cs.cancels). The jobs' writes go to the store together.
func (tk *tracker) run(ctx context.Context, cs *cycleState) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	tk.startGroup() // written together below (ledger_writes.go)
	for _, j := range cs.touched {
		if j.touched { // once per job, in the order of first change
			j.touched = false
			cs.cancels = append(cs.cancels, tk.track(ctx, j, cs.now, &cs.rep)...)
		}
	}
	tk.flushGroup(ctx)
	// Only a job that left the live states needs the live list compacted
	// (most changes are a start: dispatched -> running).
	if slices.ContainsFunc(cs.touched, func(j *Job) bool { return j.State != Dispatched && j.State != Running }) {
		tk.compactLive()
	}
	cs.touched = nil
}

// latest returns the latest component start and end: a co-allocated job runs
// once its last part starts and ends when its last part ends. Unknown times
// count as now.
func latest(cs []Component, now time.Time) (start, end time.Time) {
	for _, c := range cs {
		if s := orNow(c.Start, now); s.After(start) {
			start = s
		}
		if e := orNow(c.End, now); e.After(end) {
			end = e
		}
	}
	return start, end
}

// clampTimes keeps submit <= start <= end: batch systems report times in
// whole seconds (SLURM truncates), so a start can seem to precede a submission
// made a fraction of a second earlier.
func clampTimes(submit, start, end time.Time) (time.Time, time.Time) {
	if start.Before(submit) {
		start = submit
	}
	if end.Before(start) {
		end = start
	}
	return start, end
}

func orNow(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	return t
}

// track folds component states into the job state: a copy set under its
// rule first (trackSet), then one attempt, whose components all run, all
// complete, or fail with the first to fail. It returns the remote cancels
// to issue (siblings of a failed component, losing copies). The ledger's
// lock held.
func (tk *tracker) track(ctx context.Context, j *Job, now time.Time, rep *CycleReport) []cancelReq {
	cancels, settled := tk.trackSet(ctx, j, now, rep)
	if settled {
		return cancels
	}
	allRunning, allDone, failedAt := true, true, -1
	for k, c := range j.Comps {
		if c.State != backends.StateRunning && c.State != backends.StateCompleted {
			allRunning = false
		}
		if c.State != backends.StateCompleted {
			allDone = false
		}
		if c.State.Final() && c.State != backends.StateCompleted && failedAt < 0 {
			failedAt = k
		}
	}
	switch {
	case failedAt >= 0:
		c := j.Comps[failedAt]
		for _, o := range j.Comps {
			if !o.State.Final() {
				cancels = append(cancels, cancelReq{j.ID, o.Site, o.RemoteID, "sibling component at " + c.Site + " ended " + c.State.String()})
			}
		}
		reason := fmt.Sprintf("component at %s ended %s", c.Site, c.State)
		if c.State == backends.StateFailed {
			reason += fmt.Sprintf(" with exit code %d", c.ExitCode)
		}
		if c.Reason != "" {
			reason += " (" + c.Reason + ")"
		}
		if c.State != backends.StateTimeout && (c.State == backends.StateLost || tk.retries(j)) && j.Attempts-j.Moves < tk.opts.MaxAttempts {
			tk.retryAfter(j, c, now, reason)
			break
		}
		f := outcome{state: Failed, reason: reason, exit: c.ExitCode, start: j.Start, end: orNow(c.End, now),
			kind: "failed", site: c.Site, msg: reason, siteFault: siteFault(c)}
		if c.State == backends.StateTimeout {
			f.state, f.kind = Timeout, "timeout"
			switch {
			case strings.HasPrefix(c.Reason, "killed at its walltime"): // the site's own words, with the limit
				f.reason = c.Reason + " at " + c.Site
			case c.Reason != "":
				f.reason = "killed at its walltime at " + c.Site + " (" + c.Reason + ")"
			default:
				f.reason = "killed at its walltime at " + c.Site
			}
			f.msg = f.reason
		}
		if f.start.IsZero() && !c.Start.IsZero() {
			f.start, _ = latest(j.Comps, now)
		}
		if !f.start.IsZero() {
			f.start, f.end = clampTimes(j.Submit, f.start, f.end)
		}
		tk.finish(j, f, now)
		rep.Ended++
	case allDone:
		f := outcome{state: Completed, kind: "completed", msg: "every component ended with exit code 0"}
		f.start, f.end = latest(j.Comps, now)
		f.start, f.end = clampTimes(j.Submit, f.start, f.end)
		tk.finish(j, f, now)
		rep.Ended++
	case allRunning && j.State != Running:
		j.State = Running
		j.Start, _ = latest(j.Comps, now)
		j.Start, _ = clampTimes(j.Submit, j.Start, j.Start)
		if !tk.opts.NoHistory {
			tk.note(j, now, "running", "", "running on "+j.Sites())
		}
	}
	tk.saveLater(ctx, j)
	return cancels
}

// outcome is how a job ends, held back while its outputs are fetched.
type outcome struct {
	state           JobState
	reason          string
	exit            int
	start, end      time.Time
	kind, site, msg string // the final event
	siteFault       bool   // Job.SiteFault
}

// siteFault says whether a component's failure is its site's: lost, or
// failed without an exit code of its own (a node failure, a job that never
// started). A command that exited non-zero, or ran out of its walltime, is
// the job's own doing.
func siteFault(c Component) bool {
	return c.State == backends.StateLost || c.State == backends.StateFailed && c.ExitCode < 0
}

// finish ends a job with f. A job whose outputs are to be fetched ends only
// once they are here (fetchEnded applies f then), so whoever sees the job
// completed finds its outputs too. The ledger's lock held.
func (tk *tracker) finish(j *Job, f outcome, now time.Time) {
	if j.Req.OutputDir != "" && j.Outputs == nil && len(j.Comps) > 0 && j.final == nil && tk.fetchAllowed(j, now) {
		j.final = &f
		tk.ended = append(tk.ended, j.ID)
		return
	}
	tk.end(j, f, now)
}

// end applies a final outcome. The ledger's lock held.
func (tk *tracker) end(j *Job, f outcome, now time.Time) {
	j.Reason, j.ExitCode, j.SiteFault, j.final = f.reason, f.exit, f.siteFault, nil
	if !f.start.IsZero() {
		j.Start = f.start
	}
	j.End = f.end
	tk.transition(j, f.state, now, f.kind, f.site, f.msg)
	tk.dropResv(j, ResvReleased, "")
}
