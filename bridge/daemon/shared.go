package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/bridge/store"
	"github.com/gridsub/gridsub/bridge/store/pgstore"
)

// Several brokers, one state (store.shared: true on a PostgreSQL store).
//
// Every broker starts as a follower: it answers reads from the shared
// store and accepts submissions — checked by a broker of its own exactly
// as the leader would check them, stored with a handoff row in the same
// transaction — but plans and dispatches nothing. Each campaigns for the
// lease (pgstore.Lease). The winner becomes the leader as a restarted
// daemon does: a broker built afresh, Recover (every dispatch intent looked
// up by its tag: adopted, never submitted twice), then cycles. Every cycle
// it first takes the handoffs (bridge.Broker.Take). Every write of the
// leader is fenced by its epoch in the same transaction, so a leader that
// was paused past its lease commits nothing once it resumes, and cannot
// write a dispatch intent nor submit. The leader renews its lease every
// third of its TTL; when a renewal says another broker leads (or the
// lease ran out unrenewed), it steps down: it stops cycling at once, logs
// the "stepped_down" event and Run returns ErrSteppedDown (its supervisor
// restarts it, as a follower).

// ErrSteppedDown: this broker led, lost the lease to another and stopped.
// Restart it: it comes back as a follower.
var ErrSteppedDown = errors.New("stepped down: another broker leads now")

// SharedOptions turn on several brokers sharing one PostgreSQL store.
type SharedOptions struct {
	// Name identifies this broker among those sharing the store (default
	// the host name and the state directory).
	Name string
	// Lease is how long a leader's lease lasts unrenewed (default 3s): a
	// follower takes over about this long after the leader died.
	Lease time.Duration
}

// leadership is a leading daemon's lease (Options.shared set by runShared).
type leadership struct {
	st      *pgstore.Postgres
	lease   *pgstore.Lease
	stepped atomic.Bool
	lost    atomic.Int64 // unix ns the lease lapses unless renewed
	keys    *keys        // the leader's idempotency keys
}

// learn records that key was answered with job id, unless the key is
// known already (the oldest job of a key wins).
func (k *keys) learn(key, id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.ids[key]; !ok {
		k.ids[key] = keyed{id, time.Now()}
	}
}

// leading reports whether this daemon still leads (a daemon on a store of
// its own always does).
func (d *Daemon) leading() bool {
	l := d.opts.shared
	if l == nil {
		return true
	}
	if l.stepped.Load() {
		return false
	}
	if time.Now().UnixNano() > l.lost.Load() {
		d.stepDown(fmt.Errorf("the lease of epoch %d lapsed unrenewed", l.lease.Epoch()))
		return false
	}
	return true
}

// stepDown stops the leader: no cycle, no binding from now on; Run returns
// ErrSteppedDown.
func (d *Daemon) stepDown(why error) {
	l := d.opts.shared
	if l == nil || l.stepped.Swap(true) {
		return
	}
	d.log.Warn("stepped down", "event", "stepped_down", "broker", l.lease.Name(), "epoch", l.lease.Epoch(), "why", why)
	select {
	case d.errc <- fmt.Errorf("%w (%v)", ErrSteppedDown, why):
	default:
	}
}

// keepLease renews the lease every third of its TTL until the daemon
// stops or another broker leads.
func (d *Daemon) keepLease() {
	l := d.opts.shared
	every := l.lease.TTL() / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		start := time.Now()
		err := l.lease.Renew(ctx)
		if err == nil {
			err = l.lease.Heartbeat(ctx, d.opts.Socket)
		}
		cancel()
		switch {
		case errors.Is(err, pgstore.ErrFenced):
			d.stepDown(err)
			return
		case err == nil:
			l.lost.Store(start.Add(l.lease.TTL()).UnixNano())
		default:
			d.log.Warn("renewing the lease", "err", err)
		}
	}
}

