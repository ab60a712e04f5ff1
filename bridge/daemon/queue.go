package daemon

import (
	"io"
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
	rows  []api.QueueRow // as of the last cycle, in id order; nil = not made
	enc   []byte         // rows encoded (api.AppendQueueRow), never changed once made
	extra []api.QueueRow // submitted since
	asked time.Time      // wall clock of the last request
}

// get returns the rows, making them from b when they are not made.
func (q *queueCache) get(b *bridge.Broker) []api.QueueRow {
	q.ensure(b)
	q.mu.Lock()
	defer q.mu.Unlock()
	return append(slices.Clone(q.rows), q.since()...)
}

// of returns the rows of job id and of its elements (Parent id), as get
// would give them, without copying the others: a workflow engine's poll
// of one job costs a search, not the whole queue.
func (q *queueCache) of(b *bridge.Broker, id string) []api.QueueRow {
	q.ensure(b)
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []api.QueueRow
	// The rows are in id order, and an element's id starts with its
	// parent's: every row of the job is in the block of ids starting
	// with id.
	i, _ := slices.BinarySearchFunc(q.rows, id, func(x api.QueueRow, id string) int { return strings.Compare(x.ID, id) })
	for ; i < len(q.rows) && strings.HasPrefix(q.rows[i].ID, id); i++ {
		if r := q.rows[i]; r.ID == id || r.Parent == id {
			out = append(out, r)
		}
	}
	for _, r := range q.since() {
		if r.ID == id || r.Parent == id {
			out = append(out, r)
		}
	}
	return out
}

// write writes the rows encoded, as get would give them: the bytes made
// after the last cycle, then the jobs submitted since.
func (q *queueCache) write(b *bridge.Broker, w io.Writer) error {
	q.ensure(b)
	q.mu.Lock()
	enc := q.enc
	var more []byte
	for _, r := range q.since() {
		more = api.AppendQueueRow(more, r)
	}
	q.mu.Unlock()
	if _, err := w.Write(enc); err != nil {
		return err
	}
	_, err := w.Write(more)
	return err
}

// ensure notes the request and makes the rows when they are not made.
func (q *queueCache) ensure(b *bridge.Broker) {
	q.mu.Lock()
	q.asked = time.Now()
	made := q.rows != nil
	q.mu.Unlock()
	if !made {
		q.refresh(b, true)
	}
}

// since are the rows of the jobs submitted since the rows were made. q.mu
// held.
func (q *queueCache) since() []api.QueueRow {
	var out []api.QueueRow
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
		q.rows, q.enc, q.extra = nil, nil, nil
	}
	q.mu.Unlock()
	if !wanted {
		return
	}
	// A row of each unfinished job, read in place (copying 10,000 jobs
	// after every cycle cost more than the cycle), then put in id order.
	rows := []api.QueueRow{}
	b.ViewEach(func(j *bridge.Job) {
		if !j.State.Final() {
			rows = append(rows, api.QueueRowOf(j))
		}
	})
	slices.SortFunc(rows, func(x, y api.QueueRow) int { return strings.Compare(x.ID, y.ID) })
	var enc []byte
	for _, r := range rows {
		enc = api.AppendQueueRow(enc, r)
	}
	q.mu.Lock()
	q.rows, q.enc, q.extra = rows, enc, nil
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
