package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
	"github.com/gridsub/gridsub/policy"
)

// downSite is a site whose calls fail with ErrUnavailable while down.
type downSite struct {
	mu   sync.Mutex
	down atomic.Bool
	jobs map[backends.JobID]backends.State
}

func (s *downSite) Name() string { return "A" }
func (s *downSite) Info(context.Context) (*backends.SiteInfo, error) {
	if s.down.Load() {
		return nil, fmt.Errorf("%w: site down", backends.ErrUnavailable)
	}
	return &backends.SiteInfo{Name: "A", Nodes: 4, FreeNodes: 4}, nil
}
func (s *downSite) Submit(_ context.Context, sp *backends.JobSpec) (backends.JobID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := backends.JobID(fmt.Sprint(len(s.jobs) + 1))
	s.jobs[id] = backends.StatePending
	return id, nil
}
func (s *downSite) Status(_ context.Context, ids []backends.JobID) ([]backends.JobStatus, error) {
	if s.down.Load() {
		return nil, fmt.Errorf("%w: site down", backends.ErrUnavailable)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]backends.JobStatus, len(ids))
	for i, id := range ids {
		out[i] = backends.JobStatus{ID: id, State: s.jobs[id]}
	}
	return out, nil
}
func (s *downSite) Cancel(_ context.Context, id backends.JobID) error {
	if s.down.Load() {
		return fmt.Errorf("%w: site down", backends.ErrUnavailable)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs[id] = backends.StateCancelled
	return nil
}

func (s *downSite) state(id backends.JobID) backends.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobs[id]
}

// firstSite starts every queued job on site 0.
type firstSite struct{}

func (firstSite) Name() string { return "first" }
func (firstSite) Plan(_ context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	p := &policy.Plan{}
	for _, j := range s.Queue {
		p.Decisions = append(p.Decisions, policy.Decision{Job: j.ID, Action: policy.Start, Chosen: policy.Option{Parts: []policy.Part{{Site: 0, Nodes: j.Width}}}})
	}
	return p, nil
}

// TestPendingCancelDurableInSQLite: a user cancels a running job while its
// site does not answer (a broker without QoS tiers); the daemon stops and
// starts again on the same database file with the site still down. The
// cancel owed is in the file, so once the site answers the new broker
// cancels the remote job: it does not run on.
func TestPendingCancelDurableInSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gridsub.db")
	site := &downSite{jobs: map[backends.JobID]backends.State{}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	open := func() (*store.SQLite, *bridge.Broker) {
		st, err := store.Open(ctx, path, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := bridge.New(bridge.Options{Store: st, Planner: firstSite{}, Sites: []bridge.SiteConfig{{Name: "A", Backend: site}}})
		if err != nil {
			t.Fatal(err)
		}
		return st, b
	}
	st, b := open()
	j, err := b.Submit(ctx, bridge.Request{Name: "t", Command: []string{"true"}, Nodes: 1, Estimate: time.Hour}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Cycle(ctx, t0); err != nil {
		t.Fatal(err)
	}
	site.down.Store(true)
	if err := b.Cancel(ctx, j.ID, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if site.state("1") != backends.StatePending {
		t.Fatalf("remote job %s while its site is down", site.state("1"))
	}
	st.Close()

	st, b = open()
	defer st.Close()
	if _, err := b.Recover(ctx, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	site.down.Store(false)
	if _, err := b.Cycle(ctx, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// The retry of a real site's cancel runs in the background.
	for end := time.Now().Add(5 * time.Second); site.state("1") != backends.StateCancelled; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("remote job %s after the restart: the cancel owed was forgotten", site.state("1"))
		}
	}
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		raw, _, err := st.Value(ctx, bridge.DutiesKey)
		if err == nil && string(raw) == "{}" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("duties after the cancel: %s %v", raw, err)
		}
	}
}
