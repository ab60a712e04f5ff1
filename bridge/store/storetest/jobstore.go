package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/policy"
)

// T0 is the time the test jobs are stamped with.
var T0 = time.Date(2026, 11, 22, 3, 0, 0, 123456789, time.UTC)

// FullJob has every field set, so a store that drops one fails the
// round-trip test.
func FullJob(id string) *bridge.Job {
	return &bridge.Job{
		ID: id,
		Req: bridge.Request{
			Name: "sim-" + id, Command: []string{"./run", "--x=1", "$(rm -rf ~)"}, Script: "#!/bin/sh\necho hi\n",
			Env: map[string]string{"A": "1", "B": "two"}, WorkDir: "/scratch/w", Nodes: 48, CoresPerNode: 4,
			Estimate: 90 * time.Minute,
			Inputs:   []backends.StageFile{{Local: "/home/u/in.dat", Remote: "in.dat", Mode: 0o600}},
			Outputs:  []string{"out.dat", "log.txt"}, Origin: "Beijing", DataSize: 1 << 30,
			Sites: []string{"Beijing", "Shanghai"}, Prefer: []string{"Shanghai"}, NoSplit: true,
			Deadline: T0.Add(48 * time.Hour), QoS: "gold",
			Sim:       backends.SimHints{Runtime: time.Hour, ExitCode: 3},
			OutputDir: "/home/u/out",
		},
		State: bridge.Running, Submit: T0, Start: T0.Add(time.Minute), End: time.Time{}, Attempts: 2,
		Comps: []bridge.Component{
			{Site: "Beijing", Nodes: 32, RemoteID: "1234", State: backends.StateRunning, ExitCode: 0, Reason: "", Start: T0.Add(time.Minute)},
			{Site: "Shanghai", Nodes: 16, RemoteID: "77.pbs", State: backends.StateRunning, Reason: "x", Start: T0.Add(time.Minute), Replica: true},
		},
		Predicted: policy.Option{Parts: []policy.Part{{Site: 0, Nodes: 32}, {Site: 1, Nodes: 16}},
			Start: T0.Add(time.Minute), Runtime: time.Hour, Transfer: 2 * time.Second, Immediate: true},
		Beaten:      []policy.Option{{Parts: []policy.Part{{Site: 1, Nodes: 48}}, Start: T0.Add(time.Hour), Runtime: 50 * time.Minute}},
		SiteNames:   []string{"Beijing", "Shanghai"},
		Reason:      "none yet",
		ExitCode:    -1,
		Outputs:     []string{"/home/u/out/out.dat"},
		FetchErrors: []string{"log.txt: no such file"},
		Events: []bridge.Event{
			{Time: T0, Kind: "submitted", Msg: "48 node(s)"},
			{Time: T0.Add(time.Second), Kind: "dispatched", Site: "Beijing", Msg: "Beijing:32+Shanghai:16"},
		},
	}
}

// Job is a small job in state st with one component per site.
func Job(id, name string, st bridge.JobState, sites ...string) *bridge.Job {
	j := &bridge.Job{ID: id, Req: bridge.Request{Name: name, Nodes: 1, Command: []string{"true"}, Estimate: time.Minute},
		State: st, Submit: T0, ExitCode: -1,
		Events: []bridge.Event{{Time: T0, Kind: "submitted", Msg: id}}}
	for _, s := range sites {
		j.Comps = append(j.Comps, bridge.Component{Site: s, Nodes: 1})
	}
	return j
}

