package daemon

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/robfig/cron/v3"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/bridge/store"
	"github.com/gridsub/gridsub/bridge/users"
)

// Sentinel errors of the daemon.
var (
	// ErrOptions: the Options cannot run a daemon (no state directory, a TCP
	// listener without a token, ...).
	ErrOptions = errors.New("daemon options")
	// ErrSchedule: a broker.cron spec cannot be parsed.
	ErrSchedule = errors.New("bad schedule")
	// ErrLocked: another process (a daemon, a store restore) holds the
	// state directory's lock; the error names its pid.
	ErrLocked = errors.New("the state directory is in use")
)

// DBName is the database file in the state directory.
const DBName = "gridsub.db"

// clockFile holds the simulated sites' virtual time (RFC 3339, UTC) so it
// never goes back across restarts.
const clockFile = "sim-clock"

// Options configure a Daemon.
type Options struct {
	// Spec is the broker and its sites; Run sets Spec.Store to the store
	// Store says (by default the SQLite file in StateDir).
	Spec assemble.Spec
	// Store chooses the durable store: SQLite in StateDir (the zero value)
	// or a PostgreSQL database.
	Store StoreConfig
	// Shared, with a PostgreSQL store, makes this one of several brokers
	// sharing it (shared.go): it follows until it wins the lease, then
	// leads. Nil: the only broker of its store.
	Shared   *SharedOptions
	shared   *leadership // set once this broker leads a shared store
	StateDir string      // absolute; created 0700 if missing
	Socket   string      // the API's unix socket
	// Listen, when set, also serves the API on this TCP address; it then
	// needs Token (sent as "Authorization: Bearer <token>").
	Listen string
	Token  string // at least api.MinTokenLen characters
	// SharedSocket makes the socket connectable by every local user
	// (mode 0666; api.ListenUnixShared): each is told apart by the peer
	// credentials and sees only their own jobs. Off, the socket is 0600
	// and only the daemon's user (and root) connect.
	SharedSocket bool
	// TLSCert and TLSKey (PEM files) make the TCP listener speak TLS 1.2+.
	// Without them a Listen address that is not loopback is refused unless
	// InsecurePlaintext is set.
	TLSCert, TLSKey   string
	InsecurePlaintext bool
	// Limits bound every listener's connections (zero: api.DefaultLimits).
	Limits api.Limits
	// MetricsListen, when set, serves /metrics alone on this TCP address
	// without a token (for a Prometheus scraper); /metrics is also served
	// on the socket.
	MetricsListen string
	// Interval is broker.interval, the default cycle period (0 = 1s). On
	// simulated sites it is virtual time: the default wall period is
	// Interval/TimeScale, but at least 100ms.
	Interval time.Duration
	Cron     map[string]string // broker.cron: task name -> spec
	// TimeScale is how many virtual seconds pass per wall second on
	// simulated sites (0 = Spec.TimeScale, or 60 if that is 0 too).
	TimeScale float64
	SimTick   time.Duration // how often the simulated engine advances (0 = 100ms)
	Retention time.Duration // history cleanup prunes jobs ended longer ago (0 = 30 days)
	// TrustHalfLife is how fast outcomes age for trust: a job outcome or
	// an outage weighs half as much after each half-life (0 = 7 days; < 0 =
	// never: every outcome since the database was created counts fully).
	TrustHalfLife time.Duration
	Logger        *slog.Logger
}

// Daemon is a running broker service. Start it with Start, stop it with
// Shutdown (or use Run).
type Daemon struct {
	opts    Options
	log     *slog.Logger
	st      store.Store
	env     *assemble.Env
	m       *metrics
	cron    *cron.Cron // the tasks' wall-clock schedules (nil with simulated sites)
	vclock  *vclock    // the tasks' schedules on the simulated clock (simcron.go), or nil
	lock    *Lock      // the state directory's, held from Start to the end of Shutdown
	servers []*http.Server
	errc    chan error
	tcp     string // the API's TCP address, if any
	mtcp    string // the metrics-only TCP address, if any

	queue    queueCache // GET /v1/queue's rows (queue.go)
	wake     submitWake // the cycles submissions wake (postSubmitted)
	trig     chan string
	pending  map[string]*atomic.Bool
	stop     chan struct{}
	workDone chan struct{}
	busy     atomic.Int64 // unix ns since a task started, 0 when idle

	scale     float64
	v0, w0    time.Time // virtual and wall time of the simulated clock's last advance
	lastSaved time.Time
	// trustLogged are the trust scores last logged at INFO (trust.go): the
	// task runs often, its log line only when a score moved.
	trustLogged map[string]float64

	once    sync.Once
	shutErr error

	lockLost atomic.Pointer[error] // set once the lock no longer excludes another daemon (lockHeld)
}

