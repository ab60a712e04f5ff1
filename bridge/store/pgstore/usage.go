package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

// The users' accounted use (bridge.UsageStore), among the values as in the
// SQLite store (store.EncodeUse), so dumps and restores carry it.

var _ bridge.UsageStore = (*Postgres)(nil)

// PutCharged implements bridge.UsageStore: Put, and the charge added to
// its user's account in the same transaction when this write is the
// first to store j final. Brokers sharing the database add their charges
// under the account row's lock, so none is lost.
func (s *Postgres) PutCharged(ctx context.Context, j *bridge.Job, c bridge.Charge) error {
	if j == nil || j.ID == "" {
		return fmt.Errorf("store: put: %w: a job needs an id", bridge.ErrBadRequest)
	}
	r, err := store.EncodeRow(j, s.opts.Now())
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	r.Charge = &c
	handoff := s.handoff.Load()
	err = s.tx(ctx, func(tx pgx.Tx) error { return putRow(ctx, tx, r, handoff) })
	if err != nil {
		return fmt.Errorf("store: put job %s: %w", j.ID, s.wrap("writing to", err))
	}
	return nil
}

// Usage implements bridge.UsageStore.
func (s *Postgres) Usage(ctx context.Context) (map[string]bridge.UserUse, error) {
	vals, err := s.Values(ctx, bridge.UsageKeyPrefix)
	if err != nil {
		return nil, err
	}
	u, err := store.DecodeUsage(vals)
	if err != nil {
		return u, fmt.Errorf("store %s: %w", s.where, err)
	}
	return u, nil
}

// charge adds r's charge to its user's account (putRow, when the write
// first stores the job final): the account row is made if missing, then
// locked, read and replaced — a concurrent charge waits for this one.
func charge(ctx context.Context, tx pgx.Tx, r *store.Row) error {
	c := r.Charge
	key := bridge.UsageKeyPrefix + c.User
	if _, err := tx.Exec(ctx, `INSERT INTO kv(key, value, updated) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING`,
		key, store.EncodeUse(bridge.UserUse{}), r.Updated); err != nil {
		return err
	}
	var b []byte
	if err := tx.QueryRow(ctx, `SELECT value FROM kv WHERE key = $1 FOR UPDATE`, key).Scan(&b); err != nil {
		return err
	}
	old, err := store.DecodeUse(key, b)
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		return err
	}
	// A damaged account is replaced by this charge rather than failing
	// the job's write (old is then zero).
	_, err = tx.Exec(ctx, `UPDATE kv SET value = $2, updated = $3 WHERE key = $1`, key, store.EncodeUse(old.Add(*c)), r.Updated)
	return err
}
