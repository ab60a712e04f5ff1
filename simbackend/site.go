package simbackend

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// maxWalltime bounds job walltimes so that virtual times stay far from
// int64 overflow.
const maxWalltime = 100 * 365 * 24 * time.Hour

// SiteConfig describes a simulated site.
type SiteConfig struct {
	Name         string
	Nodes        int     // schedulable nodes (>= 1)
	CoresPerNode int     // cores per node (0 = 1)
	MemPerNode   int64   // memory per node in bytes (0 = not modelled: any request fits)
	GPUsPerNode  int     // GPUs per node (0 = none)
	H            float64 // heterogeneity factor reported to the broker (0 = 1.0); run times arrive already scaled
	EASY         EASYOptions
	// OnChange, if set, is called after every job state change (submitted
	// as pending, started, ended, cancelled) with the job's new status. It
	// runs on the goroutine that caused the change (a Site method's caller,
	// or the engine's driver for starts and ends) after the site's lock is
	// released, so it may call Site and Engine methods; it must not block
	// for long. Changes made by one call arrive in the order they happened;
	// deliveries of calls on different goroutines may interleave.
	OnChange func(backends.JobStatus)
	// ForgetEnded drops a job once it has ended and its change was handed
	// to OnChange: Status then reports it lost and FindByGridID no longer
	// finds it, as a batch system purges old jobs. For trace replays, whose
	// broker learns every change by push, so that the site does not keep
	// every job of the trace. Only with OnChange.
	ForgetEnded bool
}

// Site is a simulated batch-system site on an Engine's virtual clock. It
// implements backends.Backend, Finder, Fetcher and Reserver. Jobs queue in
// the site's own FCFS queue and are started by the package's EASY
// backfilling scheduler (the same code as the trace replay); a job holds its
// nodes for spec.Sim.Runtime (spec.Walltime when 0) and is killed at
// spec.Walltime (StateTimeout). Its exit code is spec.Sim.ExitCode
// (StateFailed when non-zero).
//
// All methods are safe for concurrent use; they take the engine's lock.
type Site struct {
	e      *Engine
	cfg    SiteConfig
	sched  *easy
	jobs   []*siteJob // id n is jobs[n-1]
	byGrid map[string][]*siteJob
	resvs  []*siteResv // id n is resvs[n-1]
	nQueue int
	nRun   int
	notes  []backends.JobStatus
	down   string // non-empty: the site refuses service (SetDown)
}

var (
	_ backends.Backend  = (*Site)(nil)
	_ backends.Finder   = (*Site)(nil)
	_ backends.Fetcher  = (*Site)(nil)
	_ backends.Reserver = (*Site)(nil)
)

type siteJob struct {
	sjob
	id       backends.JobID
	spec     backends.JobSpec
	state    backends.State
	reason   string
	exit     int
	submit   int64
	end      int64
	endEv    *Event
	endState backends.State // state the job ends in if not cancelled
	endWhy   string
	resv     *siteResv
}

type siteResv struct {
	id    backends.ResvID
	name  string
	r     *resvState
	state string // "pending", "active", "ended", "deleted"
	jobs  []*siteJob
	evs   []*Event
}