// Run starts a daemon and serves until ctx is cancelled, then shuts it down
// gracefully (at most 30 s for requests in flight).
func Run(ctx context.Context, opts Options) error {
	if opts.Shared != nil && opts.shared == nil {
		return runShared(ctx, opts)
	}
	return run(ctx, opts)
}

func run(ctx context.Context, opts Options) error {
	d, err := Start(ctx, opts)
	if err != nil {
		return err
	}
	var serr error
	select {
	case <-ctx.Done():
		d.log.Info("shutting down", "why", context.Cause(ctx))
	case serr = <-d.errc:
		if errors.Is(serr, ErrSteppedDown) {
			d.log.Warn("shutting down: another broker leads; restart this one to follow", "err", serr)
		} else {
			d.log.Error("a listener failed; shutting down", "err", serr)
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return errors.Join(serr, d.Shutdown(sctx))
}

// Start opens the store, assembles and recovers the broker, listens, and
// starts the periodic work. It returns once the daemon answers on its
// socket.
func Start(ctx context.Context, opts Options) (*Daemon, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	log := opts.Logger
	switch {
	case opts.StateDir == "" || !filepath.IsAbs(opts.StateDir):
		return nil, fmt.Errorf("%w: the state directory must be an absolute path, got %q", ErrOptions, opts.StateDir)
	case opts.Socket == "":
		return nil, fmt.Errorf("%w: no socket path", ErrOptions)
	case opts.Listen != "" && api.CheckToken(opts.Token) != nil:
		return nil, fmt.Errorf("%w: serving on TCP %s: %w", ErrOptions, opts.Listen, api.CheckToken(opts.Token))
	case opts.Listen == "" && (opts.TLSCert != "" || opts.TLSKey != ""):
		return nil, fmt.Errorf("%w: a TLS certificate is given but no TCP listen address; TLS applies to --listen only", ErrOptions)
	}
	var tlsConf *tls.Config
	if opts.Listen != "" && (opts.TLSCert != "" || opts.TLSKey != "") {
		var err error
		if tlsConf, err = api.ServerTLS(opts.TLSCert, opts.TLSKey); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrOptions, err)
		}
	}
	opts.Limits = opts.Limits.WithDefaults()
	if err := opts.check(); err != nil {
		return nil, err
	}
	if opts.Retention <= 0 {
		opts.Retention = 30 * 24 * time.Hour
	}
	if opts.TrustHalfLife == 0 {
		opts.TrustHalfLife = DefaultTrustHalfLife
	}
	if opts.SimTick <= 0 {
		opts.SimTick = 100 * time.Millisecond
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	scale := opts.TimeScale
	if scale <= 0 {
		scale = opts.Spec.TimeScale
	}
	if scale <= 0 {
		scale = 60
	}
	// broker.interval is broker time: on simulated sites every schedule is
	// evaluated on the virtual clock (simcron.go), checked every SimTick.
	scheds, unknown, err := schedules(opts.Cron, opts.Interval)
	if err != nil {
		return nil, err
	}
	for _, name := range unknown {
		log.Warn("broker.cron names no task of this daemon; ignored", "name", name, "tasks", strings.Join(Tasks, ", "))
	}
	// The lock comes before anything else in the state directory is
	// touched: a second daemon must not recover, dispatch or even open the
	// store of the first.
	lock, err := LockStateDir(opts.StateDir)
	if errors.Is(err, ErrLocked) {
		return nil, fmt.Errorf("not starting a second daemon on one state directory (both would run every job): %w, "+
			"use the running one, or give this one another state directory (GRIDSUB_STATE_DIR or broker.state_dir)", err)
	}
	if err != nil {
		return nil, err
	}
	d := &Daemon{lock: lock, opts: opts, log: log, errc: make(chan error, 4), trig: make(chan string, len(Tasks)),
		pending: map[string]*atomic.Bool{}, stop: make(chan struct{}), workDone: make(chan struct{})}
	for _, t := range Tasks {
		d.pending[t] = new(atomic.Bool)
	}
	ok := false
	defer func() {
		if !ok {
			d.closeAll()
		}
	}()

	if opts.shared != nil {
		d.st = opts.shared.st // opened, and fenced, by runShared
	} else {
		d.st, err = OpenStore(ctx, opts.Store, opts.StateDir, log)
	}
	if err != nil {
		return nil, err
	}
	d.m = newMetrics(d.count)

	spec := opts.Spec
	spec.Store = d.st
	if spec.Owner == "" {
		spec.Owner = api.DaemonUser()
	}
	if spec.IDPrefix, err = idPrefix(ctx, d.st); err != nil {
		return nil, err
	}
	if simulated(spec) {
		spec.Epoch = d.loadClock()
	}
	// No job reads or writes the state directory, even inside the roots.
	spec.OffLimits = append(slices.Clone(spec.OffLimits), opts.StateDir)
	creds, err := users.OpenCredentials(filepath.Join(opts.StateDir, users.CredentialsDir))
	if err != nil {
		return nil, fmt.Errorf("%w: per-user site credentials: %w", ErrOptions, err)
	}
	if !simulated(spec) {
		spec.Credentials = creds
	}
	d.env, err = assemble.Build(ctx, spec, assemble.Options{Logger: log, OnEvent: d.m.onEvent, OnPlugin: d.onPlugin})
	if err != nil {
		return nil, err
	}
	d.m.reg.MustRegister(newPluginCollector(d.plugins), newReliabilityCollector(d.env), newCommandsCollector(d.env))
	if d.env.Engine != nil {
		d.scale = scale
		d.v0, d.w0 = d.env.Engine.Now(), time.Now()
	}
	rep, err := d.env.Broker.Recover(ctx, d.env.Now())
	if err != nil {
		return nil, err
	}
	log.Info("recovered", "queued", rep.Queued, "live", rep.Live, "adopted", rep.Adopted, "never_reached", rep.NeverReached,
		"unresolved", rep.Unresolved, "duplicates_cancelled", rep.DuplicatesCancelled, "errors", len(rep.Errors))
	for _, e := range rep.Errors {
		log.Warn("recovery", "err", e)
	}
	if err := d.loadTrust(ctx); err != nil {
		log.Warn("loading the stored trust scores", "err", err)
	}

	known, err := d.st.IdempotencyKeys(ctx, time.Now().Add(-bridge.MaxIdempotencyAge))
	if err != nil {
		return nil, err
	}
	tokens, err := users.OpenTokens(filepath.Join(opts.StateDir, users.TokensFile))
	if err != nil {
		return nil, fmt.Errorf("%w: per-user tokens: %w", ErrOptions, err)
	}
	svc := &service{b: d.env.Broker, st: d.st, m: d.m, d: d, keys: newKeys(known, time.Now())}
	if opts.shared != nil {
		opts.shared.keys = svc.keys // the followers' keys join it as their jobs are taken (shared.go)
	}
	metricsH := promhttp.HandlerFor(d.m.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)})
	mux := func(srv *api.Server, token string) http.Handler {
		m := http.NewServeMux()
		m.Handle(MetricsRoute, bearer(token, metricsH))
		m.Handle("/", srv.Handler())
		return m
	}
	var listeners []net.Listener
	var handlers []http.Handler
	listenUnix := api.ListenUnix
	if opts.SharedSocket {
		listenUnix = api.ListenUnixShared
	}
	ul, err := listenUnix(opts.Socket)
	if err != nil {
		return nil, err
	}
	listeners = append(listeners, api.LimitListener(ul, opts.Limits.MaxConns))
	sockMux := http.NewServeMux()
	sockMux.HandleFunc(BackupRoute, d.backupHandler) // the socket only: see BackupRoute
	if l := opts.shared; l != nil {
		role := func() string {
			if d.leading() {
				return "leader"
			}
			return "stepped down"
		}
		sockMux.HandleFunc(ServiceRoute, serviceHandler(l.lease, role))
		d.m.reg.MustRegister(newLeaderCollector(l.lease, role))
	}
	sockMux.Handle("/", mux(api.NewServer(svc, api.ServerOptions{Now: d.env.Now, Simulated: d.env.Engine != nil, Logger: log, IDPrefix: spec.IDPrefix, Tokens: tokens, Credentials: newCredentialAdmin(creds, spec.Sites, spec.Owner)}), ""))
	handlers = append(handlers, sockMux)
	if opts.Listen != "" {
		tl, err := api.ListenTCP(opts.Listen, api.TCPOptions{Token: opts.Token, TLS: tlsConf,
			InsecurePlaintext: opts.InsecurePlaintext, MaxConns: opts.Limits.MaxConns,
			MaxUnauthConns: opts.Limits.MaxUnauthConns, MaxUnauthPerAddr: opts.Limits.MaxUnauthPerAddr})
		if err != nil {
			ul.Close()
			return nil, fmt.Errorf("API on %s: %w", opts.Listen, err)
		}
		d.tcp = tl.Addr().String()
		listeners = append(listeners, tl)
		handlers = append(handlers, mux(api.NewServer(svc, api.ServerOptions{Now: d.env.Now, Simulated: d.env.Engine != nil, Logger: log, Token: opts.Token, IDPrefix: spec.IDPrefix, Tokens: tokens, Credentials: newCredentialAdmin(creds, spec.Sites, spec.Owner)}), opts.Token))
	}
	if opts.MetricsListen != "" {
		ml, err := net.Listen("tcp", opts.MetricsListen)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return nil, fmt.Errorf("metrics on %s: %w", opts.MetricsListen, err)
		}
		m := http.NewServeMux()
		m.Handle("GET /metrics", metricsH)
		d.mtcp = ml.Addr().String()
		listeners = append(listeners, api.LimitListener(ml, opts.Limits.MaxConns))
		handlers = append(handlers, m)
	}
	for i, l := range listeners {
		srv := api.NewHTTPServer(handlers[i], opts.Limits, log)
		d.servers = append(d.servers, srv)
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.errc <- fmt.Errorf("serving on %s: %w", l.Addr(), err)
			}
		}()
	}

	if d.env.Engine != nil {
		d.vclock = newVClock(scheds, d.env.Now()) // the tasks run on the simulated clock
	} else {
		d.cron = cron.New()
		for _, name := range Tasks {
			d.cron.Schedule(scheds[name], cron.FuncJob(func() { d.post(name) }))
		}
		d.cron.Start()
	}
	go d.work()
	if opts.shared != nil {
		go d.keepLease()
	}
	d.post(TaskCycle) // recovered jobs need not wait a period
	ok = true
	log.Info("serving", "socket", opts.Socket, "listen", opts.Listen, "tls", tlsConf != nil, "metrics", opts.MetricsListen,
		"state_dir", opts.StateDir, "sites", strings.Join(d.env.Broker.SiteNames(), ","), "simulated", d.env.Engine != nil,
		"time_scale", d.scale)
	return d, nil
}

