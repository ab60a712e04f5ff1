package experiment

import "sync"

// memo computes a value once per key for the runs of one experiment that
// share it (a world, a common subset, a learning sequence), whichever worker
// asks first; the others wait for it. The value depends on the key only, so
// results do not depend on which worker computed it.
type memo[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]*memoEntry[V]
}

type memoEntry[V any] struct {
	once    sync.Once
	started bool // claimed by warm (under memo.mu)
	v       V
	err     error
}

func (m *memo[K, V]) get(k K, f func() (V, error)) (V, error) {
	m.mu.Lock()
	if m.m == nil {
		m.m = map[K]*memoEntry[V]{}
	}
	e, ok := m.m[k]
	if !ok {
		e = &memoEntry[V]{}
		m.m[k] = e
	}
	m.mu.Unlock()
	e.once.Do(func() { e.v, e.err = f() })
	return e.v, e.err
}

// warm computes the values of keys not yet claimed by another caller, one
// at a time, claiming each before computing it: callers that need the same
// keys (the points of one sweep that read the same seeds) so share the work
// between them instead of all waiting on the first key, then the second.
// Values already claimed elsewhere are left to get, which waits for them.
// It stops at the first error (get reports it again).
func (m *memo[K, V]) warm(keys []K, f func(K) (V, error)) {
	for {
		m.mu.Lock()
		if m.m == nil {
			m.m = map[K]*memoEntry[V]{}
		}
		var k K
		var e *memoEntry[V]
		for _, x := range keys {
			y, ok := m.m[x]
			if !ok {
				y = &memoEntry[V]{}
				m.m[x] = y
			}
			if !y.started {
				k, e = x, y
				break
			}
		}
		if e != nil {
			e.started = true
		}
		m.mu.Unlock()
		if e == nil {
			return
		}
		e.once.Do(func() { e.v, e.err = f(k) })
		if e.err != nil {
			return
		}
	}
}