// NewSite builds a site on e. It returns an error naming the bad field when
// cfg is invalid.
func NewSite(e *Engine, cfg SiteConfig) (*Site, error) {
	switch {
	case e == nil:
		return nil, fmt.Errorf("simbackend: NewSite needs an engine")
	case cfg.Name == "":
		return nil, fmt.Errorf("simbackend: site name is empty")
	case cfg.Nodes < 1:
		return nil, fmt.Errorf("simbackend: site %s: nodes must be >= 1, got %d", cfg.Name, cfg.Nodes)
	case cfg.MemPerNode < 0 || cfg.GPUsPerNode < 0:
		return nil, fmt.Errorf("simbackend: site %s: memory and GPUs per node must be >= 0, got %d and %d", cfg.Name, cfg.MemPerNode, cfg.GPUsPerNode)
	case cfg.CoresPerNode < 0:
		return nil, fmt.Errorf("simbackend: site %s: cores per node must be >= 0, got %d", cfg.Name, cfg.CoresPerNode)
	case cfg.H < 0:
		return nil, fmt.Errorf("simbackend: site %s: h must be > 0, got %g", cfg.Name, cfg.H)
	}
	if cfg.CoresPerNode == 0 {
		cfg.CoresPerNode = 1
	}
	if cfg.H == 0 {
		cfg.H = 1
	}
	s := &Site{e: e, cfg: cfg, byGrid: map[string][]*siteJob{}}
	s.sched = newEASY(cfg.Nodes, cfg.EASY, s.onStart)
	return s, nil
}

// Name is the site's name.
func (s *Site) Name() string { return s.cfg.Name }

// H is the site's heterogeneity factor.
func (s *Site) H() float64 { return s.cfg.H }

// Engine is the engine the site runs on.
func (s *Site) Engine() *Engine { return s.e }

func (s *Site) endClass() int {
	if s.cfg.EASY.ReferenceCompatible {
		return ClassLate
	}
	return ClassEarly
}

// lock/unlock wrap the engine lock; unlock delivers the OnChange notes
// gathered meanwhile.
func (s *Site) lock() { s.e.mu.Lock() }

func (s *Site) unlock() {
	notes := s.notes
	s.notes = nil
	s.e.mu.Unlock()
	if s.cfg.OnChange != nil {
		for _, n := range notes {
			s.cfg.OnChange(n)
		}
	}
}

func (s *Site) note(j *siteJob) {
	if s.cfg.OnChange != nil {
		s.notes = append(s.notes, s.status(j))
	}
}

func (s *Site) ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sim site %s: %w", s.cfg.Name, err)
	}
	s.e.mu.Lock()
	down := s.down
	s.e.mu.Unlock()
	if down != "" {
		return fmt.Errorf("sim site %s: %w: %s", s.cfg.Name, backends.ErrUnavailable, down)
	}
	return nil
}

// SetDown simulates an outage of the site's front end (login node, SSH,
// controller): until SetUp, every Backend, Finder, Fetcher and Reserver
// method fails with an error wrapping backends.ErrUnavailable that carries
// reason. The batch system itself keeps running on the virtual clock: queued
// jobs start and running jobs end, and OnChange still reports them.
func (s *Site) SetDown(reason string) {
	if reason == "" {
		reason = "site down"
	}
	s.lock()
	s.down = reason
	s.unlock()
}

// SetUp ends an outage begun by SetDown.
func (s *Site) SetUp() {
	s.lock()
	s.down = ""
	s.unlock()
}

// Info reports the site's state now. Busy has one entry per running job
// (nodes until start+walltime) and one per active reservation (its nodes
// until its end; the reservation's own jobs run inside it), so FreeNodes +
// sum(Busy.Nodes) = Nodes.
func (s *Site) Info(ctx context.Context) (*backends.SiteInfo, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	s.lock()
	defer s.unlock()
	now := s.e.nowNS()
	info := &backends.SiteInfo{
		Name: s.cfg.Name, Kind: "sim", Nodes: s.cfg.Nodes, CoresPerNode: s.cfg.CoresPerNode,
		MemPerNode: s.cfg.MemPerNode, GPUsPerNode: s.cfg.GPUsPerNode,
		Partitions: []string{"batch"}, Queued: s.nQueue, Running: s.nRun,
		Busy: make([]backends.Allocation, 0, len(s.sched.running)+len(s.sched.resvs)),
	}
	free := s.cfg.Nodes
	for _, j := range s.sched.running {
		if j.estEnd <= now {
			continue // ends at this instant (its end is being handled)
		}
		free -= j.width
		info.Busy = append(info.Busy, backends.Allocation{Nodes: j.width, Until: s.e.timeOf(j.estEnd)})
	}
	for _, r := range s.sched.resvs {
		if r.start <= now && now < r.end {
			free -= r.nodes
			info.Busy = append(info.Busy, backends.Allocation{Nodes: r.nodes, Until: s.e.timeOf(r.end)})
		}
	}
	info.FreeNodes = free
	return info, nil
}

