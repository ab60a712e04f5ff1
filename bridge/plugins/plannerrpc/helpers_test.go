package plannerrpc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/coalloc"
)

var t0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

// mockPlanner is a planner with function fields.
type mockPlanner struct {
	name string
	plan func(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error)
}

func (m *mockPlanner) Name() string { return m.name }
func (m *mockPlanner) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	return m.plan(ctx, s)
}

// dial serves impl through go-plugin's in-process gRPC pair and returns
// what a host dispenses, and the server (Stop it to play a plugin that
// died).
func dial(t testing.TB, impl policy.Planner) (policy.Planner, *goplugin.GRPCServer) {
	t.Helper()
	c, s := goplugin.TestPluginGRPCConn(t, false, PluginMap(impl))
	// Close asks the server to stop (go-plugin's controller): stopping it
	// here as well would race with that.
	t.Cleanup(func() { c.Close() })
	raw, err := c.Dispense(plugins.KindPlanner)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := raw.(policy.Planner)
	if !ok {
		t.Fatalf("dispensed a %T, not a policy.Planner", raw)
	}
	return p, s
}

func builtin(t testing.TB, name string) policy.Planner {
	t.Helper()
	p, err := coalloc.ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// randSnapshot is a grid of n sites with running jobs and a queue of q
// jobs, every field of the policy types set somewhere.
func randSnapshot(r *rand.Rand, n, q int) *policy.Snapshot {
	s := &policy.Snapshot{Now: t0, MultiSite: 1.1 + r.Float64(), Links: make([][]policy.Link, n), Uplinks: make([]policy.Link, n)}
	for i := range n {
		nodes := 16 << r.IntN(4)
		site := policy.Site{Name: fmt.Sprintf("site%d", i), Nodes: nodes, Free: nodes, H: 0.5 + r.Float64(), Trust: 0.5 + r.Float64()/2}
		for range r.IntN(4) {
			k := 1 + r.IntN(max(1, site.Free/3))
			if k > site.Free {
				break
			}
			site.Busy = append(site.Busy, policy.Hold{Nodes: k, Until: t0.Add(time.Duration(1+r.IntN(7200)) * time.Second)})
			site.Free -= k
		}
		s.Sites = append(s.Sites, site)
		s.Links[i] = make([]policy.Link, n)
		for k := range n {
			if k != i {
				s.Links[i][k] = policy.Link{SecPerByte: 1e-6 * r.Float64(), Latency: time.Duration(r.IntN(1000)) * time.Millisecond}
			}
		}
		s.Uplinks[i] = policy.Link{SecPerByte: 1e-7, Latency: time.Duration(r.IntN(300)) * time.Millisecond}
	}
	for k := range q {
		s.Queue = append(s.Queue, randJob(r, fmt.Sprintf("q%d", k), t0.Add(-time.Duration(q-k)*time.Minute), n))
	}
	return s
}

func randJob(r *rand.Rand, id string, submit time.Time, n int) policy.Job {
	j := policy.Job{ID: id, Width: 1 + r.IntN(48), Estimate: time.Duration(60+r.IntN(4*3600)) * time.Second,
		Submit: submit, Origin: r.IntN(n+1) - 1, DataSize: int64(r.IntN(1 << 30))}
	switch r.IntN(12) {
	case 0:
		j.NoSplit = true
	case 1:
		j.Preferred = []int{r.IntN(n)}
	case 2:
		j.Deadline = submit.Add(48 * time.Hour)
	}
	return j
}

// normPlan makes empty slices nil (the wire does not tell them apart).
func normPlan(p *policy.Plan) *policy.Plan {
	if p == nil {
		return nil
	}
	out := *p
	if len(out.Decisions) == 0 {
		out.Decisions = nil
	}
	if len(out.Pending) == 0 {
		out.Pending = nil
	}
	out.Decisions = append([]policy.Decision(nil), out.Decisions...)
	for i := range out.Decisions {
		d := &out.Decisions[i]
		if len(d.Beaten) == 0 {
			d.Beaten = nil
		}
		if len(d.Status.Reasons) == 0 {
			d.Status.Reasons = nil
		}
		if len(d.Chosen.Parts) == 0 {
			d.Chosen.Parts = nil
		}
	}
	out.Pending = append([]policy.Pending(nil), out.Pending...)
	for i := range out.Pending {
		if len(out.Pending[i].Status.Reasons) == 0 {
			out.Pending[i].Status.Reasons = nil
		}
	}
	return &out
}

func samePlan(t testing.TB, where string, want, got *policy.Plan) {
	t.Helper()
	if w, g := normPlan(want), normPlan(got); !reflect.DeepEqual(w, g) {
		t.Fatalf("%s: plan\n%+v\nwant\n%+v", where, g, w)
	}
}
