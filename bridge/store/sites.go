package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/gridsub/gridsub/bridge"
)

// SiteProbe is one health probe of a site as the daemon's health task
// makes it: the site's Info (or why it could not be had) and the link
// estimate the site's backend has measured so far.
type SiteProbe struct {
	Site string
	Time time.Time // when the probe was made
	// Err says why the probe failed; "" means it succeeded. The numbers
	// below are ignored when it is set.
	Err                               string
	Nodes, FreeNodes, Queued, Running int
	// Link is the transfer cost measured so far (backends.LinkEstimator);
	// nil when nothing was measured. It is recorded whether or not the
	// probe succeeded.
	Link *Link
}

// Link is a measured transfer cost to a site: seconds = Latency +
// bytes / BytesPerSec.
type Link struct {
	BytesPerSec float64
	Latency     time.Duration
}

// SiteHealth is what the store holds about one site.
type SiteHealth struct {
	Site      string
	LastProbe time.Time // the last probe, successful or not; zero: never probed
	LastErr   string    // the last probe's error; "" when it succeeded
	// LastOK is the last successful probe; zero: the site never answered.
	// The numbers are those it reported then: a failed probe keeps them.
	LastOK                            time.Time
	Nodes, FreeNodes, Queued, Running int
	// Link is the last measured transfer cost and LinkAt the probe that
	// recorded it; nil and zero until something was measured.
	Link   *Link
	LinkAt time.Time
	// Completed and Failed count the jobs that reached that final state
	// with a component at this site (Failed: through the site's fault,
	// bridge.Job.SiteFault), since the file was created (counted
	// by Put; ended jobs of a version-2 file are counted when it is
	// migrated). Pruning old jobs does not lower them.
	Completed, Failed int64
	// Outages counts the times a probe found the site unreachable after a
	// good probe (or none): one per outage, however long (since schema
	// version 4).
	Outages int64
	// Trust is the site's trust score as a trust policy last computed it
	// (SPEC.md §3) at TrustAt; nil: not computed.
	Trust   *float64
	TrustAt time.Time
	// Recent is the outcome counts with older outcomes weighing less, as
	// the trust task last decayed them (SetTrustRecent); nil: never
	// (since schema version 5).
	Recent *Recent
}

// Counts are a site's raw outcome counts (SiteHealth's Completed, Failed
// and Outages).
type Counts struct{ Completed, Failed, Outages int64 }

// Recent is a site's outcome counts with older ones decayed: Completed,
// Failed and Outages as of At, the raw counts up to Folded included. The
// next decay multiplies them by the decay over the time since At and adds
// the raw counts beyond Folded.
type Recent struct {
	Completed, Failed, Outages float64
	At                         time.Time
	Folded                     Counts
}

// SiteHealthStore is the durable record of the sites' health beside the
// jobs. *SQLite implements it.
//
// Contract: RecordProbe stores one probe, committed before it returns. A
// successful probe replaces the site's numbers and clears its error; a
// failed probe records its time and error only, so the numbers of the last
// successful probe stay (LastOK says when they were true). A probe's Link
// replaces the stored one; a probe without a Link leaves it. SetTrust
// stores a trust score computed by a policy (finite, >= 0), and
// SetTrustRecent that score with the decayed counts it came from. SiteHealth
// returns every site the store has a record of, by name; a site never
// probed nor counted has none. Outcome counts are kept by Put itself.
type SiteHealthStore interface {
	RecordProbe(ctx context.Context, p SiteProbe) error
	SetTrust(ctx context.Context, site string, trust float64, at time.Time) error
	SetTrustRecent(ctx context.Context, site string, trust float64, r Recent) error
	SiteHealth(ctx context.Context) ([]SiteHealth, error)
}

var _ SiteHealthStore = (*SQLite)(nil)

// The site statements of the commit loop (prepared with the others).
const (
	qProbeOK = `INSERT INTO sites(name, probed, error, ok_at, nodes, free_nodes, queued, running) VALUES (?, ?, '', ?, ?, ?, ?, ?)
	ON CONFLICT(name) DO UPDATE SET probed = excluded.probed, error = '', ok_at = excluded.ok_at, nodes = excluded.nodes,
		free_nodes = excluded.free_nodes, queued = excluded.queued, running = excluded.running`
	// An outage is counted when it starts: a failed probe after a good
	// one (or none), not every failed probe of a long outage.
	qProbeErr = `INSERT INTO sites(name, probed, error, outages) VALUES (?, ?, ?, 1)
	ON CONFLICT(name) DO UPDATE SET probed = excluded.probed, error = excluded.error,
		outages = outages + (sites.error = '' OR sites.probed IS NULL)`
	qProbeLink = `UPDATE sites SET link_at = ?, bytes_per_s = ?, latency_ns = ? WHERE name = ?`
	qTrust     = `INSERT INTO sites(name, trust, trust_at) VALUES (?, ?, ?)
	ON CONFLICT(name) DO UPDATE SET trust = excluded.trust, trust_at = excluded.trust_at`
	qTrustRecent = `INSERT INTO sites(name, trust, trust_at, recent_at, recent_completed, recent_failed, recent_outages,
		folded_completed, folded_failed, folded_outages) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT(name) DO UPDATE SET trust = excluded.trust, trust_at = excluded.trust_at, recent_at = excluded.recent_at,
		recent_completed = excluded.recent_completed, recent_failed = excluded.recent_failed, recent_outages = excluded.recent_outages,
		folded_completed = excluded.folded_completed, folded_failed = excluded.folded_failed, folded_outages = excluded.folded_outages`
	qOutcome = `INSERT INTO sites(name, completed, failed) VALUES (?, ?, ?)
	ON CONFLICT(name) DO UPDATE SET completed = completed + excluded.completed, failed = failed + excluded.failed`
)

