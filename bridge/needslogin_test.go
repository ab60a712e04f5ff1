package bridge

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// loginSite answers every call with err while set (a site whose SSH
// login waits for a person, or one that is down).
type loginSite struct {
	*fakeSite
	err atomic.Pointer[error] // nil: answers
}

func (f *loginSite) fail() error {
	if e := f.err.Load(); e != nil {
		return *e
	}
	return nil
}

func (f *loginSite) Info(ctx context.Context) (*backends.SiteInfo, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.fakeSite.Info(ctx)
}

func (f *loginSite) Status(ctx context.Context, ids []backends.JobID) ([]backends.JobStatus, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.fakeSite.Status(ctx, ids)
}

// TestNeedsLoginIsNotAnOutage: a site whose status calls fail because its
// login waits for a person (backends.ErrNeedsLogin) for longer than
// TierOptions.DownAfter keeps its jobs' components as they were, is not
// reported down to the availability model, and once logged in its jobs
// end normally; the same silence for another reason (the site is down)
// loses them, as before.
func TestNeedsLoginIsNotAnOutage(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		wantLost bool
	}{
		{"needs login", fmt.Errorf("status: %w: %w: login node: asks for a one-time password", backends.ErrNeedsLogin, backends.ErrUnavailable), false},
		{"down", errDown, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &loginSite{fakeSite: newFake("A", 4)}
			rel := &fakeRel{rc: map[string]float64{"A": 0}}
			b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a}},
				Planner: scriptPlanner{fitAllowed}, Tiers: &TierOptions{DownAfter: 10 * time.Second, Reliability: rel}})
			if err != nil {
				t.Fatal(err)
			}
			j, err := b.Submit(context.Background(), qreq("none"), t0)
			if err != nil {
				t.Fatal(err)
			}
			mustCycle(t, b, t0)
			a.runAll(backends.StateRunning, 0)
			mustCycle(t, b, t0.Add(time.Second))
			if got, _ := b.Job(j.ID); got.State != Running {
				t.Fatalf("job %s, want running", got.State)
			}
			a.err.Store(&tc.err)
			for s := 2; s <= 40; s += 2 {
				b.Cycle(context.Background(), t0.Add(time.Duration(s)*time.Second))
			}
			got, _ := b.Job(j.ID)
			// Lost: the component given up (and the job requeued or ended).
			kept := got.State == Running && len(got.Comps) == 1 && got.Comps[0].State == backends.StateRunning
			if kept == tc.wantLost {
				t.Fatalf("after 40 s of %v: job %s with components %+v, want lost=%v", tc.err, got.State, got.Comps, tc.wantLost)
			}
			if tc.wantLost {
				return
			}
			if len(rel.obs) != 0 {
				t.Errorf("the availability model heard %v, want nothing", rel.obs)
			}
			a.err.Store(nil)
			a.runAll(backends.StateCompleted, 0)
			mustCycle(t, b, t0.Add(42*time.Second))
			if got, _ := b.Job(j.ID); got.State != Completed || len(got.Comps) != 1 {
				t.Errorf("after the login: job %s with %d components, want completed with its one", got.State, len(got.Comps))
			}
		})
	}
}
