package policyrpc

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/wire"
	"github.com/gridsub/gridsub/policy"
)

// TestOrderShim: the plugin sees the host's OrderInput field for field
// (queue, running use, accounted use, shares, half-life), the host gets
// the plugin's permutation back, an error keeps its identity, and an
// answer that is not a permutation of the queue is a bad reply, not an
// order.
func TestOrderShim(t *testing.T) {
	in := &policy.OrderInput{Now: t0, HalfLife: 3 * time.Hour, DefaultShares: 2,
		Queue: []policy.QueuedJob{{ID: "j1", User: "alice", Submit: t0.Add(-time.Minute), Nodes: 4}, {ID: "j2", User: "bob", Submit: t0.Add(-time.Second), Nodes: 1},
			{ID: "j3", User: "", Nodes: 0}},
		Usage:     []policy.UsageRecord{{User: "alice", Nodes: 8, Start: t0.Add(-2 * time.Hour), End: t0.Add(-time.Hour)}, {User: "bob", Nodes: 2, Start: t0.Add(-time.Minute)}},
		Accounted: []policy.AccountedUse{{User: "carol", NodeSeconds: 12345.5, At: t0.Add(-90 * time.Minute)}},
		Shares:    map[string]float64{"alice": 3, "bob": 0.5}}
	var seen *policy.OrderInput
	answer := []int{2, 0, 1}
	var fail error
	raw, _ := Test(t, plugins.KindOrder, mockOrder{order: func(in *policy.OrderInput) ([]int, error) {
		seen = in
		return answer, fail
	}})
	c := raw.(*OrderClient)
	if c.Name() != "mock-order" {
		t.Errorf("name %q", c.Name())
	}
	got, err := c.Order(in)
	if err != nil || !reflect.DeepEqual(got, answer) {
		t.Fatalf("Order %v %v, want %v", got, err, answer)
	}
	if !reflect.DeepEqual(seen, in) {
		t.Errorf("the plugin saw\n%+v\nnot\n%+v", seen, in)
	}
	// nil and empty Shares stay apart.
	in.Shares = nil
	if _, err := c.Order(in); err != nil || seen.Shares != nil {
		t.Errorf("nil shares arrived as %#v (%v)", seen.Shares, err)
	}
	in.Shares = map[string]float64{}
	if _, err := c.Order(in); err != nil || seen.Shares == nil {
		t.Errorf("empty shares arrived as %#v (%v)", seen.Shares, err)
	}
	fail = errors.ErrUnsupported
	if _, err := c.Order(in); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("error %v lost its identity", err)
	}
	fail = nil
	for _, bad := range [][]int{{0, 1}, {0, 1, 1}, {0, 1, 3}, {-1, 0, 1}, {0, 1, 2, 3}} {
		answer = bad
		if p, err := c.Order(in); !errors.Is(err, wire.ErrTransport) {
			t.Errorf("the plugin answered %v: the host took %v, %v; want a bad reply", bad, p, err)
		}
	}
}