// takeHandoffs puts the jobs followers accepted into the leader's queue
// before a cycle.
func (d *Daemon) takeHandoffs(ctx context.Context) {
	l := d.opts.shared
	if l == nil {
		return
	}
	ids, err := l.st.Handoffs(ctx)
	if err != nil || len(ids) == 0 {
		if err != nil {
			d.log.Warn("reading the followers' submissions", "err", err)
		}
		return
	}
	var jobs []*bridge.Job
	for _, id := range ids {
		j, err := l.st.Get(ctx, id)
		if err != nil {
			d.log.Warn("reading a follower's submission", "job", id, "err", err)
			continue
		}
		jobs = append(jobs, j)
	}
	took := d.env.Broker.Take(ctx, jobs, d.env.Now())
	if l.keys != nil {
		for _, j := range jobs {
			if j.Req.IdempotencyKey != "" && j.Parent == "" {
				l.keys.learn(j.Req.IdempotencyKey, j.ID)
			}
		}
	}
	if err := l.st.DoneHandoffs(ctx, ids); err != nil {
		d.log.Warn("marking the followers' submissions taken", "err", err)
	}
	if len(took) > 0 {
		d.log.Debug("took the followers' submissions", "jobs", len(took))
	}
}

// Leadership is what a broker of a shared store says of the service.
type Leadership struct {
	Broker string `json:"broker"` // this broker
	Role   string `json:"role"`   // "leader" or "follower"
	pgstore.Leadership
}

// ServiceRoute is the socket route that says who leads (gridsub status
// without a job id).
const ServiceRoute = "GET /v1/service"

// serviceHandler answers ServiceRoute from the lease row.
func serviceHandler(lease *pgstore.Lease, role func() string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st, err := lease.Status(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSONTo(w, Leadership{Broker: lease.Name(), Role: role(), Leadership: st})
	}
}

// leaderCollector exports the leadership on /metrics.
type leaderCollector struct {
	lease *pgstore.Lease
	role  func() string
	ld    *prometheus.Desc
	ep    *prometheus.Desc
	fo    *prometheus.Desc
}

func newLeaderCollector(lease *pgstore.Lease, role func() string) *leaderCollector {
	return &leaderCollector{lease: lease, role: role,
		ld: prometheus.NewDesc("gridsub_leader", "1 for the broker that leads the shared store (by name), as the store says.", []string{"broker"}, nil),
		ep: prometheus.NewDesc("gridsub_leader_epoch", "The fencing epoch of the current leadership.", nil, nil),
		fo: prometheus.NewDesc("gridsub_followers", "Brokers of the shared store seen lately, the leader left out.", nil, nil)}
}

func (c *leaderCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.ld; ch <- c.ep; ch <- c.fo }

func (c *leaderCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.lease.Status(ctx)
	if err != nil {
		return
	}
	if st.Leader != "" {
		ch <- prometheus.MustNewConstMetric(c.ld, prometheus.GaugeValue, 1, st.Leader)
	}
	ch <- prometheus.MustNewConstMetric(c.ep, prometheus.GaugeValue, float64(st.Epoch))
	ch <- prometheus.MustNewConstMetric(c.fo, prometheus.GaugeValue, float64(len(st.Followers)))
}

// follower is what a follower's API serves: submissions through a broker
// that only checks and stores them (handed to the leader), reads from the
// shared store.
type follower struct {
	b  *bridge.Broker
	st store.Store
}

var _ api.Broker = (*follower)(nil)

// Submit checks and stores a submission for the leader. A request with an
// IdempotencyKey the store already has (within bridge.MaxIdempotencyAge)
// gets that job, as every broker of the store answers it. (Two requests
// with one key reaching two brokers at the same instant may both be
// stored: keys are checked, not locked, across brokers.)
func (f *follower) Submit(ctx context.Context, req bridge.Request, now time.Time) (*bridge.Job, error) {
	if req.IdempotencyKey != "" {
		keys, err := f.st.IdempotencyKeys(ctx, time.Now().Add(-bridge.MaxIdempotencyAge))
		if err != nil {
			return nil, err
		}
		if id, ok := keys[req.IdempotencyKey]; ok {
			return f.st.Get(ctx, id)
		}
	}
	return f.b.Submit(ctx, req, now)
}

