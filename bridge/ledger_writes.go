package bridge

import (
	"context"
	"sync"
)

// maxParallelPuts bounds the store writes a grouped flush has in flight:
// the store's group commit shares one transaction and one fsync among
// the writes waiting at once (bridge/store: SQLite.loop), so writing a
// cycle's jobs concurrently costs a few commits instead of one per job.
const maxParallelPuts = 64

// writeGroup collects the jobs a phase of a cycle changed, to be written
// together by flushGroup.
type writeGroup struct {
	ids  []string
	seen map[string]bool
}

// startGroup makes saveLater note jobs instead of writing each at once,
// until flushGroup. Only cycle code (under cycleMu) uses it. The ledger's lock held.
func (l *ledger) startGroup() {
	if l.group == nil {
		l.group = &writeGroup{seen: map[string]bool{}}
	}
}

// saveLater is save for the places whose caller does not act on the
// write's error (a job settled after submission, a status change): while
// a group is open the job is only noted, and flushGroup writes its state
// (and every event noted since its last write) of that moment; otherwise
// it is written at once, as by save. A crash before the
// flush loses nothing that cannot be recovered: the write-ahead intent is
// already stored (persisted one by one, see putAll), and Recover
// reconciles such a job by its tag, or the next poll sees the change
// again. The ledger's lock held.
func (l *ledger) saveLater(ctx context.Context, j *Job) {
	if l.group == nil {
		_ = l.persist(ctx, j)
		return
	}
	if l.drop != nil && j.State.Final() && j.final == nil {
		l.toDrop = append(l.toDrop, j.ID)
	}
	l.written(j) // by flushGroup, as it is then
	if !l.group.seen[j.ID] {
		l.group.seen[j.ID] = true
		l.group.ids = append(l.group.ids, j.ID)
	}
}

// flushGroup writes every job noted since startGroup, as it is now,
// concurrently, and closes the group. The ledger's lock held by the caller; it is let go
// while the store writes (Submit and the API are not held up for a whole
// flush) and taken again before flushGroup returns.
func (l *ledger) flushGroup(ctx context.Context) {
	g := l.group
	l.group = nil
	if g == nil || len(g.ids) == 0 {
		return
	}
	js := make([]*Job, 0, len(g.ids))
	for _, id := range g.ids {
		if j, ok := l.jobs[id]; ok {
			js = append(js, j)
		}
	}
	for i, err := range l.writeCopies(ctx, js) {
		if err != nil {
			l.log.Error("store write failed", "job", js[i].ID, "err", err)
		}
	}
}

// writeCopies writes copies of jobs as they are now, concurrently, and
// returns each one's error. The ledger's lock held by the caller; it is let go while
// the store writes and taken again before writeCopies returns. writeMu,
// taken before the copies are made and kept until they are written,
// orders these writes before any later persist of the same jobs (persist
// takes it too), so a stored job is never older than one written before.
func (l *ledger) writeCopies(ctx context.Context, js []*Job) []error {
	l.writeMu.Lock()
	errs := make([]error, 0, len(js))
	for lo := 0; lo < len(js); lo += writeChunk {
		// Copies of one chunk at a time: a cycle of thousands of jobs
		// does not hold a second copy of all of them at once.
		if lo > 0 {
			l.mu.Lock()
		}
		chunk := js[lo:min(lo+writeChunk, len(js))]
		cs := make([]*Job, len(chunk))
		charges := make([]*Charge, len(chunk))
		for i, j := range chunk {
			cs[i] = j.Clone()
			charges[i] = l.chargeOf(j)
			l.written(j)
		}
		l.mu.Unlock()
		errs = append(errs, l.putAll(ctx, cs, charges)...)
	}
	if len(js) == 0 {
		l.mu.Unlock()
	}
	// writeMu before mu: a persist waiting for writeMu holds mu.
	l.writeMu.Unlock()
	l.mu.Lock()
	return errs
}

// writeChunk is how many jobs writeCopies copies at a time.
const writeChunk = 256

// putAll writes jobs concurrently (at most maxParallelPuts at once), each
// with its charge (charges[i], nil for none), and returns each one's
// error. The store reads each job while it is written: nothing may change
// them meanwhile (writeCopies gives it copies).
func (l *ledger) putAll(ctx context.Context, js []*Job, charges []*Charge) []error {
	errs := make([]error, len(js))
	if len(js) == 1 {
		errs[0] = l.put(ctx, js[0], charges[0])
		return errs
	}
	sem := make(chan struct{}, maxParallelPuts)
	var wg sync.WaitGroup
	for i, j := range js {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = l.put(ctx, j, charges[i])
		})
	}
	wg.Wait()
	return errs
}