func simulated(s assemble.Spec) bool {
	for _, site := range s.Sites {
		if site.Kind == "sim" {
			return true
		}
	}
	return false
}

// bearer requires the token on h when token is set.
func bearer(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gridsub"`)
			api.Refuse(w, r)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		api.MarkAuthenticated(r)
		h.ServeHTTP(w, r)
	})
}

// MetricsRoute serves the Prometheus metrics: on the socket to every
// local user who reaches it (aggregates only: no job ids, names or
// owners), on the TCP listener with the service token only.
const MetricsRoute = "GET /metrics"

// Routes are the routes the daemon serves beside api.Routes and
// api.PageRoute (users_test.go calls each as another user).
var Routes = []string{MetricsRoute, BackupRoute}

// Broker is the daemon's broker (tests inspect it).
func (d *Daemon) Broker() *bridge.Broker { return d.env.Broker }

// Store is the daemon's store (tests inspect it).
func (d *Daemon) Store() store.Store { return d.st }

// Now is the broker's time (virtual on simulated sites).
func (d *Daemon) Now() time.Time { return d.env.Now() }

// Socket is the path of the API socket.
func (d *Daemon) Socket() string { return d.opts.Socket }

// TCPAddr is the address the API serves on over TCP ("" without
// Options.Listen); with a port 0 in Listen it tells the port chosen.
func (d *Daemon) TCPAddr() string { return d.tcp }

