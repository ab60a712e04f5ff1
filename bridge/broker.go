package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/jobrules"
	"github.com/gridsub/gridsub/policy"
)

// IDPlaceholder in Request.OutputDir is replaced by the job's id when it is
// submitted (and stored), for callers that learn the id only from Submit:
// "gridsub-out/{id}" becomes "gridsub-out/g000042".
const IDPlaceholder = "{id}"

// Sentinel errors of the broker.
var (
	// ErrUnknownSite: a request names a site the broker does not have.
	ErrUnknownSite = errors.New("unknown site")
	// ErrBadRequest: a request cannot be queued as given.
	ErrBadRequest = errors.New("bad request")
	// ErrFinal: the job has already ended.
	ErrFinal = errors.New("job already ended")
	// ErrOutsideRoot: a request's input or output directory is not inside
	// the broker's allowed roots (Options.InputRoots, OutputRoot). A
	// RequestError carrying it also wraps ErrBadRequest.
	ErrOutsideRoot = jobrules.ErrOutsideRoot
	// ErrInfeasible: no configured site can ever run the request (too
	// wide, nodes without what it asks per node, a strict deadline the
	// fastest placement cannot meet); see Feasible. Nothing is stored. The
	// CLI exits 1 on it, the API answers 422.
	ErrInfeasible = errors.New("no site can run the job")
	// ErrDeadline: no site can finish the job by its deadline, even idle
	// (Feasible's deadline rule). It is always carried by an error that is
	// also ErrInfeasible (never ErrBadRequest).
	ErrDeadline = errors.New("deadline cannot be met")
)

// SiteConfig is one site the broker dispatches to.
type SiteConfig struct {
	Name    string
	Backend backends.Backend
	H       float64 // heterogeneity factor (1 = reference machine)
	// Simulated sites get the job's real behaviour (SimHints) and count the
	// input transfer inside the allocation, as paper 000's model does.
	Simulated bool
	// Pushes means the site reports every change of its jobs through
	// Broker.Notify, so the broker never polls it.
	Pushes bool
}

// Options configure a Broker.
type Options struct {
	Sites     []SiteConfig
	Planner   policy.Planner
	Policies  Policies
	Store     Store           // nil = a MemStore
	Links     [][]policy.Link // Links[i][j] between Sites[i] and Sites[j]; nil = free
	MultiSite float64         // p >= 1
	// MaxAttempts bounds dispatch attempts of one job when a site loses it or
	// refuses it for a retryable reason (default 3). Moves of a waiting
	// job (remap.go) take attempt numbers but do not count.
	MaxAttempts int
	Logger      *slog.Logger
	// OnEvent, when set, sees every job event after it is stored (progress
	// displays). It must not call back into the broker.
	OnEvent func(job *Job, e Event)
	// IDPrefix starts every grid job id (default "g": g000001). A broker
	// whose store does not outlive it (the CLI's embedded broker) must make
	// it unique, or a later run would reuse ids — and with them remote tags
	// and job directories at the sites.
	IDPrefix string
	// NoHistory keeps no per-job event history (trace replays of many
	// thousands of jobs do not need it). States, times and reasons are kept.
	NoHistory bool
	// Drop, when set, receives every job that reached a final state, at
	// the end of the cycle (or cancel) that ended it, under the broker's
	// lock; the broker then forgets the job (Job and View no longer find
	// it). Drop must not keep j or call the broker. A trace replay of many
	// thousands of jobs reads its results this way, so that the broker's
	// memory holds only the live jobs, not every job it ever ran.
	Drop func(j *Job)
	// BindLead is how long before its window opens an advance reservation
	// is bound to a site and created there (0: when it opens).
	BindLead time.Duration
	// OutputRoot is the one directory under which the broker writes
	// fetched outputs: a request's OutputDir must resolve (symbolic links
	// included) inside it, a relative one is taken below it, and it is
	// checked again before fetching. "": no request may ask for outputs.
	OutputRoot string
	// InputRoots are the directories a request's input files (Local) may
	// be read from, symbolic links resolved. None: no request may stage
	// inputs. See bridge/validate.go for every check Submit makes.
	InputRoots []string
	// FetchWorkers bounds the output fetches of real sites running at once
	// (default DefaultFetchWorkers); FetchTimeout bounds each job's fetch
	// (default DefaultFetchTimeout). See fetch.go.
	FetchWorkers int
	FetchTimeout time.Duration
	// SubmitGrace: after a restart, a dispatch intent written by the
	// process before it whose tag a site does not know yet is
	// looked up again until this long after the intent was recorded
	// before the job counts as never submitted and is queued again. A
	// submit command in flight when the broker died can still reach the
	// site after the restarted broker first asked (the SSH server lets
	// the command finish); without the grace the job would run twice
	// (recover.go). 0: no grace (in-process simulated sites, which die
	// with the broker).
	SubmitGrace time.Duration
	// CheckFeasible makes Submit refuse a job no configured site can ever
	// run, with the reason (feasible.go: Feasible). Off for trace replays,
	// where the planner rejects such a job in its cycle instead.
	CheckFeasible bool
	// Tiers turns on the dependability tiers of SPEC.md §5 (tiers.go,
	// copies.go): replication, primary–backup and retry. nil: every job
	// runs one copy per attempt, and a request asking for qos high or low
	// is refused.
	Tiers *TierOptions
	// Remap turns on repetitive mapping (remap.go): a job waiting in a
	// site's queue is moved to another site that can start it now when the
	// predicted gain is large enough. nil: jobs stay where they were sent.
	Remap *RemapOptions
}

