package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

// SetValue implements bridge.ValueStore.
func (s *Postgres) SetValue(ctx context.Context, key string, value []byte) error {
	if key == "" {
		return fmt.Errorf("store: set value: empty key")
	}
	v := slices.Clone(value)
	if v == nil {
		v = []byte{}
	}
	now := s.opts.Now().UnixNano()
	err := s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO kv(key, value, updated) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated = excluded.updated`, key, v, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: set value %q: %w", key, s.wrap("writing to", err))
	}
	return nil
}

// Value implements bridge.ValueStore.
func (s *Postgres) Value(ctx context.Context, key string) ([]byte, bool, error) {
	var v []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM kv WHERE key = $1`, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: value %q: %w", key, s.wrap("reading", err))
	}
	if v == nil {
		v = []byte{}
	}
	return v, true, nil
}

// Values implements store.Store: a byte range on the key ("C" collation).
func (s *Postgres) Values(ctx context.Context, prefix string) (map[string][]byte, error) {
	rows, err := s.pool.Query(ctx, `SELECT key, value FROM kv WHERE key >= $1 ORDER BY key`, prefix)
	if err != nil {
		return nil, fmt.Errorf("store: values %q: %w", prefix, s.wrap("reading", err))
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var k string
		var v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("store: values %q: %w", prefix, s.wrap("reading", err))
		}
		if !strings.HasPrefix(k, prefix) {
			break
		}
		if v == nil {
			v = []byte{}
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: values %q: %w", prefix, s.wrap("reading", err))
	}
	return out, nil
}

// DeleteValue implements store.Store.
func (s *Postgres) DeleteValue(ctx context.Context, key string) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM kv WHERE key = $1`, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: delete value %q: %w", key, s.wrap("writing to", err))
	}
	return nil
}

// RecordProbe implements store.SiteHealthStore.
func (s *Postgres) RecordProbe(ctx context.Context, p store.SiteProbe) error {
	if err := p.Check(); err != nil {
		return err
	}
	t := p.Time.UnixNano()
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		if p.Err == "" {
			_, err = tx.Exec(ctx, `INSERT INTO sites(name, probed, error, ok_at, nodes, free_nodes, queued, running) VALUES ($1, $2, '', $2, $3, $4, $5, $6)
			ON CONFLICT (name) DO UPDATE SET probed = excluded.probed, error = '', ok_at = excluded.ok_at, nodes = excluded.nodes,
				free_nodes = excluded.free_nodes, queued = excluded.queued, running = excluded.running`,
				p.Site, t, p.Nodes, p.FreeNodes, p.Queued, p.Running)
		} else {
			// An outage is counted when it starts.
			_, err = tx.Exec(ctx, `INSERT INTO sites(name, probed, error, outages) VALUES ($1, $2, $3, 1)
			ON CONFLICT (name) DO UPDATE SET probed = excluded.probed, error = excluded.error,
				outages = sites.outages + CASE WHEN sites.error = '' OR sites.probed IS NULL THEN 1 ELSE 0 END`, p.Site, t, p.Err)
		}
		if err != nil || p.Link == nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE sites SET link_at = $1, bytes_per_s = $2, latency_ns = $3 WHERE name = $4`,
			t, p.Link.BytesPerSec, int64(p.Link.Latency), p.Site)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: record probe of %s: %w", p.Site, s.wrap("writing to", err))
	}
	return nil
}

// SetTrust implements store.SiteHealthStore.
func (s *Postgres) SetTrust(ctx context.Context, site string, trust float64, at time.Time) error {
	if err := store.CheckTrust(site, trust, at); err != nil {
		return err
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO sites(name, trust, trust_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET trust = excluded.trust, trust_at = excluded.trust_at`, site, trust, at.UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("store: set trust of %s: %w", site, s.wrap("writing to", err))
	}
	return nil
}

// SetTrustRecent implements store.SiteHealthStore.
func (s *Postgres) SetTrustRecent(ctx context.Context, site string, trust float64, r store.Recent) error {
	if err := store.CheckTrustRecent(site, trust, r); err != nil {
		return err
	}
	at := r.At.UnixNano()
	err := s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO sites(name, trust, trust_at, recent_at, recent_completed, recent_failed, recent_outages,
		folded_completed, folded_failed, folded_outages) VALUES ($1, $2, $3, $3, $4, $5, $6, $7, $8, $9)
	ON CONFLICT (name) DO UPDATE SET trust = excluded.trust, trust_at = excluded.trust_at, recent_at = excluded.recent_at,
		recent_completed = excluded.recent_completed, recent_failed = excluded.recent_failed, recent_outages = excluded.recent_outages,
		folded_completed = excluded.folded_completed, folded_failed = excluded.folded_failed, folded_outages = excluded.folded_outages`,
			site, trust, at, r.Completed, r.Failed, r.Outages, r.Folded.Completed, r.Folded.Failed, r.Folded.Outages)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: set trust of %s: %w", site, s.wrap("writing to", err))
	}
	return nil
}