// MetricsAddr is the address of Options.MetricsListen once listening.
func (d *Daemon) MetricsAddr() string { return d.mtcp }

// post asks the worker to run a task, unless it is already waiting to.
func (d *Daemon) post(task string) {
	if d.pending[task].Swap(true) {
		d.m.skipped.WithLabelValues(task).Inc()
		return
	}
	select {
	case d.trig <- task:
	default: // cannot happen: one slot per task
		d.pending[task].Store(false)
	}
}

// submitWakeEvery is the shortest time between two cycles woken by
// submissions: a burst of them (a workflow engine's sbatch calls, one
// process each) wakes the cycle once per interval, not once per job, and
// each cycle plans the whole queue.
const submitWakeEvery = 200 * time.Millisecond

// submitWake spaces the cycles submissions wake.
type submitWake struct {
	mu    sync.Mutex
	last  time.Time // when a submission last woke the cycle
	armed bool      // a wake is due at last+submitWakeEvery
}

// postSubmitted wakes the cycle for a new job: at once if no submission
// did in the last submitWakeEvery, else once at the end of that interval
// for every job submitted within it.
func (d *Daemon) postSubmitted() {
	w := &d.wake
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed {
		return
	}
	now := time.Now()
	wait := w.last.Add(submitWakeEvery).Sub(now)
	if wait <= 0 {
		w.last = now
		d.post(TaskCycle)
		return
	}
	w.armed = true
	time.AfterFunc(wait, func() {
		w.mu.Lock()
		w.armed, w.last = false, time.Now()
		w.mu.Unlock()
		d.post(TaskCycle)
	})
}

