package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
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
	// ErrOverLimit: the submission would take its user over a limit of
	// Options.Users (max_queued); the API answers 429.
	ErrOverLimit = errors.New("over a user limit")
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
	// Users bound each user's jobs (userlimits.go): by user name, and
	// DefaultUser ("default") for every user without an entry of their own.
	Users map[string]UserLimits
	// Owner is the daemon's own user: the owner of jobs whose
	// Request.Owner is "" (limits and fair share count them as theirs).
	Owner string
	// Identities gives each user's own backend at a site (identity.go):
	// their jobs are submitted, polled, cancelled, found and fetched
	// through it. nil: every job uses its site's configured backend.
	Identities Identities
	// FairShareHalfLife is how fast the queue order (Policies.Order)
	// forgets each user's use of the sites (0: policy.DefaultHalfLife).
	FairShareHalfLife time.Duration
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
	// OffLimits are directories no job may read an input from or write
	// an output into, even inside the roots: the daemon's state directory
	// (its job store, the tokens' hashes, every user's site keys). An
	// output directory that holds one is refused too.
	OffLimits []string
	// FetchWorkers bounds the output fetches of real sites running at once
	// (default DefaultFetchWorkers); FetchTimeout bounds each job's fetch
	// (default DefaultFetchTimeout). See stage_fetch.go.
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

// part is what every part of the broker works on: the ledger, the site
// table and the options. The parts name the other parts they use by
// embedding them, so each type's dependencies are its fields.
type part struct {
	*ledger
	*siteTable
	opts *Options
}

// Broker is the grid broker. It is safe for concurrent use; cycles are
// serialised. It holds the ledger and the site table, the cycle's stages,
// and the features that are not stages; its methods are the broker's API
// and the order of the cycle.
type Broker struct {
	opts    Options
	cycleMu sync.Mutex // one cycle (or cancel) at a time

	*ledger    // jobs, queue, indices, events, store writes (ledger.go)
	*siteTable // sites, their capabilities and what was last seen of them (sitetable.go)

	stages pipeline // the cycle's stages (cycle.go)

	in     *intake       // Submit's rules (validate.go)
	duties *duties       // owed cancels and late watches (duties.go); the cancel stage (stage_cancel.go)
	resv   *reservations // advance reservations (reserve.go)
	copies *copies       // QoS-tier copies (copies.go)
	rm     *remapper     // moves of waiting jobs (remap.go)
	grp    *groups       // groups and dependencies (group.go, deps.go)
	rec    *reconciler   // dispatch intents settled by tag (recover.go)
}

// New checks the options and returns a broker.
func New(opts Options) (*Broker, error) {
	if len(opts.Sites) == 0 {
		return nil, fmt.Errorf("%w: no sites configured", ErrBadRequest)
	}
	if opts.Planner == nil {
		return nil, fmt.Errorf("%w: no planner configured", ErrBadRequest)
	}
	b := &Broker{opts: opts}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b.siteTable = &siteTable{sites: opts.Sites, siteIdx: map[string]int{}, links: opts.Links, multiSite: opts.MultiSite, tiers: opts.Tiers, ids: opts.Identities, self: opts.Owner,
		capacity: make([]int, len(opts.Sites)), trust: make([]float64, len(opts.Sites))}
	b.ledger = newLedger(&opts, b.siteTable, log)
	b.wire()
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
	if err := b.in.setRoots(opts); err != nil {
		return nil, err
	}
	return b, nil
}

