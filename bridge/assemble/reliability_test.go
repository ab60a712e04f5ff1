package assemble

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/simbackend"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func simSpec(st bridge.Store, at time.Time) Spec {
	return Spec{Store: st, Epoch: at, Sites: []SiteSpec{
		{Name: "A", Kind: "sim", Nodes: 4, CoresPerNode: 1, H: 1},
		{Name: "B", Kind: "sim", Nodes: 4, CoresPerNode: 1, H: 1}}}
}

func cycle(t *testing.T, e *Env, at time.Time) {
	t.Helper()
	e.Engine.RunUntil(at)
	if _, err := e.Broker.Cycle(context.Background(), e.Now()); err != nil {
		t.Fatal(err)
	}
}

// TestReliabilityLearnedAndRestored: the model of an assembled broker runs
// on the simulated clock, learns a site failure the broker sees (its status
// calls fail, then it answers again), is saved to the store, and a broker
// assembled again on the same store shows the same learned state.
func TestReliabilityLearnedAndRestored(t *testing.T) {
	ctx := context.Background()
	st := bridge.NewMemStore()
	e, err := Build(ctx, simSpec(st, epoch), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range e.SitesReliability() {
		if !r.Up || r.States != 0 || r.R != 1 || !r.Since.Equal(epoch) {
			t.Fatalf("fresh model: %+v, want every site up since the epoch, nothing learned, r=1", r)
		}
	}
	j, err := e.Broker.Submit(ctx, bridge.Request{Name: "long", Command: []string{"true"}, Nodes: 1, CoresPerNode: 1,
		Estimate: 3 * time.Hour, Sim: backends.SimHints{Runtime: 2 * time.Hour}}, e.Now())
	if err != nil {
		t.Fatal(err)
	}
	cycle(t, e, epoch.Add(time.Second))
	got, _ := e.Broker.Job(j.ID)
	site := got.Comps[0].Site
	be, _ := e.Broker.Site(site)
	e.Engine.At(epoch.Add(40*time.Minute), func() { be.(*simbackend.Site).Fail("power cut") })
	cycle(t, e, epoch.Add(41*time.Minute)) // the status call fails: down
	be.(*simbackend.Site).Repair()
	cycle(t, e, epoch.Add(42*time.Minute)) // answers again: up
	var r SiteReliability
	for _, x := range e.SitesReliability() {
		if x.Site == site {
			r = x
		}
	}
	if !r.Up || r.States != 1 || r.Failures != 1 || r.MTTF != 41*time.Minute || !r.Since.Equal(epoch.Add(42*time.Minute)) {
		t.Fatalf("after one outage: %+v, want up since +42m, one failure after 41m", r)
	}
	if r.R != 0 { // up 0 min of a 41 min uptime seen: 1 h does not fit
		t.Errorf("r(1h) = %v, want 0", r.R)
	}
	if err := e.SaveReliability(ctx); err != nil {
		t.Fatal(err)
	}
	before := e.SitesReliability()
	e.Close()

	e2, err := Build(ctx, simSpec(st, epoch.Add(42*time.Minute)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	after := e2.SitesReliability()
	if len(after) != len(before) {
		t.Fatalf("restored %d sites, had %d", len(after), len(before))
	}
	for i := range before {
		if after[i] != before[i] {
			t.Errorf("restored %+v, had %+v", after[i], before[i])
		}
	}
}

// TestReliabilityRejectsBadState: a stored model that fails validation is
// not used (the broker starts with an empty one) and is kept aside, not
// overwritten.
func TestReliabilityRejectsBadState(t *testing.T) {
	ctx := context.Background()
	for _, bad := range []string{`{"version":1,"threshold_ns":1,"max_states":4,"sites":{"A":{"ttf_ns":[-5],"visits":[1],"trans":[[0]],"current":0}}}`,
		`not json`, strings.Repeat(" ", maxReliabilityState+1)} {
		st := bridge.NewMemStore()
		if err := st.SetValue(ctx, ReliabilityKey, []byte(bad)); err != nil {
			t.Fatal(err)
		}
		e, err := Build(ctx, simSpec(st, epoch), Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range e.SitesReliability() {
			if r.States != 0 || r.Failures != 0 || !r.Up {
				t.Errorf("site %+v from a rejected state", r)
			}
		}
		kept, ok, _ := st.Value(ctx, ReliabilityKey+".rejected")
		if !ok || string(kept) != bad {
			t.Errorf("the rejected state was not kept aside (ok=%v, %d bytes)", ok, len(kept))
		}
		if err := e.SaveReliability(ctx); err != nil {
			t.Fatal(err)
		}
		if v, _, _ := st.Value(ctx, ReliabilityKey); string(v) == bad {
			t.Error("the fresh model was not saved over the rejected one")
		}
		e.Close()
	}
}