// work is the one goroutine that runs the tasks and drives the simulated
// engine.
func (d *Daemon) work() {
	defer close(d.workDone)
	ctx := context.Background() // a task in flight finishes even during shutdown
	var tick <-chan time.Time
	if d.env.Engine != nil {
		t := time.NewTicker(d.opts.SimTick)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-d.stop:
			return
		case <-tick:
			d.advance()
			d.runDue(ctx)
		case task := <-d.trig:
			d.pending[task].Store(false)
			d.advance()
			d.busy.Store(time.Now().UnixNano())
			d.run(ctx, task)
			d.saveReliability(ctx) // reliability.go: when the task taught the model something
			d.busy.Store(0)
		}
	}
}

// advance runs the simulated engine up to the virtual time that corresponds
// to the wall clock now.
func (d *Daemon) advance() {
	e := d.env.Engine
	if e == nil {
		return
	}
	now := time.Now()
	// Measured from the last advance, not from the start: wall time since
	// the start times the scale would overflow a Duration after
	// 2^63 ns / scale (177 days at the default 600).
	v := d.v0.Add(time.Duration(float64(now.Sub(d.w0)) * d.scale))
	e.RunUntil(v)
	d.v0, d.w0 = v, now
	// Saved before every task, not every few seconds: the task may store
	// times read from this clock, and after a SIGKILL the clock must not
	// restart behind them (a dependent job's recorded start would then
	// precede its dependency's end). A write and a rename, no fsync: it
	// must outlive the process, as the store's writes do.
	d.saveClock()
	d.lastSaved = now
}

// lockHeld says whether the state directory's lock still excludes every
// other daemon (Lock.Check), before each task that dispatches. Once it
// does not, the daemon dispatches nothing more (a second daemon may be
// running the same jobs), says why in its log and in its health, and
// waits to be stopped.
func (d *Daemon) lockHeld() bool {
	if d.lockLost.Load() != nil {
		return false
	}
	restored, err := d.lock.Check()
	if err != nil {
		d.lockLost.Store(&err)
		d.log.Error("stopped dispatching", "err", err)
		return false
	}
	if restored {
		d.log.Warn("the state directory's pid file was missing or changed; written again (the lock is on the directory and still held)",
			"file", filepath.Join(d.opts.StateDir, LockName))
	}
	return true
}

