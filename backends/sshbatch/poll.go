package sshbatch

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// EndingGrace is how long a job that left the queue listing may stay
// "ending" — no rung of the ladder (accounting, the controller's memory,
// the exit-code file) has a record of it yet — before it is StateLost.
// Accounting lags the controller by seconds; a job that has no record
// anywhere after this long is gone.
const EndingGrace = 5 * time.Minute

// endingReason starts the Reason of a job no rung has confirmed yet.
const endingReason = "ending: left the queue listing, not confirmed yet"

// pollState is the site's poll schedule and what the last polls saw. The
// Backend's mu guards it.
type pollState struct {
	last      time.Time                             // the last routine poll sent
	fastUntil time.Time                             // polls are fast until then (a submission, a change)
	nextEnd   time.Time                             // the earliest expected end of a running job (zero: none)
	known     map[backends.JobID]backends.JobStatus // the last status of each live job polled
	ending    map[backends.JobID]time.Time          // jobs no rung confirmed yet: since when

	info      *backends.SiteInfo // the last capacity report
	infoErr   error              // the last capacity report's error (nil: info holds)
	infoAt    time.Time          // when it was taken (zero: never)
	infoStale bool               // a job was seen to start or end since
}

// Budget is the site's command budget (for its back-off hook).
func (b *Backend) Budget() *Budget { return b.bud }

// CommandStats implements backends.CommandCounter.
func (b *Backend) CommandStats() backends.CommandStats { return b.bud.Stats() }

// Remember implements backends.Rememberer: the job directory of a remote
// job submitted with the given tag and component, after a restart.
func (b *Backend) Remember(id backends.JobID, gridID string, component, components int) {
	if !b.d.ValidJobID(string(id)) || !ValidGridID(gridID) {
		return
	}
	dir := path.Join(b.RemoteDir(), JobDir(&backends.JobSpec{GridID: gridID, Component: component, Components: components}))
	b.mu.Lock()
	if _, ok := b.dirs[id]; !ok {
		b.dirs[id] = dir
	}
	b.mu.Unlock()
}

// submitted makes the polls fast for a while: the new jobs will change.
func (b *Backend) submitted() {
	now := b.cfg.Now()
	b.mu.Lock()
	b.poll.fastUntil = now.Add(b.bud.cfg.Settle)
	b.mu.Unlock()
}

// pollDue says whether a routine poll of ids goes now: nil, or why not
// (ErrDeferred: not due or no token; ErrUnavailable: backing off).
func (b *Backend) pollDue(ids []backends.JobID) error {
	if err := b.bud.BackingOff(); err != nil {
		return fmt.Errorf("%s: %w", b.cfg.Name, err)
	}
	cfg := b.bud.cfg
	now := b.cfg.Now()
	b.mu.Lock()
	p := &b.poll
	fast := now.Before(p.fastUntil) || !p.nextEnd.IsZero() && !now.Before(p.nextEnd) || len(p.ending) > 0
	for _, id := range ids {
		if fast {
			break
		}
		_, ok := p.known[id]
		fast = !ok
	}
	iv := cfg.PollSlow
	if fast {
		iv = cfg.PollFast
	}
	next := p.last.Add(iv)
	b.mu.Unlock()
	if !p.last.IsZero() && now.Before(next) {
		b.bud.Defer()
		return fmt.Errorf("%w: next status poll of %s due in %s", backends.ErrDeferred, b.cfg.Name, next.Sub(now).Round(time.Second))
	}
	if err := b.bud.Allow(); err != nil {
		return fmt.Errorf("%s: %w", b.cfg.Name, err)
	}
	b.mu.Lock()
	p.last = now
	b.mu.Unlock()
	return nil
}

// polled takes what a poll answered: the live jobs' last states, their
// expected ends, and whether anything changed (polls then stay fast, and
// the next capacity report is taken afresh).
func (b *Backend) polled(out []backends.JobStatus) {
	now := b.cfg.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	p := &b.poll
	known := make(map[backends.JobID]backends.JobStatus, len(out))
	changed := false
	p.nextEnd = time.Time{}
	for _, st := range out {
		prev, had := p.known[st.ID]
		if had && prev.State != st.State {
			changed = true
		}
		if !strings.HasPrefix(st.Reason, endingReason) {
			delete(p.ending, st.ID)
		}
		if st.State.Final() {
			changed = changed || had
			continue
		}
		known[st.ID] = st
		if st.State == backends.StateRunning && st.End.After(now) && (p.nextEnd.IsZero() || st.End.Before(p.nextEnd)) {
			p.nextEnd = st.End
		}
	}
	for id := range p.ending {
		if _, ok := known[id]; !ok {
			delete(p.ending, id) // no longer asked about
		}
	}
	p.known = known
	if changed {
		p.fastUntil = now.Add(b.bud.cfg.Settle)
		p.infoStale = true
	}
}