// Broker is the grid broker. It is safe for concurrent use; cycles are
// serialised.
type Broker struct {
	opts    Options
	sites   []SiteConfig
	siteIdx map[string]int
	store   Store
	log     *slog.Logger

	cycleMu sync.Mutex // one cycle (or cancel) at a time

	mu      sync.Mutex
	jobs    map[string]*Job    // every job the broker knows, live or ended
	queue   []string           // ids of queued jobs in FCFS order
	live    []string           // ids of dispatched or running jobs, in dispatch order
	where   map[compKey]string // remote job at a site -> grid job id, for live components
	pq      []policy.Job       // the policy's view of queue, kept in step with it
	byNow   []policy.Job       // reused by submittedBy when some queued jobs are too new for a cycle
	polling bool               // some site must be polled (does not push its changes)
	ended   []string           // ids of jobs that ended since the last output fetch
	// unresolved are Submitting jobs whose site could not be asked at Recover.
	unresolved []string
	// restarted are the jobs Recover found Submitting: their intents were
	// written by an earlier process, whose commands may still be landing
	// (Options.SubmitGrace applies to them only; recover.go).
	restarted map[string]bool
	pending   []pendingEvent // events to hand to OnEvent once the lock is released

	// unreachable: queued jobs held out of planning because every site
	// they may use is down (unreachable.go).
	unreachable map[string]bool

	// Advance reservations (reserve.go).
	rrg       admissionsBook // admitted reservations over the sites (policies.go); built on first use
	capacity  []int          // nodes per site as last seen; 0 = not known yet
	resFailed []bool         // site taken out of the graph after it failed
	reserved  []string       // ids of Reserved jobs (may hold stale ones; pruned at binding)
	releases  []release      // native reservations to delete
	trust     []float64      // per-site trust for the policy (SetTrust); 0 = unset
	toDrop    []string       // ids of jobs that ended, for Options.Drop
	group     *writeGroup    // a cycle phase's writes, flushed together (persistgroup.go)
	writeMu   sync.Mutex     // orders job writes: persist and writeCopies (persistgroup.go); taken after mu

	// Groups and dependencies (group.go, deps.go).
	held    []string              // ids of Held jobs
	parents []string              // ids of unfinished group parents
	groups  map[string]*groupInfo // by parent id

	fetch fetchPool // output fetches of real sites (fetch.go)

	notesMu    sync.Mutex
	notes      []note // pushed changes not yet applied
	spareNotes []note // the other buffer of notes
	stale      uint64 // bit s: pushing site s changed since its Info was read

	// Reused by every cycle (cycleMu held).
	snap      policy.Snapshot
	snapSites []policy.Site
	infoOK    []bool
	infoErr   []error
	names     []string
	uplinkBuf []policy.Link

	known []policy.Site // each site's size and node shape as last seen, for feasible (feasible.go)
	seen  []bool        // known[s] was filled from an Info
	tiers tierState     // QoS-tier copies (copies.go)
	rm    remapState    // moves of waiting jobs (remap.go)

	duties dutyState // pending cancels and late watches, durable (duties.go)

	outRoot []string // Options.OutputRoot resolved (none or one)
	inRoots []string // Options.InputRoots resolved
}

type pendingEvent struct {
	job *Job
	ev  Event
}