func (f *follower) Job(id string) (*bridge.Job, error) { return f.st.Get(context.Background(), id) }

func (f *follower) ListJobs(ctx context.Context, fl bridge.Filter) ([]*bridge.Job, error) {
	return f.st.List(ctx, fl)
}

// Cancel asks the leader to cancel id (request) and waits a little for it.
func (f *follower) Cancel(ctx context.Context, id string, now time.Time) error {
	return f.request(ctx, id, "cancel", now)
}

// Hold, Release and Requeue ask the leader as Cancel does (api.Controller).
func (f *follower) Hold(ctx context.Context, id string, now time.Time) error {
	return f.request(ctx, id, "hold", now)
}

func (f *follower) Release(ctx context.Context, id string, now time.Time) error {
	return f.request(ctx, id, "release", now)
}

func (f *follower) Requeue(ctx context.Context, id string, now time.Time) error {
	return f.request(ctx, id, "requeue", now)
}

var _ api.Controller = (*follower)(nil)

// RequestPrefix starts the store values by which a follower hands the
// leader what a user asked of a job (cancel, hold, release, requeue):
// RequestPrefix + <unix nanoseconds, 20 digits> + "/" + <job id>, whose
// value is the action. The leader carries them out in key order before
// each cycle (takeRequests) and deletes each once done.
const RequestPrefix = "request/"

// followerWait is how long a follower waits for the leader to carry out a
// request before it answers with the job as it stands.
const followerWait = 10 * time.Second

// request stores action on id for the leader and waits up to followerWait
// for the job to change. A job that does not exist is ErrNotFound; an
// ended one ErrFinal; the leader's own refusal (a running job held) is
// not known here: the leader logs it, and the job stays as it was.
func (f *follower) request(ctx context.Context, id, action string, now time.Time) error {
	j, err := f.st.Get(ctx, id)
	if err != nil {
		return err
	}
	if j.State.Final() {
		return fmt.Errorf("%w: %s is %s", bridge.ErrFinal, id, j.State)
	}
	key := fmt.Sprintf("%s%020d/%s", RequestPrefix, time.Now().UnixNano(), id)
	if err := f.st.SetValue(ctx, key, []byte(action)); err != nil {
		return fmt.Errorf("handing the %s of %s to the leader: %w", action, id, err)
	}
	before := j.State
	for deadline := time.Now().Add(followerWait); time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return nil // stored: the leader carries it out
		case <-time.After(200 * time.Millisecond):
		}
		if _, pending, err := f.st.Value(ctx, key); err == nil && !pending {
			return nil // done by the leader
		}
		if j, err := f.st.Get(ctx, id); err == nil && j.State != before {
			return nil
		}
	}
	return nil
}

// takeRequests carries out, before a cycle, what users asked of jobs
// through the followers (follower.request), in the order asked, and
// deletes each request once done. A request the broker refuses is logged
// with why and dropped: the job is as the leader's rules say.
func (d *Daemon) takeRequests(ctx context.Context) {
	l := d.opts.shared
	if l == nil {
		return
	}
	reqs, err := l.st.Values(ctx, RequestPrefix)
	if err != nil || len(reqs) == 0 {
		if err != nil {
			d.log.Warn("reading the followers' requests", "err", err)
		}
		return
	}
	b := d.env.Broker
	do := map[string]func(context.Context, string, time.Time) error{"cancel": b.Cancel, "hold": b.Hold, "release": b.Release, "requeue": b.Requeue}
	for _, key := range slices.Sorted(maps.Keys(reqs)) {
		_, id, ok := strings.Cut(strings.TrimPrefix(key, RequestPrefix), "/")
		action := string(reqs[key])
		fn := do[action]
		if !ok || id == "" || fn == nil {
			fn = nil
			d.log.Warn("dropping a malformed request from a follower", "key", key)
		}
		// Cancel, hold and release are idempotent: each is deleted once
		// done, so a crash in between does it again. A requeue is not (the
		// job may be placed again meanwhile): it is deleted first, and a
		// crash in between loses it.
		once := action == "requeue"
		if once || fn == nil {
			if err := l.st.DeleteValue(ctx, key); err != nil {
				d.log.Warn("deleting a follower's request", "key", key, "err", err)
				return // asked again next cycle
			}
		}
		if fn == nil {
			continue
		}
		if err := fn(ctx, id, d.env.Now()); err != nil && !errors.Is(err, bridge.ErrFinal) {
			d.log.Warn("a request handed over by a follower was refused", "job", id, "action", action, "err", err)
		}
		if !once {
			if err := l.st.DeleteValue(ctx, key); err != nil {
				d.log.Warn("deleting a follower's request", "key", key, "err", err)
				return // done again next cycle: idempotent
			}
		}
	}
}