// unconfirmed is the status of a job that no rung of the ladder has a
// record of. A job this backend saw alive, or whose tag the broker handed
// back (Remember), left the queue listing: its last state, "ending", until
// EndingGrace has passed since it was first missed; then StateLost. An id
// it never knew (never submitted here, not a job id at all) is StateLost
// at once.
func (b *Backend) unconfirmed(id backends.JobID, why string) backends.JobStatus {
	now := b.cfg.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	p := &b.poll
	_, seen := p.known[id]
	_, mine := b.dirs[id]
	if _, ending := p.ending[id]; !seen && !mine && !ending {
		return backends.JobStatus{ID: id, State: backends.StateLost, ExitCode: -1, Reason: why}
	}
	if p.ending == nil {
		p.ending = map[backends.JobID]time.Time{}
	}
	since, ok := p.ending[id]
	if !ok {
		since = now
		p.ending[id] = now
	}
	if now.Sub(since) >= EndingGrace {
		delete(p.ending, id)
		return backends.JobStatus{ID: id, State: backends.StateLost, ExitCode: -1,
			Reason: fmt.Sprintf("%s for %s", why, now.Sub(since).Round(time.Second))}
	}
	st := backends.JobStatus{ID: id, State: backends.StateRunning, ExitCode: -1}
	if prev, ok := p.known[id]; ok {
		st = prev
		st.ExitCode = -1
	}
	st.Reason = endingReason + " (" + why + ")"
	// Still live for the next poll: it is asked about again, soon.
	if p.known == nil {
		p.known = map[backends.JobID]backends.JobStatus{}
	}
	p.known[id] = st
	return st
}

// cachedInfo answers a routine Info from the last report when that will
// do: ok false means ask the site.
func (b *Backend) cachedInfo() (*backends.SiteInfo, error, bool) {
	cfg := b.bud.cfg
	now := b.cfg.Now()
	b.mu.Lock()
	p := &b.poll
	if p.infoAt.IsZero() {
		b.mu.Unlock()
		return nil, nil, false
	}
	age := now.Sub(p.infoAt)
	fresh := age < cfg.CapacityEvery && !(p.infoStale && age >= cfg.PollFast)
	in, ierr := copyInfo(p.info), p.infoErr
	b.mu.Unlock()
	if err := b.bud.BackingOff(); err != nil {
		// The site did not answer (or said it is overloaded) a moment
		// ago: it is down for the broker until the back-off ends.
		return nil, fmt.Errorf("%s: %w", b.cfg.Name, err), true
	}
	// A site whose last command went unanswered gets no report from the
	// past: it is asked (when a token is left) or down.
	failing := b.bud.Failing()
	if fresh && !failing {
		if ierr != nil {
			return nil, ierr, true
		}
		return in, nil, true
	}
	if err := b.bud.Allow(); err != nil {
		if in != nil && ierr == nil && !failing && !errors.Is(err, backends.ErrUnavailable) {
			return in, nil, true // out of tokens: the last report
		}
		if failing && !errors.Is(err, backends.ErrUnavailable) {
			err = fmt.Errorf("%w: its last command went unanswered (%w)", backends.ErrUnavailable, err)
		}
		return nil, fmt.Errorf("%s: %w", b.cfg.Name, err), true
	}
	return nil, nil, false
}

// infoTaken keeps a capacity report (or its error) for cachedInfo.
func (b *Backend) infoTaken(in *backends.SiteInfo, err error) {
	now := b.cfg.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	p := &b.poll
	p.infoAt, p.infoStale, p.infoErr = now, false, err
	if err == nil {
		p.info = copyInfo(in)
	}
}

// copyInfo is a deep copy (nil for nil).
func copyInfo(in *backends.SiteInfo) *backends.SiteInfo {
	if in == nil {
		return nil
	}
	c := *in
	c.Partitions = slices.Clone(in.Partitions)
	c.Busy = slices.Clone(in.Busy)
	return &c
}