// New checks the options and returns a broker.
func New(opts Options) (*Broker, error) {
	if len(opts.Sites) == 0 {
		return nil, fmt.Errorf("%w: no sites configured", ErrBadRequest)
	}
	if opts.Planner == nil {
		return nil, fmt.Errorf("%w: no planner configured", ErrBadRequest)
	}
	b := &Broker{opts: opts, sites: opts.Sites, siteIdx: map[string]int{}, store: opts.Store,
		log: opts.Logger, jobs: map[string]*Job{}, where: map[compKey]string{}, groups: map[string]*groupInfo{},
		capacity: make([]int, len(opts.Sites)), resFailed: make([]bool, len(opts.Sites)), trust: make([]float64, len(opts.Sites))}
	if b.store == nil {
		b.store = NewMemStore()
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.opts.IDPrefix == "" {
		b.opts.IDPrefix = "g"
	}
	if b.opts.MaxAttempts <= 0 {
		b.opts.MaxAttempts = 3
	}
	for i, s := range opts.Sites {
		if s.Backend == nil {
			return nil, fmt.Errorf("%w: site %q has no backend", ErrBadRequest, s.Name)
		}
		if _, dup := b.siteIdx[s.Name]; dup {
			return nil, fmt.Errorf("%w: site %q configured twice", ErrBadRequest, s.Name)
		}
		if s.H <= 0 {
			b.sites[i].H = 1
		}
		b.siteIdx[s.Name] = i
		b.names = append(b.names, s.Name)
		b.polling = b.polling || !s.Pushes
	}
	if opts.Links != nil && len(opts.Links) != len(opts.Sites) {
		return nil, fmt.Errorf("%w: links matrix is %d×?, want %d×%d", ErrBadRequest, len(opts.Links), len(opts.Sites), len(opts.Sites))
	}
	if err := b.setRoots(opts); err != nil {
		return nil, err
	}
	return b, nil
}

// SiteNames lists the configured sites in order.
func (b *Broker) SiteNames() []string { return slices.Clone(b.names) }

// Site returns the backend of a site by name.
func (b *Broker) Site(name string) (backends.Backend, bool) {
	i, ok := b.siteIdx[name]
	if !ok {
		return nil, false
	}
	return b.sites[i].Backend, true
}

func (b *Broker) checkSites(field string, names []string) error {
	for _, n := range names {
		if _, ok := b.siteIdx[n]; !ok {
			return fmt.Errorf("%w: %s names %q; known sites: %s", ErrUnknownSite, field, n, strings.Join(b.SiteNames(), ", "))
		}
	}
	return nil
}

// Submit validates a request and queues it. It returns the new job (a copy).
// Every client (the CLI, the HTTP API, a trace replay) comes through here,
// so every job obeys the same rules (bridge/validate.go, bridge/jobrules):
// a request that breaks one is refused with a RequestError naming each
// field (it wraps ErrBadRequest), and nothing is stored. The stored
// request has its local paths resolved (Inputs[i].Local, OutputDir).
func (b *Broker) Submit(ctx context.Context, req Request, now time.Time) (*Job, error) {
	req = req.clone() // validate normalises paths in place
	if req.grouped() || req.hasDeps() {
		return b.submitHeld(ctx, req, now) // deps.go
	}
	if err := b.validate(&req, now); err != nil {
		return nil, err
	}
	if req.Origin != "" {
		if err := b.checkSites("origin", []string{req.Origin}); err != nil {
			return nil, err
		}
	}
	if err := b.checkSites("sites", req.Sites); err != nil {
		return nil, err
	}
	if err := b.checkSites("prefer", req.Prefer); err != nil {
		return nil, err
	}
	if err := b.checkSites("site_options", slices.Sorted(maps.Keys(req.SiteOptions))); err != nil {
		return nil, err
	}
	if err := checkDeadlineFields(&req); err != nil { // deadline.go
		return nil, err
	}
	warn, err := b.feasible(ctx, &req, now) // feasible.go: also the deadline rule
	if err != nil {
		return nil, err
	}
	if req.Window != nil {
		if err := checkWindow(&req, now); err != nil {
			return nil, err
		}
		b.learnCapacity(ctx, now)
	}
	seq, err := b.store.NextID(ctx)
	if err != nil {
		return nil, fmt.Errorf("allocating a job id: %w", err)
	}
	j := &Job{ID: fmt.Sprintf("%s%06d", b.opts.IDPrefix, seq), Req: req, State: Queued, Submit: now, ExitCode: -1}
	j.Req.OutputDir = strings.ReplaceAll(req.OutputDir, IDPlaceholder, j.ID)
	var ev *Event
	if !b.opts.NoHistory {
		ev = &Event{Time: now, Kind: "submitted", Msg: fmt.Sprintf("%d node(s), walltime %s", req.Nodes, req.Estimate)}
		j.Events = append(j.Events, *ev)
	}
	b.assignTier(j, now) // tiers.go
	if warn != "" {
		j.DeadlineMissed = true
		if !b.opts.NoHistory {
			j.Events = append(j.Events, Event{Time: now, Kind: EventDeadlineMissed, Msg: warn})
		}
	}
	if req.Window != nil {
		// Admission answers at once (DRRM): the job is Reserved or
		// Rejected before anyone sees it.
		b.mu.Lock()
		if ev != nil && b.opts.OnEvent != nil {
			b.pending = append(b.pending, pendingEvent{j.Clone(), *ev})
		}
		ev = nil // handed out above, before the admission's own event
		b.admit(j, now)
		b.mu.Unlock()
	}
	// Stored before anyone can see it, and outside the broker's lock: the job
	// is not shared yet, and concurrent submissions can then share the
	// store's commits instead of queueing for one each.
	if err := b.store.Put(ctx, j); err != nil {
		if j.State == Reserved {
			b.mu.Lock()
			b.rrg.Remove(j.ID)
			b.mu.Unlock()
		}
		return nil, fmt.Errorf("storing job: %w", err)
	}
	b.mu.Lock()
	if ev != nil && b.opts.OnEvent != nil {
		b.pending = append(b.pending, pendingEvent{j.Clone(), *ev})
	}
	b.jobs[j.ID] = j
	switch j.State {
	case Queued:
		b.queue = append(b.queue, j.ID)
		b.pq = append(b.pq, b.policyJob(j))
	case Reserved:
		b.reserved = append(b.reserved, j.ID)
	}
	c := j.Clone()
	b.mu.Unlock()
	b.flushEvents()
	return c, nil
}

// Job returns a copy of a job.
func (b *Broker) Job(id string) (*Job, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	j, ok := b.jobs[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return j.Clone(), nil
}

// View calls fn with the job itself, under the broker's lock, without the
// copy Job makes: for reading many jobs at once (a trace replay's results).
// fn must not keep j or anything in it, change it, or call the broker.
func (b *Broker) View(id string, fn func(j *Job)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	j, ok := b.jobs[id]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	fn(j)
	return nil
}

// Jobs returns copies of every job in submission order.
func (b *Broker) Jobs() []*Job {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*Job, 0, len(b.jobs))
	for _, j := range b.jobs {
		out = append(out, j.Clone())
	}
	slices.SortFunc(out, func(x, y *Job) int { return strings.Compare(x.ID, y.ID) })
	return out
}

// Idle reports whether no job is queued, live, or waiting for its
// advance reservation.
func (b *Broker) Idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue) == 0 && len(b.live) == 0 && len(b.held) == 0 && len(b.parents) == 0 &&
		!slices.ContainsFunc(b.reserved, func(id string) bool { j := b.jobs[id]; return j != nil && j.State == Reserved })
}

