package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/store"
)

// IDPlaceholder in a submitted Request.OutputDir is replaced by the new
// job's id (by the broker, before the job is first stored).
const IDPlaceholder = bridge.IDPlaceholder

// service is what the API serves: the broker for live jobs, the store for
// lists and for jobs that ended before the daemon's last restart (the
// broker's memory holds only what it ran or recovered).
type service struct {
	b    *bridge.Broker
	st   store.Store
	m    *metrics
	d    *Daemon
	keys *keys // idempotency keys (idempotency.go)
	// logins are the site logins under way (login.go).
	logins logins
}

var (
	_ api.Broker         = (*service)(nil)
	_ api.Checker        = (*service)(nil)
	_ api.SiteReporter   = (*service)(nil)
	_ api.PluginReporter = (*service)(nil)
	_ api.Explainer      = (*service)(nil)
)

// Explain and ExplainJob answer POST /v1/explain and GET
// /v1/jobs/{id}/explain: the broker's own (nothing is stored).
func (s *service) Explain(ctx context.Context, req bridge.Request, now time.Time) (*bridge.Explanation, error) {
	return s.b.Explain(ctx, req, now)
}

func (s *service) ExplainJob(ctx context.Context, id string, now time.Time) (*bridge.Explanation, error) {
	return s.b.ExplainJob(ctx, id, now)
}

// Submit submits through the broker. A request with an IdempotencyKey
// already answered (within bridge.MaxIdempotencyAge, across restarts)
// gets the job of its first submission, as it is now, and no new job.
func (s *service) Submit(ctx context.Context, req bridge.Request, now time.Time) (*bridge.Job, error) {
	if req.IdempotencyKey == "" || s.keys == nil {
		return s.submit(ctx, req, now)
	}
	id, j, err := s.keys.submit(ctx, req.IdempotencyKey, func() (*bridge.Job, error) { return s.submit(ctx, req, now) })
	if id != "" {
		s.m.submissions.WithLabelValues("replayed").Inc()
		return s.Job(id)
	}
	return j, err
}

func (s *service) submit(ctx context.Context, req bridge.Request, now time.Time) (*bridge.Job, error) {
	j, err := s.b.Submit(ctx, req, now)
	switch {
	case errors.Is(err, bridge.ErrBadRequest), errors.Is(err, bridge.ErrUnknownSite), errors.Is(err, bridge.ErrInfeasible):
		s.m.submissions.WithLabelValues("rejected").Inc()
		return nil, err
	case err != nil:
		s.m.submissions.WithLabelValues("error").Inc()
		return nil, err
	}
	s.m.submissions.WithLabelValues("ok").Inc()
	s.d.queue.submitted(j)
	s.d.postSubmitted() // a new job waits for the next cycle, not for the next period
	return j, nil
}

func (s *service) Job(id string) (*bridge.Job, error) {
	j, err := s.b.Job(id)
	if errors.Is(err, bridge.ErrNotFound) {
		return s.st.Get(context.Background(), id)
	}
	return j, err
}

func (s *service) ListJobs(ctx context.Context, f bridge.Filter) ([]*bridge.Job, error) {
	return s.st.List(ctx, f)
}

// Queue answers GET /v1/queue from the broker's memory (every unfinished
// job is there), as of the last cycle and the submissions since: the
// front-ends' squeue reads no store and waits for no cycle.
func (s *service) Queue(context.Context) ([]api.QueueRow, error) {
	return s.d.queue.get(s.b), nil // queue.go
}

// QueueOf answers GET /v1/queue?id= from the same rows, searched.
func (s *service) QueueOf(_ context.Context, id string) ([]api.QueueRow, error) {
	return s.d.queue.of(s.b, id), nil
}

// WriteQueue answers GET /v1/queue with the rows queue.go keeps encoded.
func (s *service) WriteQueue(_ context.Context, w io.Writer) error {
	return s.d.queue.write(s.b, w)
}

func (s *service) Cancel(ctx context.Context, id string, now time.Time) error {
	err := s.b.Cancel(ctx, id, now)
	if errors.Is(err, bridge.ErrNotFound) {
		// Ended before the last restart: known to the store only.
		if j, gerr := s.st.Get(ctx, id); gerr == nil && j.State.Final() {
			return fmt.Errorf("%w: %s is %s", bridge.ErrFinal, id, j.State)
		}
	}
	return err
}

