package bridge

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// Output fetching, off the cycle's critical path.
//
// A job whose components have ended and that asked for an output directory
// is held in its live state (finish records its outcome in j.final) until
// its outputs are here. For real sites the fetch runs on a bounded pool of
// workers (Options.FetchWorkers), each fetch under its own deadline
// (Options.FetchTimeout): a site that stalls, or a job directory that never
// ends, costs one worker for at most that long and never the cycle. A
// finished fetch is applied by the next cycle (with that cycle's now): the
// outputs, the errors and the job's final state are written to the store
// in one Put, so the store never holds a job that looks ended without its
// outputs. Until then the store holds the job live with its components
// ended; after a crash Recover finds it so and fetches again (a fetch
// writes each file to a temp name and renames it, so doing it twice is
// harmless). Simulated sites fetch inline, in order, inside the cycle:
// their answer is immediate and a replay stays deterministic.

// Defaults of the fetch pool.
const (
	DefaultFetchWorkers = 4
	// DefaultFetchTimeout bounds the fetch of one job's outputs (all its
	// components). Each transfer also has its own, size-derived deadline
	// in the transport.
	DefaultFetchTimeout = 6 * time.Hour
)

// fetcher fetches the outputs of ended jobs and ends them once the
// outputs are here.
type fetcher struct {
	part
	*tracker // how a job ends (end)
	pool     fetchPool
}

// fetchPool is the queue and workers of the output fetches of real sites.
type fetchPool struct {
	mu       sync.Mutex
	queue    []*fetchTask
	running  int             // workers alive
	inflight map[string]bool // job ids queued or being fetched
	done     []*fetchTask    // fetched, to apply in the next cycle
	retry    []string        // fetches interrupted by their context ending: fetch again
	idle     *sync.Cond      // signalled when a task is done
}

// fetchTask is the fetch of one job's outputs: one entry per component.
type fetchTask struct {
	ctx   context.Context // of the cycle that queued it
	job   string
	owner string // the job's owner, whose files the outputs become (handOver)
	comps []fetchComp
}

type fetchComp struct {
	site  string
	id    backends.JobID
	spec  *backends.JobSpec
	dir   string
	fe    backends.Fetcher // the site's own; runFetch takes owner's identity's when owner is set
	s     int
	owner string // whose identity fetches (siteTable.identityOwner)
	// Results.
	paths []string
	err   error
}

// run is the fetch stage of a cycle (see fetchEnded).
func (ft *fetcher) run(ctx context.Context, cs *cycleState) {
	if len(ft.ended) > 0 || ft.fetchPending() {
		ft.fetchEnded(ctx, cs.now)
	}
}

// fetchEnded applies the fetches that finished since the last cycle, and
// starts the fetch of the outputs of completed and failed jobs that asked
// for an output directory: inline for simulated sites, on the pool for
// real ones. Jobs whose fetch is done end now.
func (ft *fetcher) fetchEnded(ctx context.Context, now time.Time) {
	p := &ft.pool
	p.mu.Lock()
	done, retry := p.done, p.retry
	p.done, p.retry = nil, nil
	p.mu.Unlock()

	var inline, queued []*fetchTask
	ft.mu.Lock()
	for _, t := range done {
		ft.applyFetch(ctx, t, now)
	}
	ended := append(ft.ended, retry...)
	ft.ended = nil
	for _, id := range ended {
		j := ft.jobs[id]
		if j == nil {
			continue // dropped
		}
		if j.final == nil || j.State.Final() { // cancelled meanwhile: nothing to bring back
			j.final = nil
			continue
		}
		t := &fetchTask{ctx: ctx, job: j.ID, owner: j.Req.Owner}
		sim := true
		for k, c := range j.Comps {
			s := ft.siteIdx[c.Site]
			fe, ok := backends.AsFetcher(ft.sites[s].Backend)
			if !ok {
				continue
			}
			dir := j.Req.OutputDir
			if len(j.Comps) > 1 {
				dir = filepath.Join(dir, fmt.Sprintf("%d-%s", k, c.Site))
			}
			sp := ft.spec(j, k, len(j.Comps), c.Site, c.Nodes, policy.Option{})
			if c.Tag != "" { // a QoS-tier copy: its own tag, its own remote directory
				sp.GridID = c.Tag
			}
			t.comps = append(t.comps, fetchComp{site: c.Site, id: c.RemoteID, dir: dir, fe: fe, spec: sp, s: s, owner: ft.identityOwner(j)})
			sim = sim && ft.sites[s].Simulated
		}
		if sim {
			inline = append(inline, t)
		} else {
			queued = append(queued, t)
			ft.record(ctx, j, now, "fetching", "", fmt.Sprintf("the job has ended; fetching its outputs into %s (the job ends once they are here)", j.Req.OutputDir))
		}
	}
	ft.mu.Unlock()

	for _, t := range inline {
		ft.runFetch(ctx, t)
		ft.mu.Lock()
		ft.applyFetch(ctx, t, now)
		ft.mu.Unlock()
	}
	if len(queued) > 0 {
		ft.enqueueFetches(queued)
	}
	ft.mu.Lock()
	ft.compactLive()
	ft.mu.Unlock()
}

