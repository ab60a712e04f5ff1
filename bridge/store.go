package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
)

// ErrNotFound is returned for an unknown grid job id.
var ErrNotFound = errors.New("no such job")

// Store keeps the broker's state.
//
// Contract: Put stores the whole job — a deep copy: later changes by the
// caller do not leak in — and returns only once the state is as durable as
// the store promises (a durable store: committed to disk). A job's Events
// only ever grow between two Puts of the same job, so a store may append the
// new ones instead of rewriting all. Get returns a copy or an error wrapping
// ErrNotFound. List returns copies matching the filter in submission order.
// NextID returns a fresh sequence number that is never handed out again, not
// even after a crash. Implementations must be safe for concurrent use.
type Store interface {
	Put(ctx context.Context, j *Job) error
	Get(ctx context.Context, id string) (*Job, error)
	List(ctx context.Context, f Filter) ([]*Job, error)
	NextID(ctx context.Context) (uint64, error)
}

// Filter selects jobs in List. The zero Filter selects every job.
type Filter struct {
	States []JobState // any of these states; nil = all
	Site   string     // placed (in part) on this site; "" = any
	Name   string     // this job name; "" = any
	Parent string     // elements of this array, sweep or pipeline; "" = any job
	After  string     // only jobs after this one in the listing order (paging); "" = from the start
	Limit  int        // at most this many; 0 = no limit
	Events bool       // include each job's events (they can be many)
	// Newest lists the most recently submitted first (After then pages
	// towards older jobs): the last N jobs cost one page, not a walk
	// through every older one.
	Newest bool
}

// Match reports whether j passes the filter (Limit and After aside).
func (f Filter) Match(j *Job) bool {
	if len(f.States) > 0 && !slices.Contains(f.States, j.State) {
		return false
	}
	if f.Name != "" && j.Req.Name != f.Name {
		return false
	}
	if f.Parent != "" && j.Parent != f.Parent {
		return false
	}
	if f.Site != "" && !slices.ContainsFunc(j.Comps, func(c Component) bool { return c.Site == f.Site }) {
		return false
	}
	return true
}

// MemStore is a Store in memory: fast and lost on exit.
type MemStore struct {
	mu   sync.Mutex
	jobs map[string]*Job
	ord  map[string]uint64
	seq  uint64
	vals map[string][]byte  // ValueStore (values.go)
	use  map[string]UserUse // UsageStore (usage.go)
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
func (m *MemStore) List(_ context.Context, f Filter) ([]*Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.ord[f.After]; f.After != "" && !ok {
		return nil, fmt.Errorf("%w: paging cursor %s", ErrNotFound, f.After)
	}
	out := make([]*Job, 0, len(m.jobs))
	for _, j := range m.jobs {
		if f.Match(j) && (f.After == "" || (!f.Newest && m.ord[j.ID] > m.ord[f.After]) || (f.Newest && m.ord[j.ID] < m.ord[f.After])) {
			c := j.Clone()
			if !f.Events {
				c.Events = nil
			}
			out = append(out, c)
		}
	}
	sort.Slice(out, func(a, b int) bool { return (m.ord[out[a].ID] < m.ord[out[b].ID]) != f.Newest })
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
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
func (*DiscardStore) List(context.Context, Filter) ([]*Job, error) { return nil, nil }

// NextID implements Store.
func (d *DiscardStore) NextID(context.Context) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	return d.seq, nil
}