// addEvent appends an event to the job; b.mu must be held.
func (b *Broker) addEvent(j *Job, t time.Time, kind, site, msg string) {
	if b.opts.NoHistory {
		return
	}
	e := Event{Time: t, Kind: kind, Site: site, Msg: msg}
	j.Events = append(j.Events, e)
	if b.opts.OnEvent != nil {
		b.pending = append(b.pending, pendingEvent{j.Clone(), e})
	}
}

func (b *Broker) flushEvents() {
	if b.opts.OnEvent == nil {
		return
	}
	b.mu.Lock()
	p := b.pending
	b.pending = nil
	b.mu.Unlock()
	for _, e := range p {
		b.opts.OnEvent(e.job, e.ev)
	}
}

// persist writes the job; b.mu must be held. A store failure is logged and
// returned: the caller must not act on a change it could not record.
func (b *Broker) persist(ctx context.Context, j *Job) error {
	if b.opts.Drop != nil && j.State.Final() && j.final == nil {
		b.toDrop = append(b.toDrop, j.ID)
	}
	b.writeMu.Lock()
	err := b.store.Put(ctx, j)
	b.writeMu.Unlock()
	if err != nil {
		b.log.Error("store write failed", "job", j.ID, "err", err)
		return err
	}
	return nil
}

// dropEnded hands the jobs that ended to Options.Drop and forgets them.
// Called last in a cycle (or cancel), once nothing refers to them any more.
func (b *Broker) dropEnded() {
	if b.opts.Drop == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.toDrop) == 0 {
		return
	}
	// Every path that ends a live job compacts the live list itself.
	for _, id := range b.toDrop {
		if j, ok := b.jobs[id]; ok && j.State.Final() && j.final == nil {
			b.opts.Drop(j)
			delete(b.jobs, id)
		}
	}
	b.toDrop = b.toDrop[:0]
}

// CycleReport says what one cycle did.
type CycleReport struct {
	Polled, Started, Replicated, Rejected, Ended int
	Errors                                       []error
}

// Cycle runs one scheduling cycle at time now: poll, track, snapshot, plan,
// dispatch. Per-site failures are reported in the CycleReport (and as job
// events), not as an error: an error means the cycle itself could not run.
func (b *Broker) Cycle(ctx context.Context, now time.Time) (CycleReport, error) {
	b.cycleMu.Lock()
	defer b.cycleMu.Unlock()
	defer b.flushEvents()
	defer b.dropEnded()
	var rep CycleReport
	b.retryUnresolved(ctx, now)
	b.poll(ctx, now, &rep)
	b.watchLate(ctx, now)             // duties.go
	b.releaseHeld(ctx, now)           // deps.go
	b.advanceGroups(ctx, now)         // group.go
	b.expireDeadlines(ctx, now, &rep) // deadline.go
	b.submitCopies(ctx, now, &rep)    // copies.go
	b.mu.Lock()
	queued := len(b.queue)
	b.mu.Unlock()
	remap := b.remapWanted(now) // remap.go
	if queued == 0 && !remap {
		return rep, nil
	}
	snap, err := b.snapshot(ctx, now, &rep)
	if err != nil {
		return rep, err
	}
	var plan *policy.Plan
	if queued > 0 {
		b.holdUnreachable(ctx, now, snap) // unreachable.go
		if plan, err = b.opts.Planner.Plan(ctx, snap); err != nil {
			return rep, fmt.Errorf("policy %s: %w", b.opts.Planner.Name(), err)
		}
		b.dispatch(ctx, now, plan, &rep)
	}
	if remap {
		b.remap(ctx, now, plan, &rep)
	}
	return rep, nil
}

// poll asks every site, in one batched call, for the state of the live
// components it runs, and folds the answers into the jobs.
func (b *Broker) poll(ctx context.Context, now time.Time, rep *CycleReport) {
	b.mu.Lock()
	var ids [][]backends.JobID
	if b.polling {
		ids = make([][]backends.JobID, len(b.sites))
		for _, id := range b.live {
			for _, c := range b.jobs[id].Comps {
				if s := b.siteIdx[c.Site]; !c.State.Final() && !b.sites[s].Pushes && c.RemoteID != "" {
					ids[s] = append(ids[s], c.RemoteID)
				}
			}
		}
	}
	b.mu.Unlock()

	var results [][]backends.JobStatus
	var errs []error
	if ids != nil {
		results = make([][]backends.JobStatus, len(b.sites))
		errs = make([]error, len(b.sites))
		b.eachSite(func(s int) {
			if len(ids[s]) == 0 {
				return
			}
			results[s], errs[s] = b.sites[s].Backend.Status(ctx, ids[s])
			if errs[s] == nil && len(results[s]) != len(ids[s]) {
				errs[s] = fmt.Errorf("%w: %d statuses for %d jobs", backends.ErrBadOutput, len(results[s]), len(ids[s]))
			}
		})
	}
	b.notesMu.Lock()
	notes := b.notes
	b.notes = b.spareNotes[:0] // double-buffered: the next cycle's notes reuse this memory
	b.spareNotes = nil
	b.notesMu.Unlock()
	defer func() {
		b.notesMu.Lock()
		b.spareNotes = notes[:0]
		b.notesMu.Unlock()
	}()

	b.mu.Lock()
	touched := b.detectDown(ctx, results, errs, now) // outage.go
	for _, n := range notes {
		if j := b.apply(n.site, n.st, now); j != nil {
			touched = append(touched, j)
		}
	}
	for s := range results {
		if errs[s] != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("site %s: status: %w", b.sites[s].Name, errs[s]))
			lvl := slog.LevelWarn
			if b.outageGoesOn(s, now) { // copies.go: said once per outage
				lvl = slog.LevelDebug
			}
			b.log.Log(ctx, lvl, "status poll failed", "site", b.sites[s].Name, "err", errs[s])
			continue
		}
		rep.Polled += len(results[s])
		for i, st := range results[s] {
			st.ID = ids[s][i] // answers come in request order; trust the order, not the echo
			if j := b.apply(s, st, now); j != nil {
				touched = append(touched, j)
			}
		}
	}
	var cancels []cancelReq
	b.startGroup() // the changes are written together below (persistgroup.go)
	for _, j := range touched {
		if j.touched { // once per job, in the order of first change
			j.touched = false
			cancels = append(cancels, b.track(ctx, j, now, rep)...)
		}
	}
	b.flushGroup(ctx)
	// Only a job that left the live states needs the live list compacted
	// (most changes are a start: dispatched -> running).
	if slices.ContainsFunc(touched, func(j *Job) bool { return j.State != Dispatched && j.State != Running }) {
		b.compactLive()
	}
	b.mu.Unlock()
	b.doCancels(ctx, now, cancels)
	if len(b.ended) > 0 || b.fetchPending() {
		b.fetchEnded(ctx, now) // fetch.go
	}
	b.releaseNative(ctx, now)
}

