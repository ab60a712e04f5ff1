package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport"
)

// poller is the poll stage. It asks every site that does not push its
// changes, in one batched Status call, for the state of the live components
// it runs, takes the changes the pushing sites reported (Notify), and folds
// both into the components. The jobs that changed go to the track stage
// (cycleState.touched), in the order of their first change. A site may
// defer a routine poll (backends.ErrDeferred: its poll schedule or command
// budget says not yet): that is no news, not a failure. A site whose
// status calls keep failing has its components marked unknown (detectDown,
// outage.go).
type poller struct {
	part
	*duties   // the cancels owed for the components a site lost
	*remapper // the sites' estimated starts of waiting components
}

// run is the poll stage (see poller). It writes cs.touched, and a site's
// failed status call to cs.rep.
func (p *poller) run(ctx context.Context, cs *cycleState) {
	now := cs.now
	p.mu.Lock()
	var groups [][]pollGroup
	if p.polling {
		groups = make([][]pollGroup, len(p.sites))
		for _, id := range p.live {
			j := p.jobs[id]
			for _, c := range j.Comps {
				if s := p.siteIdx[c.Site]; !c.State.Final() && !p.sites[s].Pushes && c.RemoteID != "" {
					groups[s] = addToGroup(groups[s], p.identityOwner(j), c.RemoteID)
				}
			}
		}
	}
	p.mu.Unlock()

	// ids[s] are the jobs of site s whose statuses came back, in the
	// order of results[s]. A site's jobs are asked about once per owner
	// with an identity of their own (Options.Identities), through that
	// identity; the rest in one call through the site's backend. A site
	// has failed (errs[s]) when none of its calls answered for a reason
	// of the site's; a call that failed for a reason of one user's own
	// (their identity unusable, their login refused: userFault), or while
	// another call answered, is that user's trouble, reported beside
	// (userErrs[s]), and their jobs have no news.
	var ids [][]backends.JobID
	var results [][]backends.JobStatus
	var errs []error
	var userErrs [][]error
	if groups != nil {
		ids = make([][]backends.JobID, len(p.sites))
		results = make([][]backends.JobStatus, len(p.sites))
		errs = make([]error, len(p.sites))
		userErrs = make([][]error, len(p.sites))
		p.eachSite(func(s int) {
			var failed []error
			answered := false
			for _, g := range groups[s] {
				st, err := p.pollGroup(ctx, s, g)
				switch {
				case errors.Is(err, backends.ErrDeferred):
					// Not asked this cycle (the site's poll schedule or
					// command budget): no news, and no failure either.
				case err != nil && g.owner != "" && userFault(err):
					userErrs[s] = append(userErrs[s], fmt.Errorf("jobs of user %s: %w", g.owner, err))
				case err != nil:
					if g.owner != "" {
						err = fmt.Errorf("jobs of user %s: %w", g.owner, err)
					}
					failed = append(failed, err)
				default:
					answered = true
					ids[s] = append(ids[s], g.ids...)
					results[s] = append(results[s], st...)
				}
			}
			switch {
			case len(failed) == 0:
			case answered:
				userErrs[s] = append(userErrs[s], failed...)
			default:
				errs[s] = errors.Join(failed...)
			}
		})
	}
	notes := p.takeNotes()
	defer p.spare(notes)

	p.mu.Lock()
	defer p.mu.Unlock()
	p.noteBackoffs(ctx, now)
	touched := p.detectDown(ctx, results, errs, now)
	for _, n := range notes {
		if j := p.apply(n.site, n.st, now); j != nil {
			touched = append(touched, j)
		}
	}
	for s := range results {
		for _, err := range userErrs[s] {
			cs.rep.Errors = append(cs.rep.Errors, fmt.Errorf("site %s: status: %w", p.sites[s].Name, err))
			p.log.Warn("status poll failed", "site", p.sites[s].Name, "err", err)
		}
		if errs[s] != nil {
			cs.rep.Errors = append(cs.rep.Errors, fmt.Errorf("site %s: status: %w", p.sites[s].Name, errs[s]))
			lvl := slog.LevelWarn
			if p.outageGoesOn(s, now) { // said once per outage
				lvl = slog.LevelDebug
			}
			p.log.Log(ctx, lvl, "status poll failed", "site", p.sites[s].Name, "err", errs[s])
			continue
		}
		cs.rep.Polled += len(results[s])
		for i, st := range results[s] {
			st.ID = ids[s][i] // answers come in request order; trust the order, not the echo
			if j := p.apply(s, st, now); j != nil {
				touched = append(touched, j)
			}
		}
	}
	cs.touched = touched
}

