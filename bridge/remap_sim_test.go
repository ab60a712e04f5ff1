package bridge_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/simbackend"
)

// On the simulated testbed (its own EASY scheduler, virtual clock): a job
// queued at siteA behind a 2-hour job moves to siteB when siteB's
// 20-minute job ends, and completes there; siteA's copy was withdrawn
// before it ran.
func TestRemapOnSimulatedSites(t *testing.T) {
	ctx := context.Background()
	e := simbackend.NewEngine(epoch, 1)
	a, _ := simbackend.NewSite(e, simbackend.SiteConfig{Name: "siteA", Nodes: 2})
	b, _ := simbackend.NewSite(e, simbackend.SiteConfig{Name: "siteB", Nodes: 2})
	for _, f := range []struct {
		s   *simbackend.Site
		run time.Duration
	}{{a, 2 * time.Hour}, {b, 20 * time.Minute}} {
		if _, err := f.s.Submit(ctx, &backends.JobSpec{GridID: "foreign", Command: []string{"x"}, Nodes: 2, Walltime: f.run,
			Sim: backends.SimHints{Runtime: f.run}}); err != nil {
			t.Fatal(err)
		}
	}
	br, err := bridge.New(bridge.Options{Sites: []bridge.SiteConfig{{Name: "siteA", Backend: a, H: 1, Simulated: true},
		{Name: "siteB", Backend: b, H: 1, Simulated: true}}, Planner: onA{}, Remap: &bridge.RemapOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := br.Submit(ctx, bridge.Request{Name: "w", Command: []string{"x"}, Nodes: 2, Estimate: 30 * time.Minute}, e.Now())
	if err != nil {
		t.Fatal(err)
	}
	for e.Now().Before(epoch.Add(3 * time.Hour)) {
		if _, err := br.Cycle(ctx, e.Now()); err != nil {
			t.Fatal(err)
		}
		if got, _ := br.Job(j.ID); got.State.Final() {
			break
		}
		e.RunUntil(e.Now().Add(time.Minute))
	}
	got, _ := br.Job(j.ID)
	var moved string
	for _, ev := range got.Events {
		if ev.Kind == bridge.EventMoved {
			moved = ev.Msg
		}
	}
	if got.State != bridge.Completed || got.Sites() != "siteB:2" || got.Moves != 1 ||
		!strings.Contains(moved, "moved from siteA (predicted start 02:00 UTC) to siteB (start now)") {
		t.Fatalf("want completed at siteB after one move, got %s at %s, %d moves, moved %q", got.State, got.Sites(), got.Moves, moved)
	}
	if end := got.End.Sub(epoch); end > time.Hour {
		t.Fatalf("ended %s after the start: the move gained nothing", end)
	}
	sts, err := a.FindByGridID(ctx, bridge.RemoteTag(j.ID, 1))
	if err != nil || len(sts) != 1 || sts[0].State != backends.StateCancelled || !sts[0].Start.IsZero() {
		t.Fatalf("siteA's first attempt: %+v %v; want withdrawn before it ran", sts, err)
	}
}