// IDs are the jobs' ids in order.
func IDs(js []*bridge.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

// MustPut puts j or fails t.
func MustPut(t *testing.T, s bridge.Store, j *bridge.Job) {
	t.Helper()
	if err := s.Put(context.Background(), j); err != nil {
		t.Fatalf("Put %s: %v", j.ID, err)
	}
}

// MustList lists or fails t.
func MustList(t *testing.T, s bridge.Store, f bridge.Filter) []*bridge.Job {
	t.Helper()
	js, err := s.List(context.Background(), f)
	if err != nil {
		t.Fatalf("List %+v: %v", f, err)
	}
	return js
}

// JobStore runs the bridge.Store contract against the stores newStore
// makes (a fresh, empty one per call).
func JobStore(t *testing.T, newStore func(*testing.T) bridge.Store) {
	ctx := context.Background()

	t.Run("round trip keeps every field", func(t *testing.T) {
		s := newStore(t)
		want := FullJob("g000001")
		MustPut(t, s, want)
		got, err := s.Get(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Get returned\n%+v\nwant\n%+v", got, want)
		}
		js := MustList(t, s, bridge.Filter{Events: true})
		if len(js) != 1 || !reflect.DeepEqual(js[0], want) {
			t.Fatalf("List(Events) returned %+v, want [%+v]", js, want)
		}
	})

	t.Run("unknown id wraps ErrNotFound", func(t *testing.T) {
		s := newStore(t)
		MustPut(t, s, Job("a", "n", bridge.Queued))
		_, err := s.Get(ctx, "nope")
		if !errors.Is(err, bridge.ErrNotFound) {
			t.Fatalf("Get(nope) = %v, want an error wrapping bridge.ErrNotFound", err)
		}
	})

	t.Run("copies in and out", func(t *testing.T) {
		s := newStore(t)
		j := FullJob("c1")
		MustPut(t, s, j)
		// The caller keeps changing its job after Put.
		j.State = bridge.Failed
		j.Comps[0].Site = "Elsewhere"
		j.Events[0].Msg = "changed"
		j.Outputs[0] = "changed"
		got, err := s.Get(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if got.State != bridge.Running || got.Comps[0].Site != "Beijing" || got.Events[0].Msg != "48 node(s)" || got.Outputs[0] != "/home/u/out/out.dat" {
			t.Fatalf("a change after Put leaked into the store: %+v", got)
		}
		// And changes to what Get returned do not leak back.
		got.State = bridge.Cancelled
		got.Comps[1].Nodes = 1
		got.Events = append(got.Events[:0], bridge.Event{Kind: "x"})
		again, _ := s.Get(ctx, "c1")
		if again.State != bridge.Running || again.Comps[1].Nodes != 16 || again.Events[0].Kind != "submitted" {
			t.Fatalf("a change to Get's result leaked into the store: %+v", again)
		}
	})

	t.Run("submission order is first Put", func(t *testing.T) {
		s := newStore(t)
		for _, id := range []string{"g3", "g1", "g2", "g10"} {
			MustPut(t, s, Job(id, "n", bridge.Queued))
		}
		MustPut(t, s, Job("g1", "n", bridge.Running, "A")) // an update keeps the place
		if got := IDs(MustList(t, s, bridge.Filter{})); !slices.Equal(got, []string{"g3", "g1", "g2", "g10"}) {
			t.Fatalf("List order %v, want submission order [g3 g1 g2 g10]", got)
		}
	})

	t.Run("parent", func(t *testing.T) {
		s := newStore(t)
		el := func(id, parent string, st bridge.JobState) *bridge.Job {
			j := Job(id, "e", st)
			j.Parent = parent
			return j
		}
		MustPut(t, s, Job("p1", "p", bridge.Running))
		MustPut(t, s, el("p1_1", "p1", bridge.Completed))
		MustPut(t, s, el("p10_1", "p10", bridge.Queued)) // an id the range must not take
		MustPut(t, s, el("p1_2", "p1", bridge.Queued))
		MustPut(t, s, el("p1_3", "", bridge.Queued)) // named like an element, but none
		for _, c := range []struct {
			f    bridge.Filter
			want []string
		}{
			{bridge.Filter{Parent: "p1"}, []string{"p1_1", "p1_2"}},
			{bridge.Filter{Parent: "p1", States: []bridge.JobState{bridge.Queued}}, []string{"p1_2"}},
			{bridge.Filter{Parent: "p10"}, []string{"p10_1"}},
			{bridge.Filter{Parent: "p"}, nil},
		} {
			if got := IDs(MustList(t, s, c.f)); !slices.Equal(got, c.want) {
				t.Errorf("List(%+v) = %v, want %v", c.f, got, c.want)
			}
		}
	})

	t.Run("filters", func(t *testing.T) {
		s := newStore(t)
		MustPut(t, s, Job("j1", "alpha", bridge.Queued))
		MustPut(t, s, Job("j2", "beta", bridge.Running, "A"))
		MustPut(t, s, Job("j3", "alpha", bridge.Running, "A", "B"))
		MustPut(t, s, Job("j4", "alpha", bridge.Completed, "B"))
		MustPut(t, s, Job("j5", "gamma", bridge.Failed, "C"))
		for _, c := range []struct {
			f    bridge.Filter
			want []string
		}{
			{bridge.Filter{}, []string{"j1", "j2", "j3", "j4", "j5"}},
			{bridge.Filter{States: []bridge.JobState{bridge.Running}}, []string{"j2", "j3"}},
			{bridge.Filter{States: []bridge.JobState{bridge.Failed, bridge.Queued}}, []string{"j1", "j5"}},
			{bridge.Filter{Name: "alpha"}, []string{"j1", "j3", "j4"}},
			{bridge.Filter{Site: "B"}, []string{"j3", "j4"}},
			{bridge.Filter{Site: "A", Name: "alpha"}, []string{"j3"}},
			{bridge.Filter{Site: "B", States: []bridge.JobState{bridge.Running, bridge.Completed}, Name: "alpha"}, []string{"j3", "j4"}},
			{bridge.Filter{Site: "nowhere"}, nil},
			{bridge.Filter{Name: "alpha", Limit: 2}, []string{"j1", "j3"}},
			{bridge.Filter{Name: "alpha", After: "j1"}, []string{"j3", "j4"}},
			{bridge.Filter{After: "j4"}, []string{"j5"}},
			{bridge.Filter{After: "j5"}, nil},
		} {
			js := MustList(t, s, c.f)
			if got := IDs(js); !slices.Equal(got, c.want) {
				t.Errorf("List(%+v) = %v, want %v", c.f, got, c.want)
			}
			for _, j := range js {
				if !c.f.Match(j) {
					t.Errorf("List(%+v) returned %s that the filter does not match", c.f, j.ID)
				}
				if j.Events != nil {
					t.Errorf("List without Events returned events for %s: %v", j.ID, j.Events)
				}
			}
		}
	})

	t.Run("updates move jobs between filters", func(t *testing.T) {
		s := newStore(t)
		j := Job("u1", "n", bridge.Queued)
		MustPut(t, s, j)
		j.State, j.Comps = bridge.Running, []bridge.Component{{Site: "A", Nodes: 1}}
		MustPut(t, s, j)
		if got := IDs(MustList(t, s, bridge.Filter{States: []bridge.JobState{bridge.Queued}})); len(got) != 0 {
			t.Fatalf("a job that moved to running is still listed as queued: %v", got)
		}
		if got := IDs(MustList(t, s, bridge.Filter{Site: "A", States: []bridge.JobState{bridge.Running}})); !slices.Equal(got, []string{"u1"}) {
			t.Fatalf("running at A = %v, want [u1]", got)
		}
		j.Comps = []bridge.Component{{Site: "B", Nodes: 1}} // re-dispatched elsewhere
		MustPut(t, s, j)
		if got := IDs(MustList(t, s, bridge.Filter{Site: "A"})); len(got) != 0 {
			t.Fatalf("site A still lists the job that moved to B: %v", got)
		}
		if got := IDs(MustList(t, s, bridge.Filter{Site: "B"})); !slices.Equal(got, []string{"u1"}) {
			t.Fatalf("site B = %v, want [u1]", got)
		}
	})

	t.Run("paging walks every job once", func(t *testing.T) {
		s := newStore(t)
		var want []string
		for i := range 53 {
			id := fmt.Sprintf("p%03d", 100-i) // ids sort against submission order
			want = append(want, id)
			st := bridge.Queued
			if i%3 == 0 {
				st = bridge.Running
			}
			MustPut(t, s, Job(id, "n", st))
		}
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > 20 {
				t.Fatal("paging does not end")
			}
			js := MustList(t, s, bridge.Filter{After: after, Limit: 10})
			if len(js) == 0 {
				break
			}
			if len(js) > 10 {
				t.Fatalf("page of %d jobs with Limit 10", len(js))
			}
			got = append(got, IDs(js)...)
			after = js[len(js)-1].ID
		}
		if !slices.Equal(got, want) {
			t.Fatalf("pages gave %v, want %v", got, want)
		}
		// Paging a filtered list.
		var run []string
		after = ""
		for {
			js := MustList(t, s, bridge.Filter{States: []bridge.JobState{bridge.Running}, After: after, Limit: 4})
			if len(js) == 0 {
				break
			}
			run = append(run, IDs(js)...)
			after = js[len(js)-1].ID
		}
		if len(run) != 18 {
			t.Fatalf("paging running jobs gave %d (%v), want 18", len(run), run)
		}
	})

	t.Run("events append", func(t *testing.T) {
		s := newStore(t)
		j := Job("e1", "n", bridge.Queued)
		MustPut(t, s, j)
		for i := range 5 {
			j.Events = append(j.Events, bridge.Event{Time: T0.Add(time.Duration(i+1) * time.Second), Kind: fmt.Sprintf("k%d", i), Site: "A", Msg: "m"})
			if i%2 == 0 {
				MustPut(t, s, j)
			}
		}
		MustPut(t, s, j)
		MustPut(t, s, j) // a Put with no new event adds none
		got, err := s.Get(ctx, "e1")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Events, j.Events) {
			t.Fatalf("events %v, want %v", got.Events, j.Events)
		}
		js := MustList(t, s, bridge.Filter{Events: true})
		if len(js) != 1 || !reflect.DeepEqual(js[0].Events, j.Events) {
			t.Fatalf("List(Events) events %v, want %v", js[0].Events, j.Events)
		}
	})

	t.Run("NextID is fresh", func(t *testing.T) {
		s := newStore(t)
		var mu sync.Mutex
		seen := map[uint64]bool{}
		var last uint64
		for range 250 {
			n, err := s.NextID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n <= last {
				t.Fatalf("NextID %d after %d: not increasing", n, last)
			}
			last = n
			seen[n] = true
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				for range 100 {
					n, err := s.NextID(ctx)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					if seen[n] {
						errs <- fmt.Errorf("NextID handed out %d twice", n)
					}
					seen[n] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if len(seen) != 1050 {
			t.Fatalf("%d distinct ids, want 1050", len(seen))
		}
	})
}