func (d *Daemon) run(ctx context.Context, task string) {
	if (task == TaskCycle || task == TaskBind) && (!d.lockHeld() || !d.leading()) {
		d.m.skipped.WithLabelValues(task).Inc()
		return
	}
	switch task {
	case TaskCycle:
		d.takeHandoffs(ctx)
		d.takeRequests(ctx)
		t0 := time.Now()
		rep, err := d.env.Broker.Cycle(ctx, d.env.Now())
		el := time.Since(t0)
		d.queue.refresh(d.env.Broker, false) // GET /v1/queue's rows (queue.go)
		d.m.cycle(el, rep, err)
		switch {
		case err != nil:
			d.log.Error("cycle failed", "err", err, "took", el)
		case rep.Started+rep.Ended+rep.Rejected+len(rep.Errors) > 0:
			d.log.Info("cycle", "polled", rep.Polled, "started", rep.Started, "replicated", rep.Replicated,
				"rejected", rep.Rejected, "ended", rep.Ended, "errors", len(rep.Errors), "took", el)
		default:
			d.log.Debug("cycle", "polled", rep.Polled, "took", el)
		}
		for _, e := range rep.Errors {
			d.log.Warn("cycle", "err", e)
		}
	case TaskHealth:
		d.probe(ctx)
	case TaskBind:
		rep, err := d.env.Broker.BindReservations(ctx, d.env.Now())
		switch {
		case err != nil:
			d.log.Error("reservation binding failed", "err", err)
		case rep.Bound+rep.Submitted+rep.Failed+rep.Preempted+len(rep.Errors) > 0:
			d.log.Info("reservation binding", "bound", rep.Bound, "submitted", rep.Submitted, "failed", rep.Failed,
				"preempted", rep.Preempted, "errors", len(rep.Errors))
		}
		for _, e := range rep.Errors {
			d.log.Warn("reservation binding", "err", e)
		}
	case TaskTrust:
		if err := d.recomputeTrust(ctx); err != nil {
			d.log.Error("trust recomputation failed", "err", err)
		}
	case TaskCleanup:
		before := time.Now().Add(-d.opts.Retention)
		n, err := d.st.Prune(ctx, before)
		if err != nil {
			d.log.Error("history cleanup failed", "err", err)
			return
		}
		d.m.pruned.Add(float64(n))
		d.log.Info("history cleanup", "pruned", n, "ended_before", before.Format(time.RFC3339))
	}
}

// maxProbeErr bounds a stored probe error (an SSH failure can carry a
// page of output).
const maxProbeErr = 2000

// probe asks every site for its Info and stores each probe, successful or
// not, with the link the site has measured so far: the store keeps the
// last good numbers apart from the last error (store.SiteHealthStore).
func (d *Daemon) probe(ctx context.Context) {
	for _, name := range d.env.Broker.SiteNames() {
		be, _ := d.env.Broker.Site(name)
		// Routine: a site with a command budget answers from its last
		// capacity report while that is fresh (sshbatch.Budget).
		cctx, cancel := context.WithTimeout(backends.Routine(ctx), 30*time.Second)
		info, err := be.Info(cctx)
		cancel()
		p := store.SiteProbe{Site: name, Time: time.Now(), Link: measuredLink(be)}
		needsLogin := errors.Is(err, backends.ErrNeedsLogin)
		if !needsLogin { // a site waiting for `gridsub login` is not down
			d.observeProbe(name, err == nil) // reliability.go
		}
		if err != nil && needsLogin {
			d.log.Warn("site needs login: run gridsub login "+name, "site", name, "err", err)
			p.Err = api.SiteNeedsLogin + ": run `gridsub login " + name + "`: " + err.Error()
			if len(p.Err) > maxProbeErr {
				p.Err = strings.ToValidUTF8(p.Err[:maxProbeErr], "") + "..."
			}
		} else if err != nil {
			d.m.siteErrors.WithLabelValues(name, "health").Inc()
			d.m.siteUp.WithLabelValues(name).Set(0)
			d.log.Warn("site health probe failed", "site", name, "err", err)
			p.Err = err.Error()
			if len(p.Err) > maxProbeErr {
				p.Err = strings.ToValidUTF8(p.Err[:maxProbeErr], "") + "..."
			}
		} else {
			d.m.siteUp.WithLabelValues(name).Set(1)
			d.m.siteFree.WithLabelValues(name).Set(float64(info.FreeNodes))
			d.log.Debug("site health", "site", name, "free", info.FreeNodes, "queued", info.Queued, "running", info.Running)
			p.Nodes, p.FreeNodes, p.Queued, p.Running = info.Nodes, info.FreeNodes, info.Queued, info.Running
		}
		d.m.link(name, be)
		if err := d.st.RecordProbe(ctx, p); err != nil {
			d.log.Error("storing a site health probe", "site", name, "err", err)
		}
	}
}

