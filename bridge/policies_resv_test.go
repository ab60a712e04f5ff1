package bridge_test

import (
	"context"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/policy/coalloc"
	"github.com/gridsub/gridsub/policy/registry"
	"github.com/gridsub/gridsub/simbackend"
)

// Under SRRM (broker.admission: srrm) a reservation is booked at
// admission and still bound late: the native reservation appears when
// its window opens, at the site SRRM booked, and the job runs in it; a
// second one that no booked site can hold beside the first is refused at
// once, with the mechanism's reason.
func TestReservationUnderSRRM(t *testing.T) {
	ctx := context.Background()
	g := &simGrid{e: simbackend.NewEngine(epoch, 1), sites: map[string]*simbackend.Site{}, st: bridge.NewMemStore()}
	var cfgs []bridge.SiteConfig
	for _, n := range []string{"A", "B"} {
		s, err := simbackend.NewSite(g.e, simbackend.SiteConfig{Name: n, Nodes: map[string]int{"A": 8, "B": 4}[n]})
		if err != nil {
			t.Fatal(err)
		}
		g.sites[n] = s
		cfgs = append(cfgs, bridge.SiteConfig{Name: n, Backend: s, H: 1, Simulated: true})
	}
	pl, err := coalloc.ByName("greedy-easy")
	if err != nil {
		t.Fatal(err)
	}
	srrm, err := registry.Admission("srrm")
	if err != nil {
		t.Fatal(err)
	}
	g.b, err = bridge.New(bridge.Options{Sites: cfgs, Planner: pl, Store: g.st, MultiSite: 1, BindLead: 30 * time.Second,
		Policies: bridge.Policies{Admission: srrm}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := g.b.Submit(ctx, window(resvReq("r1", 6, 10*time.Minute), 15*time.Minute, 25*time.Minute), epoch)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != bridge.Reserved || j.Resv.State != bridge.ResvAdmitted {
		t.Fatalf("after submit: %s, %+v", j.State, j.Resv)
	}
	k, err := g.b.Submit(ctx, window(resvReq("r2", 6, 10*time.Minute), 15*time.Minute, 25*time.Minute), epoch)
	if err != nil {
		t.Fatal(err)
	}
	if k.State != bridge.Rejected || k.Resv.State != bridge.ResvFailed || k.Resv.Reason == "" {
		t.Fatalf("second reservation over the same nodes: %s, %+v", k.State, k.Resv)
	}
	g.run(t, epoch.Add(15*time.Minute), 10*time.Second)
	got, _ := g.b.Job(j.ID)
	if got.Resv.State != bridge.ResvBound || got.Resv.Site != "A" {
		logEvents(t, got)
		t.Fatalf("after the window opened: %+v; want bound at A", got.Resv)
	}
	g.run(t, epoch.Add(30*time.Minute), 10*time.Second)
	if got, _ = g.b.Job(j.ID); got.State != bridge.Completed {
		logEvents(t, got)
		t.Fatalf("state %s; want completed in its reservation", got.State)
	}
}
