package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// SuperviseOptions tune a Supervisor. Zero values take the defaults.
type SuperviseOptions struct {
	// PingInterval is how often the plugin is pinged (default 1s: the
	// broker's cycle); PingTimeout bounds one ping (default 5s): a plugin
	// that does not answer in time is hung, and is killed and restarted.
	PingInterval time.Duration
	PingTimeout  time.Duration
	// Backoff is the first wait before a restart (default 500ms); it doubles
	// after each failed start up to MaxBackoff (default 1m).
	Backoff    time.Duration
	MaxBackoff time.Duration
	// CrashLoop is how many restarts within CrashWindow (default 5 within
	// 10m) mark the plugin failed for good: its site is down with the
	// reason until gridsub restarts.
	CrashLoop   int
	CrashWindow time.Duration
	// CallTimeout bounds every call to the plugin (default 60s; a batch
	// of n jobs gets CallTimeout plus 100ms a job). A call that overruns
	// it fails with backends.ErrUnavailable (a submission's outcome is
	// then unknown: backends.ErrOutcomeUnknown, looked up by tag before
	// any retry), and the plugin is unhealthy — whatever its pings say —
	// until a call answers in time: the broker's routine calls
	// (backends.Routine) fail at once for UnhealthyRetry (default 30s)
	// after each overrun instead of waiting on it again.
	CallTimeout    time.Duration
	UnhealthyRetry time.Duration
	// OnEvent, when set, is told of every restart and of the crash loop
	// (kind "plugin-restarted", "plugin-restart-failed", "plugin-down",
	// "plugin-adopted"), for events and metrics. It must not block.
	OnEvent func(site, kind, detail string)
}

func (o *SuperviseOptions) defaults() {
	if o.PingInterval <= 0 {
		o.PingInterval = time.Second
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = 5 * time.Second
	}
	if o.Backoff <= 0 {
		o.Backoff = 500 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Minute
	}
	if o.CrashLoop <= 0 {
		o.CrashLoop = 5
	}
	if o.CrashWindow <= 0 {
		o.CrashWindow = 10 * time.Minute
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = time.Minute
	}
	if o.UnhealthyRetry <= 0 {
		o.UnhealthyRetry = 30 * time.Second
	}
}

// Health is a supervised plugin's state, for `gridsub plugins`.
type Health struct {
	State    string // "ok", "unhealthy" (its calls time out), "restarting" or "down"
	Reason   string // why it is restarting or down
	Restarts int    // restarts so far
}

// Supervisor keeps one out-of-process backend alive and is the one stable
// backends.Backend the broker holds for its site, whatever process serves
// it now. It pings the plugin every PingInterval; a plugin that exited or
// does not answer a ping in time is killed and restarted with exponential
// backoff; after CrashLoop restarts within CrashWindow it gives up and every
// call fails with ErrCrashLoop (wrapping backends.ErrUnavailable), so the
// broker sees the site down with the reason.
//
// Jobs survive a restart: their remote ids stay valid at the site, and the
// broker's next poll reaches them through the new process. A Submit cut
// short by the plugin's death may have reached the site; the supervisor
// waits for the new process and looks the job's tag up (FindByGridID): a
// job found is adopted (its id returned), one not found fails the Submit
// with a retryable error, so the job is submitted again and never twice.
// The in-process fast path is not supervised (it cannot crash apart from
// gridsub).
type Supervisor struct {
	spec BackendSpec
	opts SuperviseOptions
	log  *slog.Logger
	caps backends.Capabilities

	mu       sync.Mutex
	cur      *Instance
	ready    chan struct{} // closed when cur is set (or the supervisor is down or closed)
	down     error
	restarts []time.Time
	total    int
	hung     error     // the last call that overran CallTimeout (nil: the last call answered)
	retryAt  time.Time // routine calls fail at once until then
	closed   bool
	stop     context.CancelFunc
	wg       sync.WaitGroup
}

