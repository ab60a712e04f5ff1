package bridge_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/policy/coalloc"
	"github.com/gridsub/gridsub/simbackend"
)

// Options.Drop receives each job once, when it ended, and the broker then
// forgets it; the jobs still running are untouched.
func TestDropForgetsEndedJobs(t *testing.T) {
	ctx := context.Background()
	e := simbackend.NewEngine(epoch, 1)
	s, _ := simbackend.NewSite(e, simbackend.SiteConfig{Name: "A", Nodes: 4})
	pl, _ := coalloc.ByName("greedy-easy")
	dropped := map[string]bridge.JobState{}
	b, err := bridge.New(bridge.Options{Sites: []bridge.SiteConfig{{Name: "A", Backend: s, Simulated: true}}, Planner: pl,
		NoHistory: true, Store: &bridge.DiscardStore{}, Drop: func(j *bridge.Job) {
			if _, twice := dropped[j.ID]; twice {
				t.Errorf("%s dropped twice", j.ID)
			}
			dropped[j.ID] = j.State
		}})
	if err != nil {
		t.Fatal(err)
	}
	short, _ := b.Submit(ctx, resvReq("short", 1, time.Minute), epoch)
	long, _ := b.Submit(ctx, resvReq("long", 1, time.Hour), epoch)
	wide, _ := b.Submit(ctx, resvReq("wide", 9, time.Minute), epoch) // rejected: no site has 9 nodes
	for now := epoch; !now.After(epoch.Add(5 * time.Minute)); now = now.Add(10 * time.Second) {
		e.RunUntil(now)
		if _, err := b.Cycle(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	if dropped[short.ID] != bridge.Completed || dropped[wide.ID] != bridge.Rejected || len(dropped) != 2 {
		t.Fatalf("dropped %v; want %s completed and %s rejected only", dropped, short.ID, wide.ID)
	}
	if _, err := b.Job(short.ID); !errors.Is(err, bridge.ErrNotFound) {
		t.Fatalf("a dropped job is still known: %v", err)
	}
	if j, err := b.Job(long.ID); err != nil || j.State != bridge.Running {
		t.Fatalf("the running job: %+v %v", j, err)
	}
}