// apply records one component status and returns its job the first time the
// job changes in this cycle (nil otherwise). b.mu held.
func (b *Broker) apply(site int, st backends.JobStatus, now time.Time) *Job {
	id, ok := b.where[compKey{site, st.ID}]
	if !ok {
		return nil
	}
	b.noteEstimate(site, st) // remap.go
	j := b.jobs[id]
	if j.State != Dispatched && j.State != Running {
		return nil
	}
	name := b.sites[site].Name
	for k := range j.Comps {
		c := &j.Comps[k]
		if c.Site != name || c.RemoteID != st.ID || c.State.Final() || st.State == c.State {
			continue
		}
		c.State, c.Reason = st.State, st.Reason
		if st.State.Final() {
			c.ExitCode = st.ExitCode
			c.End = orNow(st.End, now)
			b.noteLoss(site, st, now) // losses.go
		}
		if st.State == backends.StateRunning || (st.State.Final() && c.Start.IsZero() && !st.Start.IsZero()) {
			c.Start = orNow(st.Start, now)
		}
		if !j.touched {
			j.touched = true
			return j
		}
		return nil
	}
	return nil
}

// Notify reports a component's new state from a site that pushes its changes
// (SiteConfig.Pushes). It may be called from any goroutine, also from inside
// a backend call the broker is making; the change is applied at the start of
// the next cycle, in the order reported.
func (b *Broker) Notify(site string, st backends.JobStatus) {
	s, ok := b.siteIdx[site]
	if !ok {
		return
	}
	b.notesMu.Lock()
	b.notes = append(b.notes, note{s, st})
	b.stale |= 1 << uint(min(s, 63))
	b.notesMu.Unlock()
}

type note struct {
	site int
	st   backends.JobStatus
}

type compKey struct {
	site int
	id   backends.JobID
}

// latest returns the latest component start and end: a co-allocated job runs
// once its last part starts and ends when its last part ends. Unknown times
// count as now.
func latest(cs []Component, now time.Time) (start, end time.Time) {
	for _, c := range cs {
		if s := orNow(c.Start, now); s.After(start) {
			start = s
		}
		if e := orNow(c.End, now); e.After(end) {
			end = e
		}
	}
	return start, end
}

// clampTimes keeps submit <= start <= end: batch systems report times in
// whole seconds (SLURM truncates), so a start can seem to precede a submission
// made a fraction of a second earlier.
func clampTimes(submit, start, end time.Time) (time.Time, time.Time) {
	if start.Before(submit) {
		start = submit
	}
	if end.Before(start) {
		end = start
	}
	return start, end
}

func orNow(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	return t
}

type cancelReq struct {
	job, site string
	id        backends.JobID
	why       string
}