var (
	_ backends.Backend       = (*Supervisor)(nil)
	_ backends.Finder        = (*Supervisor)(nil)
	_ backends.Fetcher       = (*Supervisor)(nil)
	_ backends.Reserver      = (*Supervisor)(nil)
	_ backends.Watcher       = (*Supervisor)(nil)
	_ backends.LinkEstimator = (*Supervisor)(nil)
	_ backends.Connectivity  = (*Supervisor)(nil)
	_ backends.Declarer      = (*Supervisor)(nil)
)

// Supervise loads the plugin spec names (out of process: Isolate or Path)
// and supervises it until Close. The first load's error is returned as it
// is: a plugin that cannot start at all is a configuration problem.
func Supervise(ctx context.Context, spec BackendSpec, opts SuperviseOptions) (*Supervisor, error) {
	if spec.mode() == ModeInProcess {
		return nil, fmt.Errorf("site %s: only an out-of-process plugin is supervised (set isolate or plugin.path)", spec.Config.Name)
	}
	opts.defaults()
	inst, err := LoadBackend(ctx, spec)
	if err != nil {
		return nil, err
	}
	s := &Supervisor{spec: spec, opts: opts, log: spec.logger().With("plugin", spec.Config.Name), cur: inst,
		ready: make(chan struct{}), caps: backends.CapabilitiesOf(inst.Backend)}
	close(s.ready)
	lctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.wg.Add(1)
	go s.watch(lctx)
	return s, nil
}

// Instance is the plugin instance serving now (nil while restarting or
// down).
func (s *Supervisor) Instance() *Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Health reports the plugin's state.
func (s *Supervisor) Health() Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.down != nil:
		return Health{State: "down", Reason: s.down.Error(), Restarts: s.total}
	case s.cur == nil:
		return Health{State: "restarting", Restarts: s.total}
	case s.hung != nil:
		return Health{State: "unhealthy", Reason: s.hung.Error(), Restarts: s.total}
	}
	return Health{State: "ok", Restarts: s.total}
}

// Close stops supervising and kills the plugin.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	cur := s.cur
	s.cur = nil
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	if cur != nil {
		cur.Kill()
	}
	return nil
}

// current returns the serving instance, waiting (bounded by ctx) while a
// restart is under way.
func (s *Supervisor) current(ctx context.Context) (*Instance, error) {
	for {
		s.mu.Lock()
		cur, down, ready, closed := s.cur, s.down, s.ready, s.closed
		s.mu.Unlock()
		switch {
		case down != nil:
			return nil, down
		case closed:
			return nil, fmt.Errorf("plugin %s: %w: closed", s.spec.Config.Name, ErrPluginExited)
		case cur != nil:
			return cur, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("plugin %s: waiting for the plugin to restart: %w", s.spec.Config.Name, ctx.Err())
		}
	}
}

// lost marks inst dead (if it still serves) so the watcher restarts it.
func (s *Supervisor) lost(inst *Instance, why error) {
	s.mu.Lock()
	if s.cur != inst || s.closed {
		s.mu.Unlock()
		return
	}
	s.cur = nil
	s.ready = make(chan struct{})
	s.mu.Unlock()
	s.log.Warn("plugin lost; restarting", "pid", inst.Pid, "why", why)
	inst.ForceKill()
}

// watch pings the plugin every PingInterval and restarts it when it is
// gone or hung.
func (s *Supervisor) watch(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		cur, down := s.cur, s.down
		s.mu.Unlock()
		if down != nil {
			return
		}
		if cur != nil {
			var why error
			if cur.Exited() {
				why = fmt.Errorf("the plugin process %d exited", cur.Pid)
			} else {
				pctx, cancel := context.WithTimeout(ctx, s.opts.PingTimeout)
				err := cur.Client.Ping(pctx)
				cancel()
				switch {
				case ctx.Err() != nil:
					return
				case errors.Is(err, context.DeadlineExceeded):
					why = fmt.Errorf("the plugin did not answer a ping within %s (hung)", s.opts.PingTimeout)
				case err != nil:
					why = err
				}
			}
			if why == nil {
				continue
			}
			s.lost(cur, why)
		}
		if !s.restart(ctx) {
			return
		}
	}
}

