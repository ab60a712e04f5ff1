package daemon

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// queueWanted is how long after a GET /v1/queue the cycle keeps the
// queue's rows made: a daemon nobody asks pays nothing.
const queueWanted = time.Minute

// queueCache holds GET /v1/queue's rows (the unfinished jobs), made right
// after each cycle while clients ask for them. A job's state changes only
// in a cycle, so the rows are as fresh as the broker; jobs submitted since
// are added as they come. A request then never waits for the broker's
// lock, which a cycle over thousands of queued jobs holds for long.
type queueCache struct {
	mu    sync.Mutex
	rows  []api.QueueRow // as of the last cycle, by id (Broker.Jobs' order); nil = not made
	extra []api.QueueRow // submitted since
	asked time.Time      // wall clock of the last request
}

// get returns the rows, making them from b when they are not made.
func (q *queueCache) get(b *bridge.Broker) []api.QueueRow {
	q.mu.Lock()
	q.asked = time.Now()
	made := q.rows != nil
	q.mu.Unlock()
	if !made {
		q.refresh(b, true)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	out := slices.Clone(q.rows)
	for _, r := range q.extra {
		// A job submitted while the rows were made may be in both.
		if _, dup := slices.BinarySearchFunc(q.rows, r.ID, func(x api.QueueRow, id string) int { return strings.Compare(x.ID, id) }); !dup {
			out = append(out, r)
		}
	}
	return out
}

// refresh remakes the rows after a cycle, if a client asked lately (or
// force).
func (q *queueCache) refresh(b *bridge.Broker, force bool) {
	q.mu.Lock()
	wanted := force || (!q.asked.IsZero() && time.Since(q.asked) < queueWanted)
	if !wanted {
		q.rows, q.extra = nil, nil
	}
	q.mu.Unlock()
	if !wanted {
		return
	}
	rows := []api.QueueRow{}
	for _, j := range b.Jobs() {
		if !j.State.Final() {
			rows = append(rows, api.QueueRowOf(j))
		}
	}
	q.mu.Lock()
	q.rows, q.extra = rows, nil
	q.mu.Unlock()
}

// submitted adds a job queued since the rows were made.
func (q *queueCache) submitted(j *bridge.Job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rows != nil {
		q.extra = append(q.extra, api.QueueRowOf(j))
	}
}