// Submit queues a job. The spec is validated (backends.ErrInvalidSpec for a
// bad spec or one asking for more nodes or cores than the site has;
// backends.ErrRejected for an unknown or ended reservation, or one smaller
// than the job). Ids are "1", "2", ... in submission order.
func (s *Site) Submit(ctx context.Context, spec *backends.JobSpec) (backends.JobID, error) {
	if err := s.ctxErr(ctx); err != nil {
		return "", err
	}
	if spec == nil {
		return "", fmt.Errorf("sim site %s: %w: nil spec", s.cfg.Name, backends.ErrInvalidSpec)
	}
	if err := spec.Validate(); err != nil {
		return "", fmt.Errorf("sim site %s: %w", s.cfg.Name, err)
	}
	switch {
	case spec.Nodes > s.cfg.Nodes:
		return "", fmt.Errorf("sim site %s: %w: job asks for %d nodes, the site has %d", s.cfg.Name, backends.ErrInvalidSpec, spec.Nodes, s.cfg.Nodes)
	case spec.CoresPerNode > s.cfg.CoresPerNode:
		return "", fmt.Errorf("sim site %s: %w: job asks for %d cores per node, nodes have %d", s.cfg.Name, backends.ErrInvalidSpec, spec.CoresPerNode, s.cfg.CoresPerNode)
	case spec.MemPerNode > s.cfg.MemPerNode && s.cfg.MemPerNode > 0:
		return "", fmt.Errorf("sim site %s: %w: job asks for %d bytes of memory per node, nodes have %d", s.cfg.Name, backends.ErrInvalidSpec, spec.MemPerNode, s.cfg.MemPerNode)
	case spec.GPUsPerNode > s.cfg.GPUsPerNode:
		return "", fmt.Errorf("sim site %s: %w: job asks for %d GPUs per node, nodes have %d", s.cfg.Name, backends.ErrInvalidSpec, spec.GPUsPerNode, s.cfg.GPUsPerNode)
	case spec.Walltime > maxWalltime:
		return "", fmt.Errorf("sim site %s: %w: walltime %s exceeds the simulator's limit of %s", s.cfg.Name, backends.ErrInvalidSpec, spec.Walltime, maxWalltime)
	case spec.Sim.Runtime < 0:
		return "", fmt.Errorf("sim site %s: %w: simulated runtime must be >= 0, got %s", s.cfg.Name, backends.ErrInvalidSpec, spec.Sim.Runtime)
	}
	s.lock()
	defer s.unlock()
	now := s.e.nowNS()
	var rv *siteResv
	if spec.Reservation != "" {
		rv = s.findResv(spec.Reservation)
		switch {
		case rv == nil:
			return "", fmt.Errorf("sim site %s: %w: no reservation %q", s.cfg.Name, backends.ErrRejected, spec.Reservation)
		case rv.state == "ended" || rv.state == "deleted":
			return "", fmt.Errorf("sim site %s: %w: reservation %q has %s", s.cfg.Name, backends.ErrRejected, spec.Reservation, rv.state)
		case spec.Nodes > rv.r.nodes:
			return "", fmt.Errorf("sim site %s: %w: job asks for %d nodes, reservation %q holds %d", s.cfg.Name, backends.ErrRejected, spec.Nodes, spec.Reservation, rv.r.nodes)
		}
	}
	// The site keeps what it reads later (status, the simulated run,
	// FetchOutputs), copied; not the environment, inputs or script body,
	// which a simulated run never looks at and which, kept for every job of
	// a trace replay, were a quarter of its memory.
	cp := *spec
	cp.Command = append([]string(nil), spec.Command...)
	cp.Outputs = append([]string(nil), spec.Outputs...)
	cp.Env, cp.Inputs, cp.Script = nil, nil, ""
	j := &siteJob{
		sjob:   sjob{width: spec.Nodes, est: int64(spec.Walltime)},
		id:     backends.JobID(strconv.Itoa(len(s.jobs) + 1)),
		spec:   cp,
		state:  backends.StatePending,
		reason: "Priority",
		exit:   -1,
		submit: now,
		resv:   rv,
	}
	j.owner = j
	if rv != nil {
		j.sjob.resv = rv.r
		j.reason = "Reservation"
		rv.jobs = append(rv.jobs, j)
	}
	s.jobs = append(s.jobs, j)
	s.byGrid[spec.GridID] = append(s.byGrid[spec.GridID], j)
	s.nQueue++
	s.note(j)
	s.sched.submit(&j.sjob, now)
	return j.id, nil
}