// restart starts a new plugin process with exponential backoff until one
// starts, the crash loop limit is reached (false) or ctx ends (false).
func (s *Supervisor) restart(ctx context.Context) bool {
	name := s.spec.Config.Name
	wait := s.opts.Backoff
	for {
		now := time.Now()
		s.mu.Lock()
		keep := s.restarts[:0]
		for _, r := range s.restarts {
			if now.Sub(r) < s.opts.CrashWindow {
				keep = append(keep, r)
			}
		}
		s.restarts = keep
		if len(s.restarts) >= s.opts.CrashLoop {
			s.down = fmt.Errorf("plugin %s: %w: restarted %d times within %s and failed again; site %s is down until gridsub restarts (see the log for the plugin's own messages): %w",
				name, ErrCrashLoop, len(s.restarts), s.opts.CrashWindow, name, backends.ErrUnavailable)
			close(s.ready)
			s.mu.Unlock()
			s.log.Error("plugin crash loop; giving up", "restarts", len(s.restarts))
			s.event("plugin-down", s.down.Error())
			return false
		}
		s.restarts = append(s.restarts, now)
		s.total++
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		inst, err := LoadBackend(ctx, s.spec)
		if err == nil {
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				inst.Kill()
				return false
			}
			s.cur = inst
			close(s.ready)
			s.mu.Unlock()
			s.log.Info("plugin restarted", "pid", inst.Pid)
			s.event("plugin-restarted", fmt.Sprintf("pid %d", inst.Pid))
			return true
		}
		s.log.Warn("plugin restart failed", "err", err, "next_in", 2*wait)
		s.event("plugin-restart-failed", err.Error())
		wait = min(2*wait, s.opts.MaxBackoff)
	}
}

func (s *Supervisor) event(kind, detail string) {
	if s.opts.OnEvent != nil {
		s.opts.OnEvent(s.spec.Config.Name, kind, detail)
	}
}

// do runs f on the serving instance; a call that finds the plugin gone
// hands it to the watcher for a restart and returns the retryable error.
func do[R any](s *Supervisor, ctx context.Context, method string, f func(context.Context, *Instance) (R, error)) (R, error) {
	return doFor(s, ctx, method, s.opts.CallTimeout, f)
}

// FetchTimeout bounds a plugin's FetchOutputs (a transfer of a job's
// outputs; the transport's own rate bounds apply inside it).
const FetchTimeout = 30 * time.Minute

// doFor runs one call on the serving instance under a deadline of d.
func doFor[R any](s *Supervisor, ctx context.Context, method string, d time.Duration, f func(context.Context, *Instance) (R, error)) (R, error) {
	var zero R
	if err := s.unhealthy(ctx); err != nil {
		return zero, err
	}
	inst, err := s.current(ctx)
	if err != nil {
		return zero, err
	}
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	r, err := f(cctx, inst)
	err = s.timed(ctx, cctx, method, d, err)
	if errors.Is(err, ErrPluginExited) {
		s.lost(inst, err)
	}
	return r, err
}

// unhealthy fails a routine call (backends.Routine) at once while the
// plugin's last call overran its deadline and UnhealthyRetry has not
// passed since; any other call is tried.
func (s *Supervisor) unhealthy(ctx context.Context) error {
	if !backends.IsRoutine(ctx) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hung == nil || !time.Now().Before(s.retryAt) {
		return nil
	}
	return fmt.Errorf("%w: plugin %s is unhealthy (%v); asked again at %s", backends.ErrUnavailable, s.spec.Config.Name,
		s.hung, s.retryAt.UTC().Format(time.RFC3339))
}

