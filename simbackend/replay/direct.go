package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/simbackend"
)

// errNeedsBroker: the plan asked for something the direct driver does not
// model (a Replicate decision: copies queued at every site's own scheduler,
// first start wins); the replay is run through the broker instead.
var errNeedsBroker = errors.New("replay: the plan needs the broker")

// direct replays jobs by calling the planner itself, on lean simulated
// sites, doing exactly what the broker and simbackend sites do for plans
// made of Start and Reject decisions (TestDirectMatchesBroker holds the two
// to byte-identical records):
//
//   - one cycle per instant where a job arrives or ends: ends first, then
//     arrivals, then a planning pass over the queue if it is not empty;
//   - the planner sees what a broker's snapshot of the sites' Info shows:
//     per site the free nodes and one hold per running job (its nodes until
//     start+walltime), the queue in FCFS order, Quiet; a planner that is a
//     policy.Incremental is told each change (its Session) instead of
//     getting a snapshot per cycle;
//   - a Start decision submits one component per part, each started at once
//     (the planner never plans more than the free nodes), with the walltime
//     and simulated run time of bridge's spec: walltime = ⌈run + transfer⌉,
//     run time = ⌈round(actual·run/estimate) + transfer⌉ (seconds), killed
//     at the walltime (the job then fails);
//   - a job's record starts at its dispatch and ends at its components' end.
//
// What it leaves out is what a replay never uses: remote ids, notes, the
// store, events, output fetching, retries of refused submissions.
//
// With a feed, jobs come in batches as they are read; read is every job
// taken from it so far (for the broker path, on errNeedsBroker).
func direct(ctx context.Context, s Setup, epoch time.Time, jobs []Job, f *Feed, progress func(submitted, total int)) (res *Result, read []Job, err error) {
	n := len(s.Sites)
	d := &driver{
		setup: s, epoch: epoch, jobs: jobs,
		sites: make([]dsite, n),
		snap:  policy.Snapshot{Sites: make([]policy.Site, n), Links: s.Links, MultiSite: s.MultiSite, Quiet: true},
		recs:  make([]simbackend.Record, len(jobs)),
		state: make([]jobState, len(jobs)),
		index: make(map[string]int32, 1024),
	}
	defer func() { read = d.jobs }()
	if f != nil && f.Hint > 0 {
		d.jobs = make([]Job, 0, f.Hint)
		d.recs = make([]simbackend.Record, 0, f.Hint)
		d.state = make([]jobState, 0, f.Hint)
	}
	// more takes the feed's next batch when every job read so far is in.
	fed := f != nil
	more := func() error {
		b, ok, err := f.next(ctx)
		if err != nil {
			return err
		}
		if !ok {
			fed = false
			return nil
		}
		// The new entries past len are zero: memory is only ever appended.
		d.jobs = append(d.jobs, b...)
		f.recycle(b)
		d.recs = slices.Grow(d.recs, len(b))[:len(d.recs)+len(b)]
		d.state = slices.Grow(d.state, len(b))[:len(d.state)+len(b)]
		return nil
	}
	total := func() int {
		if f != nil && f.Total > 0 {
			return f.Total
		}
		return len(d.jobs)
	}
	caps := make([]simbackend.SiteCapacity, n)
	for i, st := range s.Sites {
		if st.Nodes < 1 {
			return nil, nil, fmt.Errorf("site %s: nodes must be >= 1, got %d", st.Name, st.Nodes)
		}
		h := st.H
		if h <= 0 {
			h = 1
		}
		d.sites[i] = dsite{nodes: st.Nodes, free: st.Nodes}
		d.snap.Sites[i] = policy.Site{Name: st.Name, Nodes: st.Nodes, Free: st.Nodes, H: h}
		caps[i] = simbackend.SiteCapacity{Name: st.Name, Nodes: st.Nodes}
	}
	d.snap.Now = epoch
	if inc, ok := s.Planner.(policy.Incremental); ok {
		// The planner follows the grid from the changes the driver
		// reports instead of a snapshot per cycle.
		var err error
		if d.sess, err = inc.NewSession(&d.snap); err != nil {
			return nil, nil, fmt.Errorf("policy %s: %w", s.Planner.Name(), err)
		}
	}
	res = &Result{}
	next := 0
	for {
		if res.Cycles&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
		}
		for fed && next == len(d.jobs) {
			if err := more(); err != nil {
				return nil, nil, err
			}
		}
		t, ok := int64(0), false
		if len(d.ends) > 0 {
			t, ok = d.ends[0].at, true
		}
		if next < len(d.jobs) {
			if st := int64(d.jobs[next].Submit); !ok || st < t {
				t, ok = st, true
			}
		}
		if !ok {
			break
		}
		d.now = t
		for len(d.ends) > 0 && d.ends[0].at <= t {
			if err := d.end(d.popEnd()); err != nil {
				return nil, nil, err
			}
		}
		for {
			if fed && next == len(d.jobs) {
				if err := more(); err != nil {
					return nil, nil, err
				}
			}
			if next == len(d.jobs) || int64(d.jobs[next].Submit) > t {
				break
			}
			if err := d.submit(next); err != nil {
				return nil, nil, err
			}
			next++
			if progress != nil && next%1000 == 0 {
				progress(next, total())
			}
		}
		if err := d.cycle(ctx); err != nil {
			return nil, nil, err
		}
		res.Cycles++
	}
	if progress != nil {
		progress(next, total())
	}
	jobs = d.jobs
	// The records of the jobs that ended, in place (d.recs is not read
	// again): no second copy of every record.
	res.Records = d.recs[:0]
	for i := range jobs[:next] {
		switch d.state[i] {
		case jobFailed:
			res.Failed++
		case jobDone, jobRejected:
		default:
			res.Unfinished++
			continue
		}
		res.Records = append(res.Records, d.recs[i])
	}
	clear(d.recs[len(res.Records):])
	res.Records = slices.Clip(res.Records)
	res.Unfinished += len(jobs) - next
	res.Summary = simbackend.Compute(res.Records, caps)
	return res, nil, nil
}

