package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gridsub/gridsub/bridge"
)

// The users' accounted use (bridge.UsageStore) lives among the values, one
// key per user (bridge.UsageKeyPrefix + user), so backups, dumps and
// restores carry it with the rest. PutCharged adds a job's charge in the
// transaction of the write that first stores it final.

var _ bridge.UsageStore = (*SQLite)(nil)

// useValue is a user's accounted use as stored.
type useValue struct {
	NodeSeconds float64 `json:"node_seconds"`
	At          int64   `json:"at"` // unix nanoseconds
}

// EncodeUse is the stored form of a user's accounted use (both stores).
func EncodeUse(u bridge.UserUse) []byte {
	v := useValue{NodeSeconds: u.NodeSeconds}
	if !u.At.IsZero() {
		v.At = u.At.UnixNano()
	}
	b, _ := json.Marshal(v)
	return b
}

// DecodeUse reads a stored accounted use; what is not one is an error
// wrapping ErrCorrupt naming the key.
func DecodeUse(key string, b []byte) (bridge.UserUse, error) {
	var v useValue
	if err := json.Unmarshal(b, &v); err != nil {
		return bridge.UserUse{}, fmt.Errorf("%w: accounted use %q: %v", ErrCorrupt, key, err)
	}
	if math.IsNaN(v.NodeSeconds) || math.IsInf(v.NodeSeconds, 0) || v.NodeSeconds < 0 {
		return bridge.UserUse{}, fmt.Errorf("%w: accounted use %q: %v node-seconds", ErrCorrupt, key, v.NodeSeconds)
	}
	u := bridge.UserUse{NodeSeconds: v.NodeSeconds}
	if v.At != 0 {
		u.At = time.Unix(0, v.At).UTC()
	}
	return u, nil
}

// DecodeUsage reads the accounted use of every user from the values
// under bridge.UsageKeyPrefix.
func DecodeUsage(vals map[string][]byte) (map[string]bridge.UserUse, error) {
	out := make(map[string]bridge.UserUse, len(vals))
	var errs []error
	for k, b := range vals {
		u, err := DecodeUse(k, b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[strings.TrimPrefix(k, bridge.UsageKeyPrefix)] = u
	}
	return out, errors.Join(errs...)
}

// ChargesNow reports whether a write of state over stored (found: whether
// the job was stored at all) is the first to store the job final: the
// write that charges its use.
func ChargesNow(stored string, found bool, state string) bool {
	return bridge.JobState(state).Final() && (!found || !bridge.JobState(stored).Final())
}

// PutCharged implements bridge.UsageStore: Put, and the charge added to
// its user's account in the same transaction when this write is the
// first to store j final.
func (s *SQLite) PutCharged(ctx context.Context, j *bridge.Job, c bridge.Charge) error {
	if j == nil || j.ID == "" {
		return fmt.Errorf("store: put: %w: a job needs an id", bridge.ErrBadRequest)
	}
	r, err := EncodeRow(j, s.opts.Now())
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	r.Charge = &c
	err = s.write(ctx, func(w *wtx) error { return putRow(w, r) })
	if err != nil {
		return fmt.Errorf("store: put job %s: %w", j.ID, s.wrap("writing", err))
	}
	return nil
}

// Usage implements bridge.UsageStore.
func (s *SQLite) Usage(ctx context.Context) (map[string]bridge.UserUse, error) {
	vals, err := s.Values(ctx, bridge.UsageKeyPrefix)
	if err != nil {
		return nil, err
	}
	u, err := DecodeUsage(vals)
	if err != nil {
		return u, fmt.Errorf("store %s: %w", s.path, err)
	}
	return u, nil
}

const qGetValue = `SELECT value FROM kv WHERE key = ?`

// charge adds r's charge to its user's account (putRow, when the write
// first stores the job final).
func charge(w *wtx, r *Row) error {
	c := r.Charge
	key := bridge.UsageKeyPrefix + c.User
	var b []byte
	var old bridge.UserUse
	err := w.queryRow(qGetValue, []any{key}, &b)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	default:
		if old, err = DecodeUse(key, b); err != nil {
			// A damaged account is replaced by this charge rather than
			// failing the job's write.
			old = bridge.UserUse{}
		}
	}
	return w.exec(qSetValue, key, EncodeUse(old.Add(*c)), r.Updated)
}