// track folds component states into the job state. b.mu is held. It returns
// the remote cancels to issue (siblings of a failed component, losing copies).
func (b *Broker) track(ctx context.Context, j *Job, now time.Time, rep *CycleReport) []cancelReq {
	if b.hasCopies(j) {
		return b.trackCopies(ctx, j, now, rep) // copies.go
	}
	var cancels []cancelReq
	if len(j.Comps) > 0 && j.Comps[0].Replica {
		// Replicated job: the first copy to run wins, the others are withdrawn.
		win := -1
		for k, c := range j.Comps {
			if c.State == backends.StateRunning || c.State == backends.StateCompleted {
				win = k
				break
			}
		}
		if win >= 0 {
			for k, c := range j.Comps {
				if k != win && !c.State.Final() {
					cancels = append(cancels, cancelReq{j.ID, c.Site, c.RemoteID, "copy withdrawn: " + j.Comps[win].Site + " started first"})
				}
			}
			w := j.Comps[win]
			w.Replica = false
			for k, c := range j.Comps {
				if k != win {
					delete(b.where, compKey{b.siteIdx[c.Site], c.RemoteID})
				}
			}
			j.Comps = []Component{w}
			b.addEvent(j, now, "replica-won", w.Site, "the copy at "+w.Site+" started first; the others are withdrawn")
		} else {
			allFailed := true
			for _, c := range j.Comps {
				allFailed = allFailed && c.State.Final()
			}
			if !allFailed {
				b.persistLater(ctx, j)
				return nil
			}
		}
	}

	allRunning, allDone, failedAt := true, true, -1
	for k, c := range j.Comps {
		if c.State != backends.StateRunning && c.State != backends.StateCompleted {
			allRunning = false
		}
		if c.State != backends.StateCompleted {
			allDone = false
		}
		if c.State.Final() && c.State != backends.StateCompleted && failedAt < 0 {
			failedAt = k
		}
	}
	switch {
	case failedAt >= 0:
		c := j.Comps[failedAt]
		for _, o := range j.Comps {
			if !o.State.Final() {
				cancels = append(cancels, cancelReq{j.ID, o.Site, o.RemoteID, "sibling component at " + c.Site + " ended " + c.State.String()})
			}
		}
		reason := fmt.Sprintf("component at %s ended %s", c.Site, c.State)
		if c.State == backends.StateFailed {
			reason += fmt.Sprintf(" with exit code %d", c.ExitCode)
		}
		if c.Reason != "" {
			reason += " (" + c.Reason + ")"
		}
		if (c.State == backends.StateLost || b.retries(j)) && j.Attempts-j.Moves < b.opts.MaxAttempts {
			b.retryAfter(j, c, now, reason) // copies.go
			break
		}
		f := outcome{state: Failed, reason: reason, exit: c.ExitCode, start: j.Start, end: orNow(c.End, now),
			kind: "failed", site: c.Site, msg: reason}
		if f.start.IsZero() && !c.Start.IsZero() {
			f.start, _ = latest(j.Comps, now)
		}
		if !f.start.IsZero() {
			f.start, f.end = clampTimes(j.Submit, f.start, f.end)
		}
		b.finish(j, f, now)
		rep.Ended++
	case allDone:
		f := outcome{state: Completed, kind: "completed", msg: "every component ended with exit code 0"}
		f.start, f.end = latest(j.Comps, now)
		f.start, f.end = clampTimes(j.Submit, f.start, f.end)
		b.finish(j, f, now)
		rep.Ended++
	case allRunning && j.State != Running:
		j.State = Running
		j.Start, _ = latest(j.Comps, now)
		j.Start, _ = clampTimes(j.Submit, j.Start, j.Start)
		if !b.opts.NoHistory {
			b.addEvent(j, now, "running", "", "running on "+j.Sites())
		}
	}
	b.persistLater(ctx, j)
	return cancels
}

// outcome is how a job ends, held back while its outputs are fetched.
type outcome struct {
	state           JobState
	reason          string
	exit            int
	start, end      time.Time
	kind, site, msg string // the final event
}

// finish ends a job with f. A job whose outputs are to be fetched ends only
// once they are here (fetchEnded applies f then), so whoever sees the job
// completed finds its outputs too. b.mu held.
func (b *Broker) finish(j *Job, f outcome, now time.Time) {
	if j.Req.OutputDir != "" && j.Outputs == nil && len(j.Comps) > 0 && j.final == nil && b.fetchAllowed(j, now) {
		j.final = &f
		b.ended = append(b.ended, j.ID)
		return
	}
	b.end(j, f, now)
}

// end applies a final outcome. b.mu held.
func (b *Broker) end(j *Job, f outcome, now time.Time) {
	j.State, j.Reason, j.ExitCode, j.final = f.state, f.reason, f.exit, nil
	if !f.start.IsZero() {
		j.Start = f.start
	}
	j.End = f.end
	b.addEvent(j, now, f.kind, f.site, f.msg)
	b.dropResv(j, ResvReleased, "")
}

// requeue puts a job whose attempt was lost back at its FCFS place. b.mu held.
func (b *Broker) requeue(j *Job, now time.Time, why string) {
	again := "queued again"
	if j.Resv != nil && j.Resv.State == ResvBound {
		again = "submitted into its reservation again"
	}
	b.requeueAs(j, now, "requeued", fmt.Sprintf("attempt %d lost: %s; %s", j.Attempts, why, again))
}

// requeueAs puts a job back at its FCFS place with an event of the given
// kind — or, for a job in its bound reservation, back to wait for it. b.mu
// held.
func (b *Broker) requeueAs(j *Job, now time.Time, kind, msg string) {
	b.unindex(j)
	j.Comps = nil
	b.addEvent(j, now, kind, "", msg)
	if j.Resv != nil && j.Resv.State == ResvBound {
		b.waitReserved(j)
		return
	}
	j.State = Queued
	// FCFS: by submission time, then id.
	pos, _ := slices.BinarySearchFunc(b.queue, j, func(id string, t *Job) int {
		q := b.jobs[id]
		if c := q.Submit.Compare(t.Submit); c != 0 {
			return c
		}
		return strings.Compare(q.ID, t.ID)
	})
	b.queue = slices.Insert(b.queue, pos, j.ID)
	b.pq = slices.Insert(b.pq, pos, b.policyJob(j))
}

// unindex forgets the components of a job that left the live set. b.mu held.
func (b *Broker) unindex(j *Job) {
	for _, c := range j.Comps {
		delete(b.where, compKey{b.siteIdx[c.Site], c.RemoteID})
	}
}

// compactLive drops ended or requeued jobs from the live list. b.mu held.
func (b *Broker) compactLive() {
	b.live = slices.DeleteFunc(b.live, func(id string) bool {
		j := b.jobs[id]
		if j == nil {
			return true // dropped (Options.Drop)
		}
		if j.State == Dispatched || j.State == Running {
			return false
		}
		b.unindex(j)
		return true
	})
}