// fetchPending reports whether fetchEnded has something to do beyond
// the ended list: finished fetches to apply, interrupted ones to queue again.
func (ft *fetcher) fetchPending() bool {
	p := &ft.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.done) > 0 || len(p.retry) > 0
}

// runFetch fetches every component of t, under the fetch deadline.
func (ft *fetcher) runFetch(ctx context.Context, t *fetchTask) {
	timeout := ft.opts.FetchTimeout
	if timeout <= 0 {
		timeout = DefaultFetchTimeout
	}
	fctx, cancel := context.WithTimeoutCause(ctx, timeout,
		fmt.Errorf("fetching the outputs of job %s took longer than %s (broker fetch timeout): %w", t.job, timeout, context.DeadlineExceeded))
	defer cancel()
	for i := range t.comps {
		c := &t.comps[i]
		fe := c.fe
		if c.owner != "" {
			be, err := ft.backendFor(fctx, c.s, c.owner)
			if err != nil {
				c.err = err
				continue
			}
			var ok bool
			if fe, ok = backends.AsFetcher(be); !ok {
				c.err = fmt.Errorf("%w: site %s: the identity of user %s cannot fetch outputs", backends.ErrUnsupported, c.site, c.owner)
				continue
			}
		}
		c.paths, c.err = fe.FetchOutputs(fctx, c.id, c.spec, c.dir)
		if err := ft.handOver(t.owner, c.paths); err != nil && c.err == nil {
			c.err = err
		}
		if c.err != nil && fctx.Err() != nil && ctx.Err() == nil {
			c.err = fmt.Errorf("%w (%w)", context.Cause(fctx), c.err)
		}
	}
}

// applyFetch records a finished fetch and ends its job. The ledger's lock held.
func (ft *fetcher) applyFetch(ctx context.Context, t *fetchTask, now time.Time) {
	j := ft.jobs[t.job]
	if j == nil {
		return // dropped meanwhile
	}
	j.Outputs = []string{} // fetched (or tried) once
	for _, c := range t.comps {
		j.Outputs = append(j.Outputs, c.paths...) // what arrived, even when something else did not
		if c.err != nil {
			j.FetchErrors = append(j.FetchErrors, c.err.Error())
			ft.note(j, now, "fetch-failed", c.site, c.err.Error())
		} else {
			ft.note(j, now, "outputs", c.site, fmt.Sprintf("%d file(s) in %s", len(c.paths), c.dir))
		}
	}
	// The job ends now that its outputs are here (or could not be), in
	// the same store write as the outputs.
	if j.final != nil && !j.State.Final() {
		ft.end(j, *j.final, now)
	}
	j.final = nil
	_ = ft.save(ctx, j)
}

// enqueueFetches queues tasks and starts workers up to the pool's size.
func (ft *fetcher) enqueueFetches(ts []*fetchTask) {
	n := ft.opts.FetchWorkers
	if n <= 0 {
		n = DefaultFetchWorkers
	}
	p := &ft.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inflight == nil {
		p.inflight = map[string]bool{}
	}
	for _, t := range ts {
		if p.inflight[t.job] {
			continue
		}
		p.inflight[t.job] = true
		p.queue = append(p.queue, t)
	}
	for p.running < n && p.running < len(p.queue) {
		p.running++
		go ft.fetchWorker()
	}
}

// fetchWorker runs queued fetches until the queue is empty.
func (ft *fetcher) fetchWorker() {
	p := &ft.pool
	for {
		p.mu.Lock()
		if len(p.queue) == 0 {
			p.running--
			p.signal()
			p.mu.Unlock()
			return
		}
		t := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		p.mu.Unlock()

		ft.runFetch(t.ctx, t)

		p.mu.Lock()
		delete(p.inflight, t.job)
		if err := t.ctx.Err(); err != nil && anyErr(t.comps, err) {
			// Stopped from outside (the daemon stopping), not by the
			// fetch's own deadline: not the job's outcome. Fetch again.
			p.retry = append(p.retry, t.job)
			ft.log.Warn("output fetch interrupted; will fetch again", "job", t.job, "err", err)
		} else {
			p.done = append(p.done, t)
		}
		p.signal()
		p.mu.Unlock()
	}
}

// anyErr reports whether a component's fetch failed with err.
func anyErr(cs []fetchComp, err error) bool {
	for _, c := range cs {
		if errors.Is(c.err, err) {
			return true
		}
	}
	return false
}

// signal wakes WaitFetches. p.mu held.
func (p *fetchPool) signal() {
	if p.idle != nil {
		p.idle.Broadcast()
	}
}

// WaitFetches waits until no output fetch is queued or running (the next
// Cycle then applies their results), or ctx ends.
func (b *Broker) WaitFetches(ctx context.Context) error {
	p := &b.stages.fetch.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle == nil {
		p.idle = sync.NewCond(&p.mu)
	}
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.idle.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	for len(p.queue) > 0 || p.running > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		p.idle.Wait()
	}
	return nil
}