// Check refuses a probe no store may record (bridge.ErrBadRequest, with
// the reason): no site or time, negative counts, a link without a finite
// positive rate.
func (p SiteProbe) Check() error {
	switch {
	case p.Site == "":
		return fmt.Errorf("store: record probe: %w: no site name", bridge.ErrBadRequest)
	case p.Time.IsZero():
		return fmt.Errorf("store: record probe of %s: %w: no probe time", p.Site, bridge.ErrBadRequest)
	case p.Err == "" && (p.Nodes < 0 || p.FreeNodes < 0 || p.Queued < 0 || p.Running < 0):
		return fmt.Errorf("store: record probe of %s: %w: negative counts (nodes %d, free %d, queued %d, running %d); want >= 0",
			p.Site, bridge.ErrBadRequest, p.Nodes, p.FreeNodes, p.Queued, p.Running)
	case p.Link != nil && (!(p.Link.BytesPerSec > 0) || math.IsInf(p.Link.BytesPerSec, 0) || p.Link.Latency < 0):
		return fmt.Errorf("store: record probe of %s: %w: link %g bytes/s, latency %s; want a finite rate > 0 and a latency >= 0",
			p.Site, bridge.ErrBadRequest, p.Link.BytesPerSec, p.Link.Latency)
	}
	return nil
}

// RecordProbe implements SiteHealthStore.
func (s *SQLite) RecordProbe(ctx context.Context, p SiteProbe) error {
	if err := p.Check(); err != nil {
		return err
	}
	t := p.Time.UnixNano()
	err := s.write(ctx, func(w *wtx) error {
		var err error
		if p.Err == "" {
			err = w.exec(qProbeOK, p.Site, t, t, p.Nodes, p.FreeNodes, p.Queued, p.Running)
		} else {
			err = w.exec(qProbeErr, p.Site, t, p.Err)
		}
		if err != nil || p.Link == nil {
			return err
		}
		return w.exec(qProbeLink, t, p.Link.BytesPerSec, int64(p.Link.Latency), p.Site)
	})
	if err != nil {
		return fmt.Errorf("store: record probe of %s: %w", p.Site, s.wrap("writing", err))
	}
	return nil
}

// SetTrust implements SiteHealthStore.
func (s *SQLite) SetTrust(ctx context.Context, site string, trust float64, at time.Time) error {
	if err := CheckTrust(site, trust, at); err != nil {
		return err
	}
	err := s.write(ctx, func(w *wtx) error { return w.exec(qTrust, site, trust, at.UnixNano()) })
	if err != nil {
		return fmt.Errorf("store: set trust of %s: %w", site, s.wrap("writing", err))
	}
	return nil
}

// CheckTrust refuses a trust write without a site name, with a score that
// is not a finite value >= 0, or without a computation time: the check of
// every store's SetTrust.
func CheckTrust(site string, trust float64, at time.Time) error {
	switch {
	case site == "":
		return fmt.Errorf("store: set trust: %w: no site name", bridge.ErrBadRequest)
	case !finite(trust):
		return fmt.Errorf("store: set trust of %s: %w: %g; want a finite value >= 0", site, bridge.ErrBadRequest, trust)
	case at.IsZero():
		return fmt.Errorf("store: set trust of %s: %w: no computation time", site, bridge.ErrBadRequest)
	}
	return nil
}

// finite reports whether v is a finite number >= 0.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// CheckTrustRecent is CheckTrust for a score computed at r.At, and
// refuses decayed counts that are not finite values >= 0: the check of
// every store's SetTrustRecent.
func CheckTrustRecent(site string, trust float64, r Recent) error {
	if err := CheckTrust(site, trust, r.At); err != nil {
		return err
	}
	if !finite(r.Completed) || !finite(r.Failed) || !finite(r.Outages) || r.Folded.Completed < 0 || r.Folded.Failed < 0 || r.Folded.Outages < 0 {
		return fmt.Errorf("store: set trust of %s: %w: recent counts %+v; want finite values >= 0", site, bridge.ErrBadRequest, r)
	}
	return nil
}

