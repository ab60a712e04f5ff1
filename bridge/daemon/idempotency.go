package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/gridsub/gridsub/bridge"
)

// keys is the daemon's index of idempotency keys (Request.IdempotencyKey):
// key -> the job of its first submission, for bridge.MaxIdempotencyAge.
// It is rebuilt from the store when the daemon starts (the key is stored
// in its job's own write, so a crash loses no key whose job exists) and
// kept in memory after. A submission whose key is in flight waits for
// the first one's answer, so two concurrent retries make one job.
type keys struct {
	mu     sync.Mutex
	ids    map[string]keyed
	flight map[string]chan struct{} // closed when the key's first submission has answered
}

type keyed struct {
	id string
	at time.Time // wall time the key was learned
}

func newKeys(known map[string]string, now time.Time) *keys {
	k := &keys{ids: make(map[string]keyed, len(known)), flight: map[string]chan struct{}{}}
	for key, id := range known {
		k.ids[key] = keyed{id, now}
	}
	return k
}

// submit runs sub once per key: a key already answered gives its job's id
// (and sub is not run); a key in flight waits for that submission, then
// looks again (a refused first submission does not bind the key).
func (k *keys) submit(ctx context.Context, key string, sub func() (*bridge.Job, error)) (id string, j *bridge.Job, err error) {
	for {
		k.mu.Lock()
		if e, ok := k.ids[key]; ok {
			if time.Since(e.at) < bridge.MaxIdempotencyAge {
				k.mu.Unlock()
				return e.id, nil, nil
			}
			delete(k.ids, key)
		}
		wait, busy := k.flight[key]
		if !busy {
			done := make(chan struct{})
			k.flight[key] = done
			k.mu.Unlock()
			j, err := sub()
			k.mu.Lock()
			if err == nil {
				k.ids[key] = keyed{j.ID, time.Now()}
				k.prune()
			}
			delete(k.flight, key)
			close(done)
			k.mu.Unlock()
			return "", j, err
		}
		k.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return "", nil, ctx.Err()
		}
	}
}

// prune forgets keys older than bridge.MaxIdempotencyAge, now and then.
// k.mu held.
func (k *keys) prune() {
	if len(k.ids)%1024 != 0 {
		return
	}
	for key, e := range k.ids {
		if time.Since(e.at) >= bridge.MaxIdempotencyAge {
			delete(k.ids, key)
		}
	}
}
