package bridge

import (
	"context"
	"errors"
	"slices"
)

// ValueStore is optionally implemented by a Store that keeps the broker's
// other durable state beside the jobs (the learned availability model, a
// prefix): opaque values under string keys. SetValue replaces the value
// under key and is durable when it returns, as Put is; an empty key is an
// error. Value returns a copy of the value and ok=false when there is none.
// Both are safe for concurrent use. store.SQLite and MemStore implement it.
type ValueStore interface {
	SetValue(ctx context.Context, key string, value []byte) error
	Value(ctx context.Context, key string) (value []byte, ok bool, err error)
}

var _ ValueStore = (*MemStore)(nil)

// SetValue implements ValueStore.
func (m *MemStore) SetValue(_ context.Context, key string, value []byte) error {
	if key == "" {
		return errors.New("memstore: set value: empty key")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.vals == nil {
		m.vals = map[string][]byte{}
	}
	m.vals[key] = append([]byte{}, value...)
	return nil
}

// Value implements ValueStore.
func (m *MemStore) Value(_ context.Context, key string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.vals[key]
	return slices.Clone(v), ok, nil
}