func (b *Broker) doCancels(ctx context.Context, now time.Time, cs []cancelReq) {
	if len(cs) == 0 {
		return
	}
	b.mu.Lock()
	b.intendCancels(ctx, cs) // duties.go: recorded before they are sent
	b.mu.Unlock()
	for _, c := range cs {
		err := b.sites[b.siteIdx[c.site]].Backend.Cancel(ctx, c.id)
		b.markStale(b.siteIdx[c.site])
		b.mu.Lock()
		b.cancelSent(c)
		if j := b.jobs[c.job]; j != nil { // nil: dropped (Options.Drop)
			if err != nil {
				b.addEvent(j, now, "cancel-failed", c.site, fmt.Sprintf("cancelling %s: %v", c.id, err))
			} else {
				b.addEvent(j, now, "cancelled-remote", c.site, c.why)
			}
			_ = b.persist(ctx, j)
		}
		if err != nil {
			b.retryCancel(c, err) // outage.go
		}
		b.mu.Unlock()
	}
	b.mu.Lock()
	b.saveDuties(ctx)
	b.mu.Unlock()
}

// eachSite runs fn for every site: concurrently for real sites, in order for
// simulated ones (they answer at once, and order keeps replays deterministic).
func (b *Broker) eachSite(fn func(s int)) {
	var wg sync.WaitGroup
	for s := range b.sites {
		if b.sites[s].Simulated {
			fn(s)
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); fn(s) }()
	}
	wg.Wait()
}

// snapshot builds the policy's view of the world.
func (b *Broker) snapshot(ctx context.Context, now time.Time, rep *CycleReport) (*policy.Snapshot, error) {
	if b.snapSites == nil {
		b.snapSites = make([]policy.Site, len(b.sites))
		b.infoOK = make([]bool, len(b.sites))
		b.infoErr = make([]error, len(b.sites))
	}
	b.notesMu.Lock()
	stale := b.stale
	b.stale = 0
	b.notesMu.Unlock()
	b.eachSite(func(s int) {
		// A site that pushes its changes is asked again only when it changed
		// (or when asking failed last time); the others every cycle.
		if b.sites[s].Pushes && b.infoOK[s] && stale&(1<<uint(min(s, 63))) == 0 && s < 64 {
			return
		}
		in, err := b.sites[s].Backend.Info(ctx)
		b.infoErr[s] = err
		b.infoOK[s] = err == nil && in != nil
		ps := &b.snapSites[s]
		*ps = policy.Site{Name: b.sites[s].Name, H: b.sites[s].H, Busy: ps.Busy[:0]}
		if !b.infoOK[s] {
			ps.Down = true
			return
		}
		ps.Nodes, ps.Free = in.Nodes, in.FreeNodes
		ps.Shape = policy.NodeShape{Cores: in.CoresPerNode, MemBytes: in.MemPerNode, GPUs: in.GPUsPerNode}
		ps.Trust = b.trust[s]
		for _, a := range in.Busy {
			ps.Busy = append(ps.Busy, policy.Hold{Nodes: a.Nodes, Until: a.Until})
		}
	})
	b.mu.Lock()
	for s := range b.sites {
		if !b.infoOK[s] {
			rep.Errors = append(rep.Errors, fmt.Errorf("site %s: info: %w", b.sites[s].Name, b.infoErr[s]))
			b.downKeepsSize(s) // unreachable.go
		} else if b.see(s, b.snapSites[s].Nodes, b.snapSites[s].Shape); b.capacity[s] != b.snapSites[s].Nodes {
			b.learned(ctx, now, s, b.snapSites[s].Nodes)
		}
	}
	b.mu.Unlock()
	// The snapshot and its buffers are reused from cycle to cycle: the
	// policy reads them only during Plan and must not modify them.
	up := b.uplinks()
	b.snap = policy.Snapshot{Now: now, Sites: b.snapSites, Links: b.siteLinks(up), MultiSite: b.opts.MultiSite,
		Quiet: b.opts.NoHistory, Uplinks: up}
	b.mu.Lock()
	// Only jobs submitted by the cycle's now: a submission that arrived while
	// this cycle was polling the sites is planned by the next cycle, so no
	// job is dispatched "before" it was submitted. Concurrent submissions
	// may enter the queue in another order than their times (each takes its
	// time before it is stored), so a late job may sit before an earlier
	// one: every job is checked, and the queue is copied only when one is
	// left out. The cap keeps an append by the policy from writing into the
	// broker's own view of the queue.
	b.snap.Queue = b.tierOrder(b.submittedBy(now)) // tiers.go
	b.mu.Unlock()
	return &b.snap, nil
}

// submittedBy is the policy's view of the queue without the jobs submitted
// after now, b.pq itself (capped) when there are none. Called with b.mu held.
func (b *Broker) submittedBy(now time.Time) []policy.Job {
	late := slices.IndexFunc(b.pq, func(j policy.Job) bool { return j.Submit.After(now) })
	if late < 0 {
		return b.pq[:len(b.pq):len(b.pq)]
	}
	b.byNow = append(b.byNow[:0], b.pq[:late]...)
	for _, j := range b.pq[late+1:] {
		if !j.Submit.After(now) {
			b.byNow = append(b.byNow, j)
		}
	}
	return b.byNow[:len(b.byNow):len(b.byNow)]
}

// uplinks is each site's measured transfer cost from this machine, for
// jobs submitted from no site, or nil when no site has measured anything.
// Measurements come from the sites' own transfers (backends.LinkEstimator).
func (b *Broker) uplinks() []policy.Link {
	var out []policy.Link
	for s, sc := range b.sites {
		le, ok := backends.AsLinkEstimator(sc.Backend)
		if !ok {
			continue
		}
		spb, lat, ok := le.LinkEstimate()
		if !ok {
			continue
		}
		if out == nil {
			if cap(b.uplinkBuf) < len(b.sites) {
				b.uplinkBuf = make([]policy.Link, len(b.sites))
			}
			out = b.uplinkBuf[:len(b.sites)]
			clear(out)
		}
		out[s] = policy.Link{SecPerByte: spb, Latency: lat}
	}
	return out
}

