package api_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/store"
	"github.com/gridsub/gridsub/policy"
)

// idleSite is a site no cycle ever runs against: Submit, Job, List and
// Cancel of a queued job never reach a backend.
type idleSite struct{ name string }

var errIdle = errors.New("idle site: no cycle runs in this test")

func (s idleSite) Name() string                                   { return s.name }
func (idleSite) Info(context.Context) (*backends.SiteInfo, error) { return nil, errIdle }
func (idleSite) Submit(context.Context, *backends.JobSpec) (backends.JobID, error) {
	return "", errIdle
}
func (idleSite) Status(context.Context, []backends.JobID) ([]backends.JobStatus, error) {
	return nil, errIdle
}
func (idleSite) Cancel(context.Context, backends.JobID) error { return errIdle }

// waitPlanner leaves every job waiting.
type waitPlanner struct{}

func (waitPlanner) Name() string { return "wait" }
func (waitPlanner) Plan(context.Context, *policy.Snapshot) (*policy.Plan, error) {
	return &policy.Plan{}, nil
}

// realBroker is a *bridge.Broker on the SQLite store, served through
// api.WithStore.
func realBroker(t testing.TB) api.Broker {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "gridsub.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return realBrokerOn(t, st)
}

func realBrokerOn(t testing.TB, st bridge.Store) api.Broker {
	t.Helper()
	b, err := bridge.New(bridge.Options{Store: st, Planner: waitPlanner{},
		Sites: []bridge.SiteConfig{{Name: "Beijing", Backend: idleSite{"Beijing"}}, {Name: "Shanghai", Backend: idleSite{"Shanghai"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return api.WithStore(b, st)
}

func TestRealBrokerThroughAPI(t *testing.T) {
	ctx := context.Background()
	c, _ := serveUnix(t, realBroker(t))
	j, err := c.Submit(ctx, req("real", 2))
	if err != nil {
		t.Fatal(err)
	}
	r := req("elsewhere", 1)
	r.Sites = []string{"Mars"}
	if _, err := c.Submit(ctx, r); !errors.Is(err, bridge.ErrUnknownSite) {
		t.Fatalf("unknown site through the real broker: %v", err)
	}
	js, _, err := c.List(ctx, bridge.Filter{States: []bridge.JobState{bridge.Queued}})
	if err != nil || len(js) != 1 || js[0].ID != j.ID {
		t.Fatalf("List(queued) from the store = %v, %v", js, err)
	}
	if _, err := c.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	got, err := c.Job(ctx, j.ID)
	if err != nil || got.State != bridge.Cancelled {
		t.Fatalf("after cancel: %+v, %v", got, err)
	}
	js, _, err = c.List(ctx, bridge.Filter{States: []bridge.JobState{bridge.Cancelled}, Events: true})
	if err != nil || len(js) != 1 || len(js[0].Events) != 2 {
		t.Fatalf("the store did not get the cancellation: %v, %v", js, err)
	}
}

// A job stored by an earlier run, which this broker did not load, is still
// found by id and listed.
func TestEarlierRunsJobs(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "gridsub.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	old := &bridge.Job{ID: "g000007", State: bridge.Completed, Req: bridge.Request{Name: "yesterday", Nodes: 1},
		Events: []bridge.Event{{Time: t0, Kind: "completed", Msg: "exit 0"}}}
	if err := st.Put(ctx, old); err != nil {
		t.Fatal(err)
	}
	c, _ := serveUnix(t, realBrokerOn(t, st))
	j, err := c.Job(ctx, "g000007")
	if err != nil || j.Req.Name != "yesterday" || len(j.Events) != 1 {
		t.Fatalf("Job of an earlier run = %+v, %v", j, err)
	}
	if _, err := c.Job(ctx, "g000008"); !errors.Is(err, bridge.ErrNotFound) {
		t.Fatalf("Job of an unknown id = %v, want not found", err)
	}
	js, _, err := c.List(ctx, bridge.Filter{Name: "yesterday"})
	if err != nil || len(js) != 1 {
		t.Fatalf("List = %v, %v", js, err)
	}
	// Health follows the store's.
	if _, err := c.Health(ctx); err != nil {
		t.Fatalf("Health with an open store: %v", err)
	}
	st.Close()
	if _, err := c.Health(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Health with a closed store = %v, want 503 unavailable", err)
	}
}

// BenchmarkSubmitRealBroker: the same as BenchmarkSubmitOverSocket but into
// a real *bridge.Broker, whose Submit holds its mutex across Store.Put (so
// concurrent submissions cannot share commits).
func BenchmarkSubmitRealBroker(b *testing.B) {
	for _, clients := range []int{1, 50} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			c, _ := serveUnix(b, realBroker(b))
			ctx := context.Background()
			r := req("bench", 4)
			work := make(chan struct{}, b.N)
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			b.ResetTimer()
			var wg sync.WaitGroup
			errc := make(chan error, clients)
			for range clients {
				wg.Go(func() {
					for range work {
						if _, err := c.Submit(ctx, r); err != nil {
							errc <- err
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
			close(errc)
			for err := range errc {
				b.Fatal(err)
			}
		})
	}
}