func unixNS(v *int64) time.Time {
	if v == nil {
		return time.Time{}
	}
	return time.Unix(0, *v).UTC()
}

// SiteHealth implements store.SiteHealthStore.
func (s *Postgres) SiteHealth(ctx context.Context) ([]store.SiteHealth, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, probed, error, ok_at, nodes, free_nodes, queued, running,
		link_at, bytes_per_s, latency_ns, completed, failed, trust, trust_at, outages,
		recent_at, recent_completed, recent_failed, recent_outages, folded_completed, folded_failed, folded_outages FROM sites ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: site health: %w", s.wrap("reading", err))
	}
	defer rows.Close()
	var out []store.SiteHealth
	for rows.Next() {
		var h store.SiteHealth
		var probed, okAt, linkAt, latency, trustAt, recentAt *int64
		var rate, trust *float64
		var nodes, free, queued, running int64
		var r store.Recent
		if err := rows.Scan(&h.Site, &probed, &h.LastErr, &okAt, &nodes, &free, &queued, &running,
			&linkAt, &rate, &latency, &h.Completed, &h.Failed, &trust, &trustAt, &h.Outages,
			&recentAt, &r.Completed, &r.Failed, &r.Outages, &r.Folded.Completed, &r.Folded.Failed, &r.Folded.Outages); err != nil {
			return nil, fmt.Errorf("store: site health: %w", s.wrap("reading", err))
		}
		h.Nodes, h.FreeNodes, h.Queued, h.Running = int(nodes), int(free), int(queued), int(running)
		if recentAt != nil {
			r.At = unixNS(recentAt)
			h.Recent = &r
		}
		h.LastProbe, h.LastOK, h.LinkAt, h.TrustAt = unixNS(probed), unixNS(okAt), unixNS(linkAt), unixNS(trustAt)
		if rate != nil && linkAt != nil {
			var lat int64
			if latency != nil {
				lat = *latency
			}
			h.Link = &store.Link{BytesPerSec: *rate, Latency: time.Duration(lat)}
		}
		h.Trust = trust
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: site health: %w", s.wrap("reading", err))
	}
	return out, nil
}

// Reservations implements store.Store.
func (s *Postgres) Reservations(ctx context.Context, active bool) ([]store.ResvRecord, error) {
	q := `SELECT j.id, r.state, r.earliest, r.latest, r.nodes, r.site, r.start, r.native, r.reason
		FROM reservations AS r JOIN jobs AS j ON j.seq = r.seq`
	if active {
		q += ` WHERE r.state IN ('admitted', 'binding', 'bound')`
	}
	rows, err := s.pool.Query(ctx, q+` ORDER BY r.earliest, r.seq`)
	if err != nil {
		return nil, fmt.Errorf("store: reservations: %w", s.wrap("reading", err))
	}
	defer rows.Close()
	var out []store.ResvRecord
	for rows.Next() {
		var r store.ResvRecord
		var st string
		var et, lt, nodes int64
		var start *int64
		if err := rows.Scan(&r.Job, &st, &et, &lt, &nodes, &r.Site, &start, &r.Native, &r.Reason); err != nil {
			return nil, fmt.Errorf("store: reservations: %w", s.wrap("reading", err))
		}
		r.Nodes = int(nodes)
		r.State, r.Earliest, r.Latest, r.Start = bridge.ResvState(st), time.Unix(0, et).UTC(), time.Unix(0, lt).UTC(), unixNS(start)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reservations: %w", s.wrap("reading", err))
	}
	return out, nil
}