// RunLength is how long a simulated site runs a job: its simulated run time
// (0: its walltime), cut at its walltime, where the site kills it (killed).
// The trace replay's direct driver uses the same rule.
func RunLength(walltime, simRuntime time.Duration) (d time.Duration, killed bool) {
	if simRuntime == 0 {
		simRuntime = walltime
	}
	if simRuntime > walltime {
		return walltime, true
	}
	return simRuntime, false
}

// onStart is the scheduler's start callback (engine lock held).
func (s *Site) onStart(sj *sjob, now int64) {
	j := sj.owner.(*siteJob)
	j.state, j.reason = backends.StateRunning, ""
	s.nQueue--
	s.nRun++
	run, killed := RunLength(j.spec.Walltime, j.spec.Sim.Runtime)
	dur := int64(run)
	j.endState, j.endWhy, j.exit = backends.StateCompleted, "", j.spec.Sim.ExitCode
	if j.exit != 0 {
		j.endState, j.endWhy = backends.StateFailed, "NonZeroExitCode"
	}
	if killed {
		j.endState, j.endWhy, j.exit = backends.StateTimeout, "TimeLimit", -1
	}
	if j.resv != nil && now+dur > j.resv.r.end {
		dur = j.resv.r.end - now
		j.endState, j.endWhy, j.exit = backends.StateTimeout, "ReservationEnded", -1
	}
	j.end = now + dur
	j.endEv = s.e.schedule(j.end, s.endClass(), func() {
		s.lock()
		defer s.unlock()
		s.finish(j, j.endState, j.endWhy)
	})
	s.note(j)
}

// finish ends running job j now in state st and runs a scheduling pass.
func (s *Site) finish(j *siteJob, st backends.State, why string) {
	if j.state != backends.StateRunning {
		return
	}
	now := s.e.nowNS()
	if j.endEv != nil {
		s.e.cancel(j.endEv)
	}
	j.state, j.reason, j.end = st, why, now
	if st == backends.StateCancelled {
		j.exit = -1
	}
	s.nRun--
	s.note(j)
	s.sched.end(&j.sjob, now)
	s.forget(j)
}

// forget drops an ended job (SiteConfig.ForgetEnded).
func (s *Site) forget(j *siteJob) {
	if !s.cfg.ForgetEnded || s.cfg.OnChange == nil || j.resv != nil {
		return
	}
	if n, err := strconv.Atoi(string(j.id)); err == nil && n >= 1 && n <= len(s.jobs) {
		s.jobs[n-1] = nil
	}
	same := s.byGrid[j.spec.GridID]
	if len(same) == 1 {
		delete(s.byGrid, j.spec.GridID)
		return
	}
	s.byGrid[j.spec.GridID] = slices.DeleteFunc(same, func(o *siteJob) bool { return o == j })
}