type jobState uint8

const (
	jobWaiting jobState = iota // not submitted, or queued
	jobRunning
	jobDone
	jobFailed // killed at its walltime
	jobRejected
)

// dsite is a simulated site: its running jobs in the order a simbackend
// site keeps them (estimated end, then start order) and its free nodes.
type dsite struct {
	nodes, free int
	running     []hold
	changed     bool // since the snapshot last read it
}

type hold struct {
	estEnd int64     // start + walltime, ns from the epoch
	until  time.Time // the same, as the snapshot gives it
	seq    uint64
	nodes  int
	job    int32
}

// endEvent is a started job's end (all its components end together: they
// share the walltime and the simulated run time).
type endEvent struct {
	at    int64
	seq   uint64
	job   int32
	timed bool // killed at its walltime
}

type driver struct {
	setup Setup
	epoch time.Time
	jobs  []Job
	now   int64 // ns from the epoch
	sites []dsite
	snap  policy.Snapshot
	sess  policy.Session // when the planner is Incremental; else a snapshot per cycle
	queue []policy.Job   // FCFS (without a session)
	qjob  []int32        // queue[i] is jobs[qjob[i]]
	nwait int            // jobs queued
	recs  []simbackend.Record
	state []jobState
	index map[string]int32
	ends  []endEvent // a min-heap on (at, seq)
	seq   uint64
}

func (d *driver) at(ns int64) time.Time { return d.epoch.Add(time.Duration(ns)) }