// SetTrustRecent implements SiteHealthStore: the score, computed at r.At,
// and the decayed counts it was computed from, in one write.
func (s *SQLite) SetTrustRecent(ctx context.Context, site string, trust float64, r Recent) error {
	if err := CheckTrustRecent(site, trust, r); err != nil {
		return err
	}
	at := r.At.UnixNano()
	err := s.write(ctx, func(w *wtx) error {
		return w.exec(qTrustRecent, site, trust, at, at, r.Completed, r.Failed, r.Outages, r.Folded.Completed, r.Folded.Failed, r.Folded.Outages)
	})
	if err != nil {
		return fmt.Errorf("store: set trust of %s: %w", site, s.wrap("writing", err))
	}
	return nil
}

// SiteHealth implements SiteHealthStore.
func (s *SQLite) SiteHealth(ctx context.Context) ([]SiteHealth, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT name, probed, error, ok_at, nodes, free_nodes, queued, running,
		link_at, bytes_per_s, latency_ns, completed, failed, trust, trust_at, outages,
		recent_at, recent_completed, recent_failed, recent_outages, folded_completed, folded_failed, folded_outages FROM sites ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: site health: %w", s.wrap("reading", err))
	}
	defer rows.Close()
	var out []SiteHealth
	for rows.Next() {
		var h SiteHealth
		var probed, okAt, linkAt, latency, trustAt, recentAt sql.NullInt64
		var rate, trust sql.NullFloat64
		var r Recent
		if err := rows.Scan(&h.Site, &probed, &h.LastErr, &okAt, &h.Nodes, &h.FreeNodes, &h.Queued, &h.Running,
			&linkAt, &rate, &latency, &h.Completed, &h.Failed, &trust, &trustAt, &h.Outages,
			&recentAt, &r.Completed, &r.Failed, &r.Outages, &r.Folded.Completed, &r.Folded.Failed, &r.Folded.Outages); err != nil {
			return nil, fmt.Errorf("store: site health: %w", s.wrap("reading", err))
		}
		if recentAt.Valid {
			r.At = unixNS(recentAt)
			h.Recent = &r
		}
		h.LastProbe, h.LastOK, h.LinkAt, h.TrustAt = unixNS(probed), unixNS(okAt), unixNS(linkAt), unixNS(trustAt)
		if rate.Valid && linkAt.Valid {
			h.Link = &Link{BytesPerSec: rate.Float64, Latency: time.Duration(latency.Int64)}
		}
		if trust.Valid {
			v := trust.Float64
			h.Trust = &v
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: site health: %w", s.wrap("reading", err))
	}
	return out, nil
}

// unixNS is a stored time (unix nanoseconds, UTC); NULL is the zero time.
func unixNS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.Unix(0, v.Int64).UTC()
}

// countOutcome counts a job that completed, or failed through its site's
// fault (bridge.Job.SiteFault), at each of its sites: a command that
// failed or ran out of its walltime says nothing of the site, so it is not
// counted. putRow calls it once per job, on the Put that first stores that
// final state.
func countOutcome(w *wtx, r *Row) error {
	done, failed, ok := r.Outcome()
	if !ok {
		return nil
	}
	for _, site := range r.SiteSet {
		if err := w.exec(qOutcome, site, done, failed); err != nil {
			return err
		}
	}
	return nil
}

// ResvRecord is one row of the reservations table: a job that asked for an
// advance reservation, and where its reservation stands.
type ResvRecord struct {
	Job              string
	State            bridge.ResvState
	Earliest, Latest time.Time
	Nodes            int
	Site             string    // "" until bound
	Start            time.Time // zero until bound
	Native           string    // the site's reservation id
	Reason           string
}

// Reservations lists the stored reservations, earliest window first; with
// active set, only those not yet released or failed.
func (s *SQLite) Reservations(ctx context.Context, active bool) ([]ResvRecord, error) {
	q := `SELECT j.id, r.state, r.earliest, r.latest, r.nodes, r.site, r.start, r.native, r.reason
		FROM reservations AS r JOIN jobs AS j ON j.seq = r.seq`
	if active {
		q += ` WHERE r.state IN ('admitted', 'binding', 'bound')`
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY r.earliest, r.seq`)
	if err != nil {
		return nil, fmt.Errorf("store: reservations: %w", s.wrap("reading", err))
	}
	defer rows.Close()
	var out []ResvRecord
	for rows.Next() {
		var r ResvRecord
		var st string
		var et, lt int64
		var start sql.NullInt64
		if err := rows.Scan(&r.Job, &st, &et, &lt, &r.Nodes, &r.Site, &start, &r.Native, &r.Reason); err != nil {
			return nil, fmt.Errorf("store: reservations: %w", s.wrap("reading", err))
		}
		r.State, r.Earliest, r.Latest, r.Start = bridge.ResvState(st), time.Unix(0, et).UTC(), time.Unix(0, lt).UTC(), unixNS(start)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reservations: %w", s.wrap("reading", err))
	}
	return out, nil
}