// Status answers for every id in order; an id the site never issued is
// reported as StateLost with a reason.
func (s *Site) Status(ctx context.Context, ids []backends.JobID) ([]backends.JobStatus, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	s.lock()
	defer s.unlock()
	out := make([]backends.JobStatus, len(ids))
	for i, id := range ids {
		j := s.job(id)
		if j == nil {
			why := fmt.Sprintf("sim site %s never issued job id %q", s.cfg.Name, id)
			if n, err := strconv.Atoi(string(id)); err == nil && n >= 1 && n <= len(s.jobs) {
				why = fmt.Sprintf("sim site %s no longer keeps ended job %q (ForgetEnded)", s.cfg.Name, id)
			}
			out[i] = backends.JobStatus{ID: id, State: backends.StateLost, ExitCode: -1, Reason: why}
			continue
		}
		out[i] = s.status(j)
	}
	return out, nil
}

func (s *Site) job(id backends.JobID) *siteJob {
	n, err := strconv.Atoi(string(id))
	if err != nil || n < 1 || n > len(s.jobs) || strconv.Itoa(n) != string(id) {
		return nil
	}
	return s.jobs[n-1]
}

func (s *Site) status(j *siteJob) backends.JobStatus {
	st := backends.JobStatus{ID: j.id, GridID: j.spec.GridID, Name: j.spec.Name, State: j.state, Reason: j.reason, ExitCode: -1}
	if j.state.Final() {
		st.ExitCode = j.exit
	}
	if j.state == backends.StatePending && j.resv == nil {
		// As SLURM says it: the head waits for resources, the rest behind it.
		if q := s.sched.queue; len(q) > 0 && q[0] == &j.sjob {
			st.Reason = "Resources"
		}
	}
	if j.startSeq > 0 { // the job has started
		st.Start = s.e.timeOf(j.start)
		st.NodeList = fmt.Sprintf("%s[%d nodes]", s.cfg.Name, j.width)
	}
	if j.state.Final() {
		st.End = s.e.timeOf(j.end)
	}
	return st
}

// Cancel cancels a pending or running job (StateCancelled). Cancelling an
// ended job is not an error; an id the site never issued wraps
// backends.ErrUnknownJob.
func (s *Site) Cancel(ctx context.Context, id backends.JobID) error {
	if err := s.ctxErr(ctx); err != nil {
		return err
	}
	s.lock()
	defer s.unlock()
	j := s.job(id)
	if j == nil {
		return fmt.Errorf("sim site %s: %w: %q", s.cfg.Name, backends.ErrUnknownJob, id)
	}
	s.cancel(j, "CancelledByUser")
	return nil
}

func (s *Site) cancel(j *siteJob, why string) {
	switch j.state {
	case backends.StatePending:
		j.state, j.reason, j.end, j.exit = backends.StateCancelled, why, s.e.nowNS(), -1
		s.nQueue--
		s.note(j)
		s.sched.dequeue(&j.sjob, s.e.nowNS())
		s.forget(j)
	case backends.StateRunning:
		s.finish(j, backends.StateCancelled, why)
	}
}

// FindByGridID returns every job tagged with gridID, in submission order.
func (s *Site) FindByGridID(ctx context.Context, gridID string) ([]backends.JobStatus, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	s.lock()
	defer s.unlock()
	var out []backends.JobStatus
	for _, j := range s.byGrid[gridID] {
		out = append(out, s.status(j))
	}
	return out, nil
}

