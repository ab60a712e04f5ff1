package dgjs

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/dependable"
	"github.com/gridsub/gridsub/policy/registry"
	"github.com/gridsub/gridsub/simbackend"
	"github.com/gridsub/gridsub/simbackend/faults"
)

// Result is what one run measured.
type Result struct {
	Jobs      int
	Succeeded int
	// SuccessRatio = Succeeded / Jobs.
	SuccessRatio float64
	// MeanCompletion is the mean of completion − arrival over the
	// succeeded jobs.
	MeanCompletion time.Duration
	// ClassJobs and ClassSucceeded count by class (tight, loose, none).
	ClassJobs, ClassSucceeded [3]int
	// Tiers counts the tiers DGJS gave (high, low, none); zero for the
	// other schedulers.
	Tiers [3]int
	// Outages is the number of resource failures during the run.
	Outages int
	// CopiesStarted counts copies that began to run; CopiesLost those a
	// failure killed; CopiesCancelled those cancelled (a sibling won, or
	// the deadline passed) while running.
	CopiesStarted, CopiesLost, CopiesCancelled int
	// Useful is the run time of the winning copies; Wasted that of the
	// copies lost or cancelled while running.
	Useful, Wasted time.Duration
	// End is when the last job was resolved, from the start.
	End time.Duration
}

type strategy int

const (
	stRetry strategy = iota
	stReplicate
	stBackup
)

type kind int

const (
	kPrimary kind = iota
	kReplica
	kBackup
)

type slot struct {
	j          *job
	res        int
	kind       kind
	start, end time.Time
	passive    bool // a backup's reservation: runs only once activated
	running    bool
	startEv    *simbackend.Event
	endEv      *simbackend.Event
}

type job struct {
	Job
	arrival, deadline time.Time // deadline zero: none
	tier              dependable.QoS
	strat             strategy
	copies            []*slot
	attempts          int
	done, waiting     bool
}

type resource struct {
	name  string
	h     float64
	up    bool
	slots []*slot // by start
}