// pollGroup is the remote jobs of one site polled through one owner's
// identity ("" for the site's own backend).
type pollGroup struct {
	owner string
	ids   []backends.JobID
}

// addToGroup adds id to owner's group among gs (a site has few owners with
// identities of their own: a linear scan).
func addToGroup(gs []pollGroup, owner string, id backends.JobID) []pollGroup {
	for k := range gs {
		if gs[k].owner == owner {
			gs[k].ids = append(gs[k].ids, id)
			return gs
		}
	}
	return append(gs, pollGroup{owner: owner, ids: []backends.JobID{id}})
}

// userFault reports whether a call made through a user's own identity
// failed for a reason of that user's, not the site's: the identity could
// not be used (ErrIdentity) or the site refused the user's login
// (transport.ErrAuth).
func userFault(err error) bool {
	return errors.Is(err, ErrIdentity) || errors.Is(err, transport.ErrAuth)
}

// pollGroup asks site s for the statuses of g's jobs, in one Status call
// through g's owner's backend.
func (p *poller) pollGroup(ctx context.Context, s int, g pollGroup) ([]backends.JobStatus, error) {
	be, err := p.backendFor(ctx, s, g.owner)
	if err != nil {
		return nil, err
	}
	st, err := be.Status(ctx, g.ids)
	if err == nil && len(st) != len(g.ids) {
		err = fmt.Errorf("%w: %d statuses for %d jobs", backends.ErrBadOutput, len(st), len(g.ids))
	}
	return st, err
}

// apply records one component status and returns its job the first time the
// job changes in this cycle (nil otherwise). The ledger's lock held.
func (p *poller) apply(site int, st backends.JobStatus, now time.Time) *Job {
	id, ok := p.where[compKey{site, st.ID}]
	if !ok {
		return nil
	}
	p.noteEstimate(site, st)
	j := p.jobs[id]
	if j.State != Dispatched && j.State != Running {
		return nil
	}
	name := p.sites[site].Name
	for k := range j.Comps {
		c := &j.Comps[k]
		if c.Site != name || c.RemoteID != st.ID || c.State.Final() || st.State == c.State {
			continue
		}
		c.State, c.Reason = st.State, st.Reason
		if st.State.Final() {
			c.ExitCode = st.ExitCode
			c.End = orNow(st.End, now)
			p.noteLoss(site, st, now)
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

// noteBackoffs says so in events when a site's command budget starts
// backing off after an overload or rate-limit answer (or none): once per
// back-off, on every live job at the site, with the site's words and when
// it is asked again. The ledger's lock held.
func (p *poller) noteBackoffs(ctx context.Context, now time.Time) {
	if p.backoffSeen == nil {
		p.backoffSeen = make([]bool, len(p.sites))
	}
	for s := range p.sites {
		cc, ok := backends.AsCommandCounter(p.sites[s].Backend)
		if !ok {
			continue
		}
		st := cc.CommandStats()
		on := !st.BackoffUntil.IsZero()
		if on == p.backoffSeen[s] {
			continue
		}
		p.backoffSeen[s] = on
		name := p.sites[s].Name
		if !on {
			p.log.Info("site answers again; back-off over", "site", name)
			continue
		}
		msg := fmt.Sprintf("backing off from %s until %s (routine polls wait; the site said: %s)", name,
			st.BackoffUntil.UTC().Format(time.RFC3339), st.BackoffReason)
		p.log.Warn("backing off from a site", "site", name, "until", st.BackoffUntil, "reason", st.BackoffReason)
		for _, id := range p.live {
			j := p.jobs[id]
			if j == nil || (j.State != Dispatched && j.State != Running) {
				continue
			}
			if slices.ContainsFunc(j.Comps, func(c Component) bool { return c.Site == name && !c.State.Final() }) {
				p.record(ctx, j, now, "site-backoff", name, msg)
			}
		}
	}
}
