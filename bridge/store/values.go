package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gridsub/gridsub/bridge"
)

var _ bridge.ValueStore = (*SQLite)(nil)

// Values beside the jobs: the broker's own durable state that is neither a
// job nor a site's health (SiteHealthStore has that) — the job id prefix,
// the last time a periodic task ran. Keys are free-form; a prefix
// convention ("task/cleanup", "broker.id_prefix") lets Values read a family
// at once. Values are opaque bytes (JSON, typically). Each SetValue is
// committed like a Put.

// SetValue stores value under key, replacing what was there.
func (s *SQLite) SetValue(ctx context.Context, key string, value []byte) error {
	if key == "" {
		return fmt.Errorf("store: set value: empty key")
	}
	v := slices.Clone(value)
	if v == nil {
		v = []byte{}
	}
	now := s.opts.Now().UnixNano()
	err := s.write(ctx, func(w *wtx) error {
		return w.exec(qSetValue, key, v, now)
	})
	if err != nil {
		return fmt.Errorf("store: set value %q: %w", key, s.wrap("writing", err))
	}
	return nil
}

// Value returns the value under key; ok is false when there is none.
func (s *SQLite) Value(ctx context.Context, key string) (value []byte, ok bool, err error) {
	err = s.r.QueryRowContext(ctx, `SELECT value FROM kv WHERE key = ?`, key).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: value %q: %w", key, s.wrap("reading", err))
	}
	return value, true, nil
}

// Values returns every key starting with prefix and its value.
func (s *SQLite) Values(ctx context.Context, prefix string) (map[string][]byte, error) {
	// A range on the primary key rather than LIKE: keys may hold % and _.
	rows, err := s.r.QueryContext(ctx, `SELECT key, value FROM kv WHERE key >= ? ORDER BY key`, prefix)
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
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: values %q: %w", prefix, s.wrap("reading", err))
	}
	return out, nil
}

// DeleteValue removes key (no error if it was not there).
func (s *SQLite) DeleteValue(ctx context.Context, key string) error {
	err := s.write(ctx, func(w *wtx) error { return w.exec(qDelValue, key) })
	if err != nil {
		return fmt.Errorf("store: delete value %q: %w", key, s.wrap("writing", err))
	}
	return nil
}