type sim struct {
	cfg     Config
	e       *simbackend.Engine
	epoch   time.Time
	res     []*resource
	jobs    []*job
	pred    *dependable.Predictor
	waiting []*job
	left    int
	r       Result
	sum     time.Duration
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Run performs one run; a bad config wraps ErrBadConfig, a cancelled ctx
// returns its error.
func Run(ctx context.Context, cfg Config) (*Result, error) { return run(ctx, cfg, nil) }

// run is Run with a hook called after every event (the tests' invariant
// checks).
func run(ctx context.Context, cfg Config, after func(*sim) error) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &sim{cfg: cfg, e: simbackend.NewEngine(epoch, cfg.Seed), epoch: epoch}
	var err error
	if s.pred, err = dependable.NewPredictor(dependable.Config{Threshold: cfg.Threshold, Conditional: cfg.Conditional}); err != nil {
		return nil, err
	}
	for i, h := range cfg.Speeds {
		s.res = append(s.res, &resource{name: fmt.Sprintf("R%02d", i+1), h: h, up: true})
	}
	work := cfg.Workload()
	// One failure log from History before the start to well after the
	// last arrival: the predictor learns its past, the run lives its
	// future, so the run starts in the failure process's steady state
	// (some resources may be down at the start) rather than with every
	// resource fresh.
	horizon := work[len(work)-1].Arrival + 48*time.Hour
	log, _, err := cfg.Failure.Schedule(cfg.Seed, len(s.res), cfg.History+horizon)
	if err != nil {
		return nil, err
	}
	outs, err := s.train(log)
	if err != nil {
		return nil, err
	}
	if cfg.Outages != nil {
		outs = cfg.Outages
	}
	// The tier rule is the broker's Tiering extension point; the sites it
	// sees at submission are the resources' names and run-time factors.
	tiering := cfg.Tiering
	if tiering == nil {
		if tiering, err = registry.Tiering(dependable.TieringName); err != nil {
			return nil, err
		}
	}
	sites := make([]policy.Site, len(s.res))
	for i, r := range s.res {
		sites[i] = policy.Site{Name: r.name, H: r.h}
	}
	qos := map[policy.Tier]dependable.QoS{policy.TierHigh: dependable.High, policy.TierLow: dependable.Low, policy.TierNone: dependable.None}
	for _, w := range work {
		j := &job{Job: w, arrival: epoch.Add(w.Arrival)}
		if w.Deadline > 0 {
			j.deadline = epoch.Add(w.Deadline)
		}
		switch cfg.Policy {
		case PolicyDGJS:
			t, _ := tiering.Tier(&policy.TierDemand{Deadline: j.deadline, Estimate: w.Base, Submit: j.arrival, Lambda: cfg.Lambda}, sites)
			j.tier = qos[t]
			j.strat = map[dependable.QoS]strategy{dependable.High: stReplicate, dependable.Low: stBackup, dependable.None: stRetry}[j.tier]
			s.r.Tiers[j.tier.Rank()]++
		case PolicyRefine:
			j.strat = stBackup
		}
		s.jobs = append(s.jobs, j)
		s.r.ClassJobs[w.Class]++
		s.e.At(j.arrival, func() { s.placeBatch([]*job{j}) })
		if !j.deadline.IsZero() {
			s.e.AtClass(j.deadline, simbackend.ClassLate, func() { s.expire(j) })
		}
	}
	s.left = len(s.jobs)
	// The run's failure log: long enough for every job to be resolved in
	// practice; after it ends resources simply stay up.
	for _, o := range outs {
		r := s.res[o.Site]
		idx := o.Site
		s.e.At(epoch.Add(o.Down), func() { s.fail(idx) })
		s.e.At(epoch.Add(o.Up), func() { s.repair(r) })
	}
	steps := 0
	for s.left > 0 && s.e.Step() {
		if after != nil {
			if err := after(s); err != nil {
				return nil, fmt.Errorf("at %v: %w", s.now().Sub(epoch), err)
			}
		}
		if steps++; steps%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	if s.left > 0 {
		return nil, fmt.Errorf("dgjs: %d jobs unresolved when the events ran out", s.left)
	}
	if f, ok := tiering.(interface{ Failed() error }); ok && f.Failed() != nil {
		return nil, fmt.Errorf("tiering %s: %w", tiering.Name(), f.Failed())
	}
	s.r.Jobs = len(s.jobs)
	s.r.SuccessRatio = float64(s.r.Succeeded) / float64(s.r.Jobs)
	if s.r.Succeeded > 0 {
		s.r.MeanCompletion = s.sum / time.Duration(s.r.Succeeded)
	}
	return &s.r, nil
}

// train feeds the predictor the part of log before the start (the first
// History of it, every resource up at its beginning) and returns the rest,
// shifted to the run's clock. A resource down across the start begins the
// run down, and its repair is in the returned log.
func (s *sim) train(log []faults.Outage) ([]faults.Outage, error) {
	h := s.cfg.History
	t0 := epoch.Add(-h)
	for _, r := range s.res {
		if err := s.pred.Observe(r.name, dependable.Up, t0); err != nil {
			return nil, err
		}
	}
	var run []faults.Outage
	for _, o := range log { // per site in time order: outages of a site never overlap
		if o.Down >= h {
			run = append(run, faults.Outage{Site: o.Site, Down: o.Down - h, Up: o.Up - h})
			continue
		}
		r := s.res[o.Site]
		if err := s.pred.Observe(r.name, dependable.Down, t0.Add(o.Down)); err != nil {
			return nil, err
		}
		if o.Up <= h {
			if err := s.pred.Observe(r.name, dependable.Up, t0.Add(o.Up)); err != nil {
				return nil, err
			}
			continue
		}
		r.up = false
		s.r.Outages++
		up := o.Up - h
		s.e.At(epoch.Add(up), func() { s.repair(r) })
	}
	return run, nil
}

func (s *sim) now() time.Time { return s.e.Now() }

// earliest is the start of the first gap of r at or after from that
// holds d.
func (r *resource) earliest(from time.Time, d time.Duration) time.Time {
	cur := from
	for _, sl := range r.slots {
		if !sl.end.After(cur) {
			continue
		}
		if sl.start.Sub(cur) >= d {
			return cur
		}
		cur = sl.end
	}
	return cur
}

// latest is the latest start t >= from with [t, t+d) free and t+d <= by.
func (r *resource) latest(from time.Time, d time.Duration, by time.Time) (time.Time, bool) {
	// Gaps in reverse: after the last slot, then between slots.
	hi := by
	for i := len(r.slots); i >= 0; i-- {
		lo := from
		if i > 0 {
			lo = maxT(from, r.slots[i-1].end)
		}
		top := hi
		if i < len(r.slots) {
			top = minT(hi, r.slots[i].start)
		}
		if t := top.Add(-d); !t.Before(lo) {
			return t, true
		}
		if i > 0 && !r.slots[i-1].start.After(from) {
			break
		}
	}
	return time.Time{}, false
}

func maxT(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minT(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (r *resource) add(sl *slot) {
	i, _ := slices.BinarySearchFunc(r.slots, sl.start, func(x *slot, t time.Time) int { return x.start.Compare(t) })
	r.slots = slices.Insert(r.slots, i, sl)
}

func (r *resource) remove(sl *slot) {
	if i := slices.Index(r.slots, sl); i >= 0 {
		r.slots = slices.Delete(r.slots, i, i+1)
	}
}

// book puts a copy of j on resource ri from start and schedules its start.
func (s *sim) book(j *job, ri int, k kind, start time.Time, passive bool) *slot {
	r := s.res[ri]
	sl := &slot{j: j, res: ri, kind: k, start: start, end: start.Add(s.dur(j, ri)), passive: passive}
	r.add(sl)
	j.copies = append(j.copies, sl)
	s.schedule(sl)
	return sl
}

func (s *sim) schedule(sl *slot) {
	sl.startEv = s.e.AtClass(sl.start, simbackend.ClassLate, func() { s.begin(sl) })
}

func (s *sim) dur(j *job, ri int) time.Duration {
	return time.Duration(float64(j.Base) * s.res[ri].h)
}

// begin starts a copy at its slot (a passive backup's slot is reached only
// when its primary neither succeeded nor was lost: it runs then).
func (s *sim) begin(sl *slot) {
	sl.startEv = nil
	sl.passive, sl.running = false, true
	s.r.CopiesStarted++
	sl.endEv = s.e.AtClass(sl.end, simbackend.ClassEarly, func() { s.complete(sl) })
}

// complete: the copy finished; the job succeeds and its other copies go.
func (s *sim) complete(sl *slot) {
	j := sl.j
	sl.endEv, sl.running = nil, false
	s.res[sl.res].remove(sl)
	j.copies = slices.DeleteFunc(j.copies, func(x *slot) bool { return x == sl })
	s.r.Useful += sl.end.Sub(sl.start)
	s.cancelAll(j)
	j.done = true
	s.left--
	s.r.Succeeded++
	s.r.ClassSucceeded[j.Class]++
	s.sum += s.now().Sub(j.arrival)
	s.r.End = s.now().Sub(epoch)
}

// cancel drops a copy: its events, its slot, and its run so far (wasted).
func (s *sim) cancel(sl *slot) {
	if sl.startEv != nil {
		sl.startEv.Cancel()
		sl.startEv = nil
	}
	if sl.endEv != nil {
		sl.endEv.Cancel()
		sl.endEv = nil
	}
	if sl.running {
		s.r.Wasted += s.now().Sub(sl.start)
		s.r.CopiesCancelled++
		sl.running = false
	}
	s.res[sl.res].remove(sl)
}

func (s *sim) cancelAll(j *job) {
	for _, c := range j.copies {
		s.cancel(c)
	}
	j.copies = nil
}

// giveUp resolves j as failed.
func (s *sim) giveUp(j *job) {
	if j.done {
		return
	}
	s.cancelAll(j)
	j.done = true
	s.left--
	s.r.End = s.now().Sub(epoch)
	if j.waiting {
		j.waiting = false
		s.waiting = slices.DeleteFunc(s.waiting, func(x *job) bool { return x == j })
	}
}

// expire: the deadline passed and the job has not completed.
func (s *sim) expire(j *job) { s.giveUp(j) }

// fail takes resource ri down: its running copy is lost, its planned
// slots dropped; the jobs hit are handled in id order.
func (s *sim) fail(ri int) {
	r := s.res[ri]
	if !r.up {
		return
	}
	r.up = false
	s.r.Outages++
	s.pred.Observe(r.name, dependable.Down, s.now())
	var hit []*job
	for _, sl := range slices.Clone(r.slots) {
		if sl.running {
			s.r.CopiesLost++
			s.r.Wasted += s.now().Sub(sl.start)
			sl.running = false
		}
		if sl.startEv != nil {
			sl.startEv.Cancel()
		}
		if sl.endEv != nil {
			sl.endEv.Cancel()
		}
		sl.startEv, sl.endEv = nil, nil
		j := sl.j
		j.copies = slices.DeleteFunc(j.copies, func(x *slot) bool { return x == sl })
		if !slices.Contains(hit, j) {
			hit = append(hit, j)
		}
	}
	r.slots = nil
	slices.SortFunc(hit, func(a, b *job) int { return a.ID - b.ID })
	var again []*job
	for _, j := range hit {
		if j.done {
			continue
		}
		if len(j.copies) > 0 {
			s.promote(j)
			continue
		}
		again = append(again, j)
	}
	if len(again) > 0 {
		s.placeBatch(again)
	}
}

// promote: j lost a copy but has others. If none of them runs yet and the
// primary is gone, the backup left (passive: activated; active: not started
// yet) no longer waits for its latest start: it moves to the earliest gap
// of its resource.
func (s *sim) promote(j *job) {
	for _, c := range j.copies {
		if c.running || c.kind != kBackup {
			return
		}
	}
	for _, c := range j.copies {
		s.cancel(c)
		r := s.res[c.res]
		c.passive = false
		c.start = r.earliest(s.now(), s.dur(j, c.res))
		c.end = c.start.Add(s.dur(j, c.res))
		r.add(c)
		s.schedule(c)
	}
}

func (s *sim) repair(r *resource) {
	if r.up {
		return
	}
	r.up = true
	s.pred.Observe(r.name, dependable.Up, s.now())
	if len(s.waiting) > 0 {
		w := s.waiting
		s.waiting = nil
		for _, j := range w {
			j.waiting = false
		}
		s.placeBatch(w)
	}
}

// check verifies the simulation's invariants: every resource's slots are
// in order and never overlap, a down resource has none, a resource runs at
// most one copy; a resolved job has no copy left (after a success no copy
// runs: replicas cancelled, backups cancelled); a job's copies are on
// distinct resources; every copy of a job is in its resource's slots.
func (s *sim) check() error {
	for ri, r := range s.res {
		if !r.up && len(r.slots) > 0 {
			return fmt.Errorf("resource %s is down but holds %d slots", r.name, len(r.slots))
		}
		running := 0
		for i, sl := range r.slots {
			if sl.res != ri {
				return fmt.Errorf("resource %s holds a slot of resource %d", r.name, sl.res)
			}
			if i > 0 && sl.start.Before(r.slots[i-1].end) {
				return fmt.Errorf("resource %s: slots overlap (%v < %v)", r.name, sl.start, r.slots[i-1].end)
			}
			if sl.running {
				running++
				if sl.passive {
					return fmt.Errorf("job %d: a passive backup runs", sl.j.ID)
				}
			}
			if sl.j.done {
				return fmt.Errorf("job %d is resolved but holds a slot on %s", sl.j.ID, r.name)
			}
		}
		if running > 1 {
			return fmt.Errorf("resource %s runs %d copies at once", r.name, running)
		}
	}
	for _, j := range s.jobs {
		if j.done && len(j.copies) > 0 {
			return fmt.Errorf("job %d is resolved with %d copies left", j.ID, len(j.copies))
		}
		seen := map[int]bool{}
		for _, c := range j.copies {
			if seen[c.res] {
				return fmt.Errorf("job %d has two copies on resource %d", j.ID, c.res)
			}
			seen[c.res] = true
			if !slicesContains(s.res[c.res].slots, c) {
				return fmt.Errorf("job %d: a copy is missing from resource %d's slots", j.ID, c.res)
			}
		}
	}
	return nil
}

func slicesContains(ss []*slot, x *slot) bool {
	for _, y := range ss {
		if y == x {
			return true
		}
	}
	return false
}