// count counts stored jobs in the given states.
func (d *Daemon) count(ctx context.Context, states ...bridge.JobState) (int, error) {
	js, err := d.st.List(ctx, bridge.Filter{States: states})
	return len(js), err
}

// health is the api.Checker of the daemon: the store answers and no task
// has been running for more than two minutes.
func (d *Daemon) health(ctx context.Context) error {
	if e := d.lockLost.Load(); e != nil {
		return *e
	}
	if err := d.st.Health(ctx); err != nil {
		return err
	}
	if b := d.busy.Load(); b != 0 {
		if el := time.Since(time.Unix(0, b)); el > 2*time.Minute {
			return fmt.Errorf("the broker's worker has been busy with one task for %s", el.Round(time.Second))
		}
	}
	return nil
}

func (d *Daemon) loadClock() time.Time {
	now := time.Now().UTC().Truncate(time.Second)
	b, err := os.ReadFile(filepath.Join(d.opts.StateDir, clockFile))
	if err != nil {
		return now
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	if err != nil {
		d.log.Warn("ignoring an unreadable simulated clock", "file", clockFile, "err", err)
		return now
	}
	if t.After(now) {
		return t
	}
	return now
}

func (d *Daemon) saveClock() {
	if d.env == nil || d.env.Engine == nil {
		return
	}
	p := filepath.Join(d.opts.StateDir, clockFile)
	tmp := p + ".tmp"
	data := []byte(d.env.Engine.Now().UTC().Format(time.RFC3339Nano) + "\n")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		d.log.Warn("saving the simulated clock", "err", err)
		return
	}
	if err := os.Rename(tmp, p); err != nil {
		d.log.Warn("saving the simulated clock", "err", err)
	}
}

// Shutdown stops the daemon: no new connections, requests in flight
// finished (until ctx is done), the running task finished, the store
// closed, the socket removed. It is safe to call more than once.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.once.Do(func() {
		var errs []error
		if d.cron != nil {
			d.cron.Stop()
		}
		for _, s := range d.servers {
			if err := s.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("stopping the API: %w", err))
			}
		}
		close(d.stop)
		<-d.workDone
		d.saveClock()
		if d.env != nil {
			d.saveReliability(ctx)
		}
		if l := d.opts.shared; l != nil && !l.stepped.Load() {
			if err := l.lease.Release(ctx); err != nil {
				d.log.Warn("releasing the lease", "err", err)
			}
		}
		errs = append(errs, d.closeAll())
		d.shutErr = errors.Join(errs...)
		d.log.Info("stopped", "err", d.shutErr)
	})
	return d.shutErr
}

// closeAll releases the sites and the store, then the state directory's
// lock.
func (d *Daemon) closeAll() error {
	var errs []error
	if d.env != nil {
		errs = append(errs, d.env.Close())
	}
	if d.st != nil {
		errs = append(errs, d.st.Close())
	}
	errs = append(errs, d.lock.Release())
	return errors.Join(errs...)
}

// idPrefixKey holds the state directory's job id prefix in the store.
const idPrefixKey = "broker.id_prefix"

// idPrefix is this state directory's job id prefix: made once, when the
// store is new ("g" + the creation time in nanoseconds, base 36, + "-"), and
// kept in the store. Remote jobs are tagged with the job id, so two state
// directories (two daemons, or a daemon and an earlier one whose directory
// was deleted) must never hand out the same ids: a restarted daemon would
// otherwise adopt another's remote job as its own.
func idPrefix(ctx context.Context, st store.Store) (string, error) {
	v, ok, err := st.Value(ctx, idPrefixKey)
	if err != nil {
		return "", fmt.Errorf("reading the job id prefix: %w", err)
	}
	if ok && len(v) > 0 {
		return string(v), nil
	}
	p := "g" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	if err := st.SetValue(ctx, idPrefixKey, []byte(p)); err != nil {
		return "", fmt.Errorf("storing the job id prefix: %w", err)
	}
	return p, nil
}