func (s *service) SiteNames() []string { return s.b.SiteNames() }

// Hold, Release and Requeue implement api.Controller: a job that ended
// before the last restart (known to the store only) is ErrFinal.
func (s *service) Hold(ctx context.Context, id string, now time.Time) error {
	return s.ended(ctx, id, s.b.Hold(ctx, id, now))
}

func (s *service) Release(ctx context.Context, id string, now time.Time) error {
	return s.ended(ctx, id, s.b.Release(ctx, id, now))
}

func (s *service) Requeue(ctx context.Context, id string, now time.Time) error {
	return s.ended(ctx, id, s.b.Requeue(ctx, id, now))
}

func (s *service) ended(ctx context.Context, id string, err error) error {
	if errors.Is(err, bridge.ErrNotFound) {
		if j, gerr := s.st.Get(ctx, id); gerr == nil && j.State.Final() {
			return fmt.Errorf("%w: %s is %s", bridge.ErrFinal, id, j.State)
		}
	}
	return err
}

// SiteStatus answers GET /v1/sites from the store: the health task's last
// probes (of this run, or of the previous one until the first probe), the
// outcome counts Put keeps, trust when a policy has computed it, and the
// learned availability model's view (reliability.go).
func (s *service) SiteStatus(ctx context.Context) ([]api.Site, error) {
	recs, err := s.st.SiteHealth(ctx)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*store.SiteHealth, len(recs))
	for i := range recs {
		byName[recs[i].Site] = &recs[i]
	}
	rel := s.d.siteReliability()
	out := make([]api.Site, 0, len(s.d.env.Sites))
	for _, sp := range s.d.env.Sites {
		site := api.NewSite(sp.Name, sp.Kind, sp.Nodes, sp.CoresPerNode, sp.H, byName[sp.Name])
		site.Reliability = rel[sp.Name]
		site.Commands = siteCommands(s.b, sp.Name)
		out = append(out, site)
	}
	return out, nil
}

// Plugins answers GET /v1/plugins: what serves each site's backend now,
// then the planner plugin if the broker has one, then its policy plugins.
func (s *service) Plugins(context.Context) ([]api.Plugin, error) {
	ls := s.d.plugins()
	out := make([]api.Plugin, 0, len(ls))
	for _, l := range ls {
		out = append(out, api.Plugin(l))
	}
	return out, nil
}

// ConfiguredPolicies answers GET /v1/plugins' policies: what the
// configuration chose for each policy kind.
func (s *service) ConfiguredPolicies() map[string]string { return s.d.env.ConfiguredPolicies() }

func (s *service) Health(ctx context.Context) error { return s.d.health(ctx) }

// Reservations answers GET /v1/reservations from the store's reservations
// table.
func (s *service) Reservations(ctx context.Context, active bool) ([]api.Reservation, error) {
	rs, err := s.st.Reservations(ctx, active)
	if err != nil {
		return nil, err
	}
	out := make([]api.Reservation, len(rs))
	for i, r := range rs {
		out[i] = api.NewReservation(r)
	}
	return out, nil
}

// MatchIDs implements bridge.IDMatcher from the store: the API resolves
// shortened job ids with it.
func (s *service) MatchIDs(ctx context.Context, q string, limit int) ([]string, error) {
	return s.st.MatchIDs(ctx, q, limit)
}

// siteCommands is the scheduler-command account of a site whose backend
// keeps one (backends.CommandCounter), nil otherwise.
func siteCommands(b *bridge.Broker, name string) *api.SiteCommands {
	be, ok := b.Site(name)
	if !ok {
		return nil
	}
	cc, ok := backends.AsCommandCounter(be)
	if !ok {
		return nil
	}
	st := cc.CommandStats()
	out := &api.SiteCommands{PerMinute: st.PerMinute, Budget: st.Budget, Total: st.Total, Deferred: st.Deferred,
		BackoffReason: st.BackoffReason}
	if !st.BackoffUntil.IsZero() {
		t := st.BackoffUntil
		out.BackoffUntil = &t
	}
	return out
}