// timed takes the outcome of one call made under cctx (ctx bounded by
// the call's timeout d): a call that overran d makes the plugin unhealthy
// and fails with ErrUnavailable; a call that answered makes it healthy.
func (s *Supervisor) timed(ctx, cctx context.Context, method string, d time.Duration, err error) error {
	// The deadline travels with the call: the plugin's side may give up
	// (and answer with its own error) a moment before ours expires.
	dl, _ := cctx.Deadline()
	overran := err != nil && ctx.Err() == nil && (errors.Is(cctx.Err(), context.DeadlineExceeded) || !time.Now().Before(dl.Add(-250*time.Millisecond)))
	s.mu.Lock()
	was := s.hung
	if !overran {
		if err == nil || !backends.Retryable(err) {
			s.hung = nil
		}
		s.mu.Unlock()
		if was != nil && s.hung == nil {
			s.log.Info("plugin answers in time again", "after", was)
			s.event("plugin-healthy", fmt.Sprintf("%s answered in time (it was unhealthy: %v)", method, was))
		}
		return err
	}
	s.hung = fmt.Errorf("%s did not answer within %s", method, d)
	s.retryAt = time.Now().Add(s.opts.UnhealthyRetry)
	hung := s.hung
	s.mu.Unlock()
	s.log.Warn("plugin call overran its deadline; the plugin is unhealthy", "method", method, "timeout", d)
	s.event("plugin-unhealthy", hung.Error())
	return &overrun{fmt.Errorf("%w: plugin %s: %w (%w)", backends.ErrUnavailable, s.spec.Config.Name, hung, err)}
}

// overrun is the error of a call that overran its deadline (timed).
type overrun struct{ error }

func (o *overrun) Unwrap() error { return o.error }

// overran reports whether err is a call's that overran its deadline.
func (s *Supervisor) overran(err error) bool {
	var o *overrun
	return errors.As(err, &o)
}

// Name implements backends.Backend.
func (s *Supervisor) Name() string { return s.spec.Config.Name }

// Capabilities implements backends.Declarer: what the plugin declared when
// it first started.
func (s *Supervisor) Capabilities() backends.Capabilities { return s.caps }

// Info implements backends.Backend.
func (s *Supervisor) Info(ctx context.Context) (*backends.SiteInfo, error) {
	return do(s, ctx, "Info", func(ctx context.Context, i *Instance) (*backends.SiteInfo, error) { return i.Client.Info(ctx) })
}

// Submit implements backends.Backend; see Supervisor for what happens when
// the plugin dies during the call.
func (s *Supervisor) Submit(ctx context.Context, spec *backends.JobSpec) (backends.JobID, error) {
	if err := s.unhealthy(ctx); err != nil {
		return "", err
	}
	inst, err := s.current(ctx)
	if err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	id, err := inst.Client.Submit(cctx, spec)
	cancel()
	if err = s.timed(ctx, cctx, "Submit", s.opts.CallTimeout, err); err != nil && s.overran(err) {
		// The request may have reached the site: looked up by its tag
		// before it is submitted again.
		return "", fmt.Errorf("%w: %w", backends.ErrOutcomeUnknown, err)
	}
	if !errors.Is(err, ErrPluginExited) {
		return id, err
	}
	s.lost(inst, err)
	// The submission may have reached the site: ask the next process.
	next, werr := s.current(ctx)
	if werr != nil {
		return "", fmt.Errorf("%w (and whether job %s reached the site could not be checked: %v)", err, spec.GridID, werr)
	}
	if !s.caps.Find {
		return "", err
	}
	sts, ferr := next.Client.FindByGridID(ctx, spec.GridID)
	if ferr != nil {
		return "", fmt.Errorf("%w (and looking job %s up failed: %w)", err, spec.GridID, ferr)
	}
	if len(sts) == 0 {
		s.log.Info("submission lost with the plugin never reached the site; it will be submitted again", "grid_id", spec.GridID)
		return "", err
	}
	s.log.Info("submission cut short by the plugin's death had reached the site; adopted", "grid_id", spec.GridID, "id", sts[0].ID)
	s.event("plugin-adopted", fmt.Sprintf("job %s found at the site as %s after the plugin died during its submission", spec.GridID, sts[0].ID))
	return sts[0].ID, nil
}