// submit queues job i, as broker.Submit does for a replay's request.
func (d *driver) submit(i int) error {
	j := &d.jobs[i]
	switch {
	case j.Width < 1:
		return fmt.Errorf("job %s: nodes must be >= 1, got %d", j.ID, j.Width)
	case j.Estimate <= 0:
		return fmt.Errorf("job %s: walltime must be > 0, got %s", j.ID, j.Estimate)
	}
	id := strconv.Itoa(i)
	d.index[id] = int32(i)
	pj := policy.Job{ID: id, Width: j.Width, Estimate: j.Estimate, Submit: d.at(d.now), Origin: -1, DataSize: j.Size}
	if j.Origin >= 0 && j.Origin < len(d.sites) {
		pj.Origin = j.Origin
	}
	d.nwait++
	if d.sess != nil {
		d.sess.Submit(pj)
	} else {
		d.queue = append(d.queue, pj)
		d.qjob = append(d.qjob, int32(i))
	}
	d.recs[i] = simbackend.Record{ID: j.ID, Submit: d.at(d.now), Width: j.Width}
	return nil
}

// cycle plans the queue and acts on the plan.
func (d *driver) cycle(ctx context.Context) error {
	if d.nwait == 0 {
		return nil
	}
	plan, err := d.plan(ctx)
	if err != nil {
		return fmt.Errorf("policy %s: %w", d.setup.Planner.Name(), err)
	}
	if len(plan.Decisions) == 0 {
		return nil
	}
	gone := false
	for k := range plan.Decisions {
		dec := &plan.Decisions[k]
		i, ok := d.index[dec.Job]
		if !ok || d.state[i] != jobWaiting {
			continue
		}
		switch dec.Action {
		case policy.Reject:
			d.state[i] = jobRejected
			d.recs[i].Rejected, d.recs[i].End = true, d.at(d.now)
		case policy.Start:
			if err := d.start(int(i), dec.Chosen); err != nil {
				return err
			}
		case policy.Replicate:
			return errNeedsBroker
		default:
			continue
		}
		delete(d.index, dec.Job)
		d.nwait--
		gone = true
	}
	if gone && d.sess == nil {
		d.compact()
	}
	return nil
}

// plan asks the planner for this cycle's plan: through the session, or on
// a snapshot of the sites and the queue.
func (d *driver) plan(ctx context.Context) (*policy.Plan, error) {
	if d.sess != nil {
		return d.sess.Plan(ctx, d.at(d.now))
	}
	d.snap.Now = d.at(d.now)
	for i := range d.sites {
		ds := &d.sites[i]
		if !ds.changed {
			continue
		}
		ds.changed = false
		ps := &d.snap.Sites[i]
		ps.Free = ds.free
		ps.Busy = ps.Busy[:0]
		for _, h := range ds.running {
			ps.Busy = append(ps.Busy, policy.Hold{Nodes: h.nodes, Until: h.until})
		}
	}
	d.snap.Queue = d.queue[:len(d.queue):len(d.queue)]
	return d.setup.Planner.Plan(ctx, &d.snap)
}

// compact drops the queue's jobs that left it. The waiting jobs before the
// last one that left move back towards the end, the ones after it stay:
// most jobs leave from the front (the head starts), so this moves few.
func (d *driver) compact() {
	k := len(d.qjob)
	for x := len(d.qjob) - 1; x >= 0; x-- {
		if i := d.qjob[x]; d.state[i] == jobWaiting {
			k--
			if k != x {
				d.queue[k], d.qjob[k] = d.queue[x], i
			}
		}
	}
	clear(d.queue[:k])
	d.queue, d.qjob = d.queue[k:], d.qjob[k:]
}