// markStale notes that a pushing site's Info has changed.
func (b *Broker) markStale(s int) {
	b.notesMu.Lock()
	b.stale |= 1 << uint(min(s, 63))
	b.notesMu.Unlock()
}

// policyJob is the policy's view of a queued job. b.mu held.
func (b *Broker) policyJob(j *Job) policy.Job {
	r := &j.Req
	pj := policy.Job{ID: j.ID, Width: r.Nodes, Estimate: r.Estimate, Submit: j.Submit, Origin: -1,
		DataSize: r.DataSize, Deadline: r.Deadline, NoSplit: r.NoSplit, BestEffort: r.DeadlinePolicy == DeadlineBestEffort}
	if r.Worth != nil {
		pj.Worth = *r.Worth
	}
	if r.Origin != "" {
		pj.Origin = b.siteIdx[r.Origin]
	}
	for _, n := range r.Sites {
		pj.Allowed = append(pj.Allowed, b.siteIdx[n])
	}
	for _, n := range r.Prefer {
		pj.Preferred = append(pj.Preferred, b.siteIdx[n])
	}
	pj.PerNode = policy.NodeShape{Cores: r.CoresPerNode, MemBytes: r.MemPerNode, GPUs: r.GPUsPerNode}
	if len(j.Refused) > 0 {
		pj.Allowed = pj.Allowed[:0]
		for _, n := range b.allowedLeft(j) {
			pj.Allowed = append(pj.Allowed, b.siteIdx[n])
		}
	}
	if len(j.Avoid) > 0 {
		pj.Allowed = b.avoiding(j, pj.Allowed) // copies.go
	}
	return pj
}

// spec builds the JobSpec of component k of n of job j at a site. For
// simulated sites the walltime and the real run time include the predicted
// input transfer (the nodes are held while the data moves, as in paper 000).
func (b *Broker) spec(j *Job, k, n int, site string, nodes int, opt policy.Option) *backends.JobSpec {
	r := &j.Req
	sim := b.sites[b.siteIdx[site]].Simulated
	sp := &backends.JobSpec{GridID: RemoteTag(j.ID, j.Attempts), Component: k, Components: n, Name: r.Name,
		Command: r.Command, Script: r.Script, WorkDir: r.WorkDir, Nodes: nodes, CoresPerNode: r.CoresPerNode,
		Inputs: r.Inputs, Outputs: r.Outputs, MemPerNode: r.MemPerNode, GPUsPerNode: r.GPUsPerNode, Setup: r.Setup,
		Partition: r.SiteOptions[site].Partition, Account: r.SiteOptions[site].Account}
	if !sim { // a simulated site runs no command: it never reads the environment
		sp.Env = make(map[string]string, len(r.Env)+3)
		for key, v := range r.Env {
			sp.Env[key] = v
		}
		sp.Env["GRIDSUB_JOB_ID"] = j.ID
		sp.Env["GRIDSUB_COMPONENT"] = strconv.Itoa(k)
		sp.Env["GRIDSUB_COMPONENTS"] = strconv.Itoa(n)
	}
	run := opt.Runtime
	if run <= 0 {
		run = r.Estimate
	}
	sp.Walltime = ceilSecond(run)
	if sim {
		wall, simRun := SimTimes(opt.Runtime, opt.Transfer, r.Estimate, r.Sim.Runtime)
		sp.Sim = backends.SimHints{Runtime: simRun, ExitCode: r.Sim.ExitCode}
		sp.Walltime = wall
	}
	return sp
}

// SimTimes is the walltime and the simulated run time the broker gives a
// simulated site for a job with the given estimate (on the reference
// machine) placed where the model predicts run (0 or less: the estimate)
// after a transfer of xfer: the input transfer counts inside the
// allocation, as in paper 000, and the job's actual run time on the
// reference machine (0 or less: the estimate; it may exceed the estimate,
// and the site then kills the job at its walltime) is scaled as the
// estimate is. Both are rounded up to the second, as batch systems take
// them. The trace replay's direct driver uses the same rule.
func SimTimes(run, xfer, estimate, actual time.Duration) (walltime, simRuntime time.Duration) {
	if run <= 0 {
		run = estimate
	}
	if actual <= 0 {
		actual = estimate
	}
	scale := float64(run) / float64(estimate)
	return ceilSecond(run + xfer), ceilSecond(time.Duration(math.Round(float64(actual)*scale)) + xfer)
}

func ceilSecond(d time.Duration) time.Duration {
	if r := d % time.Second; r != 0 {
		d += time.Second - r
	}
	return d
}

// SetTrust sets the sites' trust scores the policy sees from the next cycle
// on (policy.Site.Trust, in (0,1]); a site not in scores keeps its score,
// and 0 means unset. A score outside [0,1] (or NaN) is ignored: the
// policy refuses such a snapshot, which would stop all planning.
func (b *Broker) SetTrust(scores map[string]float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, v := range scores {
		if s, ok := b.siteIdx[name]; ok && v >= 0 && v <= 1 {
			b.trust[s] = v
			if s < len(b.snapSites) {
				b.snapSites[s].Trust = v // a site that pushes its changes is not read again until it changes
			}
		}
	}
}