// Status implements backends.Backend.
func (s *Supervisor) Status(ctx context.Context, ids []backends.JobID) ([]backends.JobStatus, error) {
	return do(s, ctx, "Status", func(ctx context.Context, i *Instance) ([]backends.JobStatus, error) { return i.Client.Status(ctx, ids) })
}

// Cancel implements backends.Backend.
func (s *Supervisor) Cancel(ctx context.Context, id backends.JobID) error {
	_, err := do(s, ctx, "Cancel", func(ctx context.Context, i *Instance) (struct{}, error) { return struct{}{}, i.Client.Cancel(ctx, id) })
	return err
}

// FindByGridID implements backends.Finder.
func (s *Supervisor) FindByGridID(ctx context.Context, gridID string) ([]backends.JobStatus, error) {
	return do(s, ctx, "FindByGridID", func(ctx context.Context, i *Instance) ([]backends.JobStatus, error) {
		return i.Client.FindByGridID(ctx, gridID)
	})
}

// FetchOutputs implements backends.Fetcher.
func (s *Supervisor) FetchOutputs(ctx context.Context, id backends.JobID, spec *backends.JobSpec, dir string) ([]string, error) {
	return doFor(s, ctx, "FetchOutputs", FetchTimeout, func(ctx context.Context, i *Instance) ([]string, error) {
		return i.Client.FetchOutputs(ctx, id, spec, dir)
	})
}

// CreateReservation implements backends.Reserver.
func (s *Supervisor) CreateReservation(ctx context.Context, r *backends.ReservationSpec) (backends.ResvID, error) {
	return do(s, ctx, "CreateReservation", func(ctx context.Context, i *Instance) (backends.ResvID, error) {
		return i.Client.CreateReservation(ctx, r)
	})
}

// ShowReservation implements backends.Reserver.
func (s *Supervisor) ShowReservation(ctx context.Context, id backends.ResvID) (*backends.Reservation, error) {
	return do(s, ctx, "ShowReservation", func(ctx context.Context, i *Instance) (*backends.Reservation, error) {
		return i.Client.ShowReservation(ctx, id)
	})
}

// DeleteReservation implements backends.Reserver.
func (s *Supervisor) DeleteReservation(ctx context.Context, id backends.ResvID) error {
	_, err := do(s, ctx, "DeleteReservation", func(ctx context.Context, i *Instance) (struct{}, error) {
		return struct{}{}, i.Client.DeleteReservation(ctx, id)
	})
	return err
}

// Watch implements backends.Watcher: it follows the serving plugin's
// stream and, when a plugin dies, the next one's, until ctx is done or the
// plugin is down for good. Changes that happen while no plugin serves are
// not pushed: the caller polls Status after a restart (the broker does so
// for a site whose push stream broke).
func (s *Supervisor) Watch(ctx context.Context, fn func(backends.JobStatus)) error {
	for {
		inst, err := s.current(ctx)
		if err != nil {
			return err
		}
		err = inst.Client.Watch(ctx, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, ErrPluginExited) {
			return err
		}
		s.lost(inst, err)
	}
}

// LinkEstimate implements backends.LinkEstimator from the serving plugin's
// last ping.
func (s *Supervisor) LinkEstimate() (float64, time.Duration, bool) {
	if inst := s.Instance(); inst != nil {
		return inst.Client.LinkEstimate()
	}
	return 0, 0, false
}

// ConnErr implements backends.Connectivity: the serving plugin's last
// reported connection error, or why no plugin serves.
func (s *Supervisor) ConnErr() error {
	s.mu.Lock()
	cur, down := s.cur, s.down
	s.mu.Unlock()
	switch {
	case down != nil:
		return down
	case cur == nil:
		return fmt.Errorf("plugin %s: %w: restarting", s.spec.Config.Name, ErrPluginExited)
	}
	return cur.Client.ConnErr()
}