// FetchOutputs writes what the simulated job produced into localDir: its
// gridsub.out saying what ran where and when (in virtual time) and how it
// ended, its gridsub.err (the reason a job was killed, else empty; the
// same text ReadLog shows), plus an empty file for each of the spec's outputs (spec may be nil:
// the submitted spec's outputs are used). The job must have ended.
func (s *Site) FetchOutputs(ctx context.Context, id backends.JobID, spec *backends.JobSpec, localDir string) ([]string, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	s.lock()
	j := s.job(id)
	if j == nil {
		s.unlock()
		return nil, fmt.Errorf("sim site %s: %w: %q", s.cfg.Name, backends.ErrUnknownJob, id)
	}
	st := s.status(j)
	js := j.spec
	ran := j.startSeq > 0
	s.unlock()
	if !st.State.Final() {
		return nil, fmt.Errorf("sim site %s: %w: job %s is %s; outputs exist once it has ended", s.cfg.Name, backends.ErrRejected, id, st.State)
	}
	outs := js.Outputs
	if spec != nil {
		outs = spec.Outputs
	}
	for _, o := range outs {
		if err := checkRel(o); err != nil {
			return nil, fmt.Errorf("sim site %s: %w", s.cfg.Name, err)
		}
	}
	stdout, stderr := s.logText(js, st, ran)
	// Written like a real site's outputs: never through a link out of
	// localDir, each file complete under its name or not at all.
	out, err := backends.OpenOutputDir(localDir)
	if err != nil {
		return nil, fmt.Errorf("sim site %s: %w", s.cfg.Name, err)
	}
	defer out.Close()
	var paths []string
	for _, f := range []struct{ name, text string }{{backends.StdoutFile, stdout}, {backends.StderrFile, stderr}} {
		p, err := out.WriteFile(f.name, []byte(f.text))
		if err != nil {
			return nil, fmt.Errorf("sim site %s: %w", s.cfg.Name, err)
		}
		paths = append(paths, p)
	}
	for _, o := range outs {
		p, err := out.WriteFile(filepath.ToSlash(filepath.Clean(filepath.FromSlash(o))), nil)
		if err != nil {
			return nil, fmt.Errorf("sim site %s: %w", s.cfg.Name, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func checkRel(p string) error {
	c := filepath.ToSlash(filepath.Clean(filepath.FromSlash(p)))
	if p == "" || filepath.IsAbs(p) || strings.HasPrefix(p, "/") || c == ".." || strings.HasPrefix(c, "../") || c == "." {
		return fmt.Errorf("%w: output path %q must be a relative path inside the job directory", backends.ErrInvalidSpec, p)
	}
	return nil
}

// --- reservations ---

// CreateReservation holds r.Nodes nodes over [r.Start, r.Start+r.Duration)
// (a start in the past means now). It is refused with backends.ErrRejected
// when that many nodes are not free over the whole window, counting the
// running jobs until their walltimes and the other reservations. Jobs
// submitted with spec.Reservation set to the returned id (or r.Name) run
// only inside it, first-fit in submission order, and are killed at its end.
// Ordinary jobs never use its nodes during the window.
func (s *Site) CreateReservation(ctx context.Context, r *backends.ReservationSpec) (backends.ResvID, error) {
	if err := s.ctxErr(ctx); err != nil {
		return "", err
	}
	if r == nil || r.Nodes < 1 || r.Duration <= 0 {
		return "", fmt.Errorf("sim site %s: %w: a reservation needs nodes >= 1 and a duration > 0", s.cfg.Name, backends.ErrInvalidSpec)
	}
	s.lock()
	defer s.unlock()
	now := s.e.nowNS()
	if r.Name != "" && s.findResv(r.Name) != nil {
		return "", fmt.Errorf("sim site %s: %w: reservation name %q is taken", s.cfg.Name, backends.ErrRejected, r.Name)
	}
	start := max(int64(r.Start.Sub(s.e.epoch)), now)
	end := start + int64(r.Duration)
	if r.Nodes > s.cfg.Nodes {
		return "", fmt.Errorf("sim site %s: %w: reservation asks for %d nodes, the site has %d", s.cfg.Name, backends.ErrRejected, r.Nodes, s.cfg.Nodes)
	}
	if !s.sched.admit(start, end, r.Nodes, now) {
		return "", fmt.Errorf("sim site %s: %w: %d nodes are not free over %s..%s (only %d are)",
			s.cfg.Name, backends.ErrRejected, r.Nodes, s.e.timeOf(start).UTC().Format(time.RFC3339),
			s.e.timeOf(end).UTC().Format(time.RFC3339), s.sched.buildProfile(now).minFree(start, end))
	}
	rv := &siteResv{
		id:    backends.ResvID("resv" + strconv.Itoa(len(s.resvs)+1)),
		name:  r.Name,
		r:     &resvState{start: start, end: end, nodes: r.Nodes},
		state: "pending",
	}
	rv.r.owner = rv
	if start <= now {
		rv.state = "active"
	}
	s.resvs = append(s.resvs, rv)
	s.sched.addResv(rv.r)
	if start > now {
		rv.evs = append(rv.evs, s.e.schedule(start, ClassEarly, func() {
			s.lock()
			defer s.unlock()
			if rv.state == "pending" {
				rv.state = "active"
				s.sched.pass(s.e.nowNS())
			}
		}))
	}
	rv.evs = append(rv.evs, s.e.schedule(end, ClassLate, func() {
		s.lock()
		defer s.unlock()
		s.endResv(rv, "ended")
	}))
	return rv.id, nil
}

func (s *Site) findResv(key string) *siteResv {
	for _, rv := range s.resvs {
		if string(rv.id) == key || rv.name != "" && rv.name == key {
			return rv
		}
	}
	return nil
}

// endResv closes a reservation: at its end its running jobs end (they were
// scheduled to end by then), when deleted they carry on as ordinary jobs;
// its pending jobs are cancelled either way.
func (s *Site) endResv(rv *siteResv, how string) {
	if rv.state == "ended" || rv.state == "deleted" {
		return
	}
	rv.state = how
	for _, ev := range rv.evs {
		s.e.cancel(ev)
	}
	for _, j := range rv.jobs {
		switch j.state {
		case backends.StatePending:
			s.cancel(j, "Reservation"+strings.ToUpper(how[:1])+how[1:])
		case backends.StateRunning:
			if how == "ended" {
				s.finish(j, j.endState, j.endWhy)
			} else {
				s.sched.adopt(&j.sjob)
				j.resv = nil
			}
		}
	}
	s.sched.removeResv(rv.r)
	s.sched.pass(s.e.nowNS())
}

// ShowReservation reports a pending or active reservation; an ended or
// deleted one is gone, as on a real batch system (backends.ErrRejected).
func (s *Site) ShowReservation(ctx context.Context, id backends.ResvID) (*backends.Reservation, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	s.lock()
	defer s.unlock()
	rv := s.findResv(string(id))
	if rv == nil {
		return nil, fmt.Errorf("sim site %s: %w: no reservation %q", s.cfg.Name, backends.ErrRejected, id)
	}
	if rv.state == "ended" || rv.state == "deleted" {
		return nil, fmt.Errorf("sim site %s: %w: reservation %q has %s (a batch system forgets it)", s.cfg.Name, backends.ErrRejected, id, rv.state)
	}
	return &backends.Reservation{ID: rv.id, Start: s.e.timeOf(rv.r.start), End: s.e.timeOf(rv.r.end),
		Nodes: rv.r.nodes, NodeList: fmt.Sprintf("%s[%d nodes]", s.cfg.Name, rv.r.nodes), State: rv.state}, nil
}

// DeleteReservation releases a reservation. Its pending jobs are cancelled;
// its running jobs keep running to their planned end. Deleting an unknown
// or already ended reservation is not an error.
func (s *Site) DeleteReservation(ctx context.Context, id backends.ResvID) error {
	if err := s.ctxErr(ctx); err != nil {
		return err
	}
	s.lock()
	defer s.unlock()
	if rv := s.findResv(string(id)); rv != nil {
		s.endResv(rv, "deleted")
	}
	return nil
}