// start runs job i on the option's parts from now, as the broker's spec and
// a simbackend site would.
func (d *driver) start(i int, o policy.Option) error {
	j := &d.jobs[i]
	actual := j.Runtime
	if actual == 0 {
		actual = time.Nanosecond // ran for no time; 0 would mean "runs its estimate"
	}
	wall, simRun := bridge.SimTimes(o.Runtime, o.Transfer, j.Estimate, actual)
	if wall <= 0 {
		return fmt.Errorf("job %s: walltime must be > 0, got %s", j.ID, wall)
	}
	dur, timed := simbackend.RunLength(wall, simRun)
	for _, p := range o.Parts {
		if p.Site < 0 || p.Site >= len(d.sites) {
			return fmt.Errorf("policy %s: job %s: part on site %d of %d", d.setup.Planner.Name(), j.ID, p.Site, len(d.sites))
		}
		ds := &d.sites[p.Site]
		if p.Nodes < 1 || p.Nodes > ds.free {
			return fmt.Errorf("policy %s: job %s: %d node(s) at %s, which has %d free (a plan never starts more than the free nodes)",
				d.setup.Planner.Name(), j.ID, p.Nodes, d.setup.Sites[p.Site].Name, ds.free)
		}
		d.seq++
		h := hold{estEnd: d.now + int64(wall), until: d.at(d.now + int64(wall)), seq: d.seq, nodes: p.Nodes, job: int32(i)}
		// After every hold with the same or an earlier end (simbackend's order).
		k, _ := slices.BinarySearchFunc(ds.running, h.estEnd, func(x hold, t int64) int {
			if x.estEnd <= t {
				return -1
			}
			return 1
		})
		ds.running = slices.Insert(ds.running, k, h)
		ds.free -= p.Nodes
		ds.changed = true
		if d.sess != nil {
			if err := d.sess.Hold(p.Site, p.Nodes, h.until); err != nil {
				return fmt.Errorf("policy %s: %w", d.setup.Planner.Name(), err)
			}
		}
	}
	d.state[i] = jobRunning
	r := &d.recs[i]
	r.Start = d.at(d.now)
	r.Parts = make([]simbackend.Part, len(o.Parts))
	for k, p := range o.Parts {
		r.Parts[k] = simbackend.Part{Site: p.Site, Nodes: p.Nodes}
	}
	d.seq++
	d.pushEnd(endEvent{at: d.now + int64(dur), seq: d.seq, job: int32(i), timed: timed})
	return nil
}

// end ends a job's components at now.
func (d *driver) end(e endEvent) error {
	i := int(e.job)
	r := &d.recs[i]
	r.End = d.at(e.at)
	if e.timed {
		d.state[i] = jobFailed
	} else {
		d.state[i] = jobDone
	}
	for _, p := range r.Parts {
		ds := &d.sites[p.Site]
		for k := range ds.running {
			if h := ds.running[k]; h.job == e.job {
				ds.running = slices.Delete(ds.running, k, k+1)
				ds.free += p.Nodes
				if d.sess != nil {
					if err := d.sess.Release(p.Site, p.Nodes, h.until); err != nil {
						return fmt.Errorf("policy %s: %w", d.setup.Planner.Name(), err)
					}
				}
				break
			}
		}
		ds.changed = true
	}
	return nil
}

func (d *driver) pushEnd(e endEvent) {
	d.ends = append(d.ends, e)
	for k := len(d.ends) - 1; k > 0; {
		p := (k - 1) / 2
		if !endBefore(&d.ends[k], &d.ends[p]) {
			break
		}
		d.ends[k], d.ends[p] = d.ends[p], d.ends[k]
		k = p
	}
}

func (d *driver) popEnd() endEvent {
	e := d.ends[0]
	last := len(d.ends) - 1
	d.ends[0] = d.ends[last]
	d.ends = d.ends[:last]
	for k := 0; ; {
		c := 2*k + 1
		if c >= last {
			break
		}
		if c+1 < last && endBefore(&d.ends[c+1], &d.ends[c]) {
			c++
		}
		if !endBefore(&d.ends[c], &d.ends[k]) {
			break
		}
		d.ends[k], d.ends[c] = d.ends[c], d.ends[k]
		k = c
	}
	return e
}

func endBefore(a, b *endEvent) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}
