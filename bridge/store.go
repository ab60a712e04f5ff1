package bridge

import (
	"context"
	"errors"
	"sort"
	"sync"
)

// ErrNotFound is returned for an unknown grid job id.
var ErrNotFound = errors.New("no such job")

// Store keeps the broker's state.
//
// Contract: Put stores a deep copy of the job (later changes by the caller do
// not leak in) and returns only once the state is as durable as the store
// promises; Get returns a copy or an error wrapping ErrNotFound; List returns
// copies in submission order. Implementations must be safe for concurrent use.
type Store interface {
	Put(ctx context.Context, j *Job) error
	Get(ctx context.Context, id string) (*Job, error)
	List(ctx context.Context) ([]*Job, error)
	// NextID returns a fresh, never reused sequence number for a grid id.
	NextID(ctx context.Context) (uint64, error)
}

// MemStore is a Store in memory: fast and lost on exit.
type MemStore struct {
	mu   sync.Mutex
	jobs map[string]*Job
	ord  map[string]uint64
	seq  uint64
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty in-memory store.
func NewMemStore() *MemStore {
	return &MemStore{jobs: map[string]*Job{}, ord: map[string]uint64{}}
}

// Put implements Store.
func (m *MemStore) Put(_ context.Context, j *Job) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.ord[j.ID]; !ok {
		m.ord[j.ID] = uint64(len(m.ord))
	}
	m.jobs[j.ID] = j.Clone()
	return nil
}

// Get implements Store.
func (m *MemStore) Get(_ context.Context, id string) (*Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[id]
	if !ok {
		return nil, ErrNotFound
	}
	return j.Clone(), nil
}

// List implements Store.
func (m *MemStore) List(_ context.Context) ([]*Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Job, 0, len(m.jobs))
	for _, j := range m.jobs {
		out = append(out, j.Clone())
	}
	sort.Slice(out, func(a, b int) bool { return m.ord[out[a].ID] < m.ord[out[b].ID] })
	return out, nil
}

// NextID implements Store.
func (m *MemStore) NextID(context.Context) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	return m.seq, nil
}

// DiscardStore keeps nothing: for trace replays, where the broker's own
// memory is the only state needed and a copy per change would cost more
// than the scheduling itself. Get and List find nothing.
type DiscardStore struct {
	mu  sync.Mutex
	seq uint64
}

var _ Store = (*DiscardStore)(nil)

// Put implements Store.
func (*DiscardStore) Put(context.Context, *Job) error { return nil }

// Get implements Store.
func (*DiscardStore) Get(context.Context, string) (*Job, error) { return nil, ErrNotFound }

// List implements Store.
func (*DiscardStore) List(context.Context) ([]*Job, error) { return nil, nil }

// NextID implements Store.
func (d *DiscardStore) NextID(context.Context) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	return d.seq, nil
}