func (f *follower) SiteNames() []string { return f.b.SiteNames() }

func (f *follower) Health(ctx context.Context) error { return f.st.Health(ctx) }

// runShared is Run for a broker sharing a PostgreSQL store: follow until
// this broker wins the lease, then lead (Start on the fenced store).
func runShared(ctx context.Context, opts Options) error {
	log := opts.Logger
	so := *opts.Shared
	if so.Lease <= 0 {
		so.Lease = 3 * time.Second
	}
	if so.Name == "" {
		h, _ := os.Hostname()
		so.Name = h + ":" + opts.StateDir
	}
	if opts.Store.Kind != StorePostgres {
		return fmt.Errorf("%w: several brokers share a store of kind %q only", ErrOptions, StorePostgres)
	}
	lock, err := LockStateDir(opts.StateDir)
	if err != nil {
		return err
	}
	st0, err := OpenStore(ctx, opts.Store, opts.StateDir, log)
	if err != nil {
		lock.Release()
		return err
	}
	st := st0.(*pgstore.Postgres)
	lease := st.NewLease(so.Name, so.Lease)
	lead := &leadership{st: st, lease: lease}

	// Follow.
	st.SetHandoff(true)
	spec := opts.Spec
	spec.Store = st
	spec.OffLimits = append(slices.Clone(spec.OffLimits), opts.StateDir) // as the leader's (Start)
	if spec.IDPrefix, err = idPrefix(ctx, st); err != nil {
		st.Close()
		lock.Release()
		return err
	}
	fenv, err := assemble.Build(ctx, spec, assemble.Options{Logger: log})
	if err != nil {
		st.Close()
		lock.Release()
		return err
	}
	fsrv := api.NewServer(&follower{b: fenv.Broker, st: st}, api.ServerOptions{Now: fenv.Now, Logger: log, IDPrefix: spec.IDPrefix})
	mux := http.NewServeMux()
	mux.HandleFunc(ServiceRoute, serviceHandler(lease, func() string { return "follower" }))
	mux.Handle("/", fsrv.Handler())
	ul, err := api.ListenUnix(opts.Socket)
	if err != nil {
		fenv.Close()
		st.Close()
		lock.Release()
		return err
	}
	hs := api.NewHTTPServer(mux, opts.Limits.WithDefaults(), log)
	go hs.Serve(ul)
	log.Info("following", "broker", so.Name, "store", st.Where(), "socket", opts.Socket, "lease", so.Lease)
	hb, stopHB := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(so.Lease / 3)
		defer t.Stop()
		for {
			lease.Heartbeat(hb, opts.Socket)
			select {
			case <-hb.Done():
				return
			case <-t.C:
			}
		}
	}()
	err = lease.Campaign(ctx, so.Lease/6)
	stopHB()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	hs.Shutdown(sctx)
	cancel()
	fenv.Close()
	st.SetHandoff(false)
	lock.Release()
	if err != nil {
		st.Close()
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	lead.lost.Store(time.Now().Add(so.Lease).UnixNano())
	log.Info("leading", "event", "leader", "broker", so.Name, "epoch", lease.Epoch())

	// Lead: a restarted daemon's start on the fenced store.
	opts.shared = lead
	return run(ctx, opts)
}

func writeJSONTo(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