// wire builds the parts of the broker over its ledger and site table.
func (b *Broker) wire() {
	pt := part{b.ledger, b.siteTable, &b.opts}
	p := &b.stages
	b.in = &intake{part: pt}
	b.duties = &duties{part: pt}
	p.cancel = b.duties
	p.submit = &submitter{part: pt, duties: b.duties}
	b.resv = &reservations{part: pt, duties: b.duties, submitter: p.submit, resFailed: make([]bool, len(b.sites))}
	p.submit.reservations = b.resv
	p.track = &tracker{part: pt, reservations: b.resv, intake: b.in}
	p.snapshot = &snapshotter{part: pt, reservations: b.resv}
	b.copies = &copies{part: pt, duties: b.duties, submitter: p.submit, tracker: p.track, snap: &p.snapshot.snap}
	p.track.copies = b.copies
	p.snapshot.copies = b.copies
	b.rm = &remapper{part: pt, duties: b.duties, submitter: p.submit, snap: &p.snapshot.snap}
	b.grp = &groups{part: pt, intake: b.in, reservations: b.resv}
	b.rec = &reconciler{part: pt, duties: b.duties, tracker: p.track}
	p.poll = &poller{part: pt, duties: b.duties, remapper: b.rm}
	p.fetch = &fetcher{part: pt, tracker: p.track}
	p.plan = &planStage{part: pt, planner: b.opts.Planner}
	p.dispatch = &dispatcher{part: pt, copies: b.copies, planner: b.opts.Planner, resv: b.resv}
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

// Submit validates a request and queues it. It returns the new job (a copy).
// Every client (the CLI, the HTTP API, a trace replay) comes through here,
// so every job obeys the same rules (bridge/validate.go, bridge/jobrules):
// a request that breaks one is refused with a RequestError naming each
// field (it wraps ErrBadRequest), and nothing is stored. The stored
// request has its local paths resolved (Inputs[i].Local, OutputDir).
func (b *Broker) Submit(ctx context.Context, req Request, now time.Time) (*Job, error) {
	req = req.clone() // validate normalises paths in place
	if len(b.opts.Users) > 0 {
		b.in.limitMu.Lock()
		defer b.in.limitMu.Unlock()
		if err := b.checkQueued(&req, submissionSize(&req)); err != nil {
			return nil, err
		}
	}
	if req.grouped() || req.hasDeps() {
		return b.grp.submitHeld(ctx, req, now)
	}
	if err := b.in.validate(&req, now); err != nil {
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
	if err := checkDeadlineFields(&req); err != nil {
		return nil, err
	}
	warn, err := b.in.feasible(ctx, &req, now) // also the deadline rule
	if err != nil {
		return nil, err
	}
	if req.Window != nil {
		if err := checkWindow(&req, now); err != nil {
			return nil, err
		}
		b.resv.learnCapacity(ctx, now)
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
	b.in.assignTier(j, now)
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
		if ev != nil {
			b.announce(j, *ev)
		}
		ev = nil // handed out above, before the admission's own event
		b.resv.admit(j, now)
		b.mu.Unlock()
	}
	// Stored before anyone can see it, and outside the broker's lock: the job
	// is not shared yet, and concurrent submissions can then share the
	// store's commits instead of queueing for one each.
	if err := b.putNew(ctx, j); err != nil {
		if j.State == Reserved {
			b.mu.Lock()
			b.resv.rrg.Remove(j.ID)
			b.mu.Unlock()
		}
		return nil, fmt.Errorf("storing job: %w", err)
	}
	b.mu.Lock()
	if ev != nil {
		b.announce(j, *ev)
	}
	b.add(j)
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

// ViewEach calls fn with every job itself, in no particular order, under
// the broker's lock, without the copies Jobs makes: for reading a little
// of thousands of jobs often (the daemon's queue rows, made after every
// cycle). fn must not keep j or anything in it but strings, change it, or
// call the broker.
func (b *Broker) ViewEach(fn func(j *Job)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, j := range b.jobs {
		fn(j)
	}
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

// Cancel cancels a job: a queued job leaves the queue, a dispatched or
// running job is cancelled at every site.
func (b *Broker) Cancel(ctx context.Context, id string, now time.Time) error {
	b.cycleMu.Lock()
	defer b.cycleMu.Unlock()
	defer b.flushEvents()
	defer b.dropEnded()
	b.mu.Lock()
	j, ok := b.jobs[id]
	if !ok {
		b.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if j.State.Final() {
		b.mu.Unlock()
		return fmt.Errorf("%w: %s is %s", ErrFinal, id, j.State)
	}
	var cs []cancelReq
	for _, c := range j.Comps {
		if !c.State.Final() && c.RemoteID != "" { // a passive backup was never submitted
			cs = append(cs, cancelReq{id, c.Site, c.RemoteID, "cancelled by the user"})
		}
	}
	j.Waiting = ""
	b.endAs(j, now, Cancelled, "cancelled", "", "cancelled by the user")
	if j.Group != nil {
		cs = append(cs, b.grp.cancelKids(ctx, j, now)...)
	}
	b.dequeue(id)
	b.resv.dropResv(j, ResvReleased, "cancelled by the user")
	b.compactLive()
	err := b.save(ctx, j)
	b.mu.Unlock()
	b.duties.doCancels(ctx, now, cs)
	b.resv.releaseNative(ctx, now)
	return err
}

func partsString(names []string, parts []policy.Part) string {
	var sb strings.Builder
	for i, p := range parts {
		if i > 0 {
			sb.WriteByte('+')
		}
		fmt.Fprintf(&sb, "%s:%d", names[p.Site], p.Nodes)
	}
	return sb.String()
}

// PartsString formats a placement as "Beijing:32+Shanghai:16".
func PartsString(names []string, parts []policy.Part) string { return partsString(names, parts) }