// healthKey is the value the health probe writes.
const healthKey = "store.health_probe"

// Health implements store.Store: the server answers, the schema is one
// this binary knows, the database is not read-only (a standby), and a
// one-row write commits. The answer is reused for Options.HealthEvery.
func (s *Postgres) Health(ctx context.Context) error {
	if s.isClosed() {
		return fmt.Errorf("store %s: %w", s.where, store.ErrClosed)
	}
	s.hMu.Lock()
	defer s.hMu.Unlock()
	now := time.Now()
	if !s.hAt.IsZero() && now.Sub(s.hAt) < s.opts.HealthEvery {
		return s.hErr
	}
	err := s.probe(ctx)
	if ctx.Err() != nil {
		return err
	}
	if err != nil {
		err = fmt.Errorf("store: health: %w", err)
	}
	s.hAt, s.hErr = now, err
	return err
}

func (s *Postgres) probe(ctx context.Context) error {
	var v int
	var standby bool
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT max(version) FROM gridsub_migrations), pg_is_in_recovery()`).Scan(&v, &standby); err != nil {
		return s.wrap("reading", err)
	}
	if v > SchemaVersion {
		return fmt.Errorf("%w: %s now has schema %d (a newer gridsub migrated it), this one knows %d", store.ErrNewerSchema, s.where, v, SchemaVersion)
	}
	if standby {
		return fmt.Errorf("%s: %w (%w: the server is a standby in recovery)", s.where, store.ErrReadOnly, store.ErrUnavailable)
	}
	b, _ := time.Now().UTC().MarshalText()
	return s.SetValue(ctx, healthKey, b)
}

// Verify is gridsub store check for PostgreSQL: the schema version, that
// every job's body decodes, that each job's n_events matches its events,
// and that every reservation and site row refers to a job. It reads one
// snapshot and writes nothing; problems come back in the report, with an
// error wrapping store.ErrCorrupt.
func (s *Postgres) Verify(ctx context.Context) (*store.Report, error) {
	start := time.Now()
	rep := &store.Report{Path: s.where, Check: "postgres verify"}
	err := s.read(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT max(version) FROM gridsub_migrations`).Scan(&rep.Schema); err != nil {
			return err
		}
		var bytes int64
		if err := tx.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&bytes); err != nil {
			return err
		}
		rep.Bytes = bytes
		rows, err := tx.Query(ctx, `SELECT id, body FROM jobs ORDER BY seq`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			var body []byte
			if err := rows.Scan(&id, &body); err != nil {
				rows.Close()
				return err
			}
			rep.Jobs++
			var j bridge.Job
			if err := json.Unmarshal(body, &j); err != nil && len(rep.Problems) < 20 {
				rep.Problems = append(rep.Problems, fmt.Sprintf("job %s: unreadable body: %v", id, err))
			} else if err == nil && j.ID != id && len(rep.Problems) < 20 {
				rep.Problems = append(rep.Problems, fmt.Sprintf("job %s: its body is job %q", id, j.ID))
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT j.id, j.n_events, count(e.n) FROM jobs AS j LEFT JOIN events AS e ON e.seq = j.seq
			GROUP BY j.seq, j.id, j.n_events HAVING count(e.n) <> j.n_events ORDER BY j.seq LIMIT 20`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			var want, got int64
			if err := rows.Scan(&id, &want, &got); err != nil {
				rows.Close()
				return err
			}
			rep.Problems = append(rep.Problems, fmt.Sprintf("job %s: %d events stored, %d recorded", id, got, want))
		}
		rows.Close()
		return rows.Err()
	})
	rep.Took = time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("store: check: %w", s.wrap("reading", err))
	}
	if len(rep.Problems) > 20 {
		rep.Problems = rep.Problems[:20]
	}
	if rep.Schema > SchemaVersion {
		return rep, fmt.Errorf("%w: %s has schema %d, this gridsub knows %d", store.ErrNewerSchema, s.where, rep.Schema, SchemaVersion)
	}
	if len(rep.Problems) > 0 {
		return rep, fmt.Errorf("%w: %s: %d problems (restore a dump: gridsub store restore FILE)", store.ErrCorrupt, s.where, len(rep.Problems))
	}
	return rep, nil
}
