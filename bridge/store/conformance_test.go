package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
	"github.com/gridsub/gridsub/bridge/store/storetest"
	"github.com/gridsub/gridsub/policy"
)

// The bridge.Store contract, run against every implementation.
func TestConformanceMemStore(t *testing.T) {
	storetest.JobStore(t, func(t *testing.T) bridge.Store { return bridge.NewMemStore() })
}

// TestConformanceSQLite is the store.Store suite; pgstore runs the same
// against PostgreSQL.
func TestConformanceSQLite(t *testing.T) {
	storetest.Durable(t, func(t *testing.T) store.Store { return openTemp(t) })
}

func openTemp(t testing.TB) *store.SQLite {
	t.Helper()
	s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "gridsub.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

var t0 = time.Date(2026, 11, 22, 3, 0, 0, 123456789, time.UTC)

// fullJob has every field set, so a store that drops one fails the
// round-trip test.
func fullJob(id string) *bridge.Job {
	return &bridge.Job{
		ID: id,
		Req: bridge.Request{
			Name: "sim-" + id, Command: []string{"./run", "--x=1", "$(rm -rf ~)"}, Script: "#!/bin/sh\necho hi\n",
			Env: map[string]string{"A": "1", "B": "two"}, WorkDir: "/scratch/w", Nodes: 48, CoresPerNode: 4,
			Estimate: 90 * time.Minute,
			Inputs:   []backends.StageFile{{Local: "/home/u/in.dat", Remote: "in.dat", Mode: 0o600}},
			Outputs:  []string{"out.dat", "log.txt"}, Origin: "Beijing", DataSize: 1 << 30,
			Sites: []string{"Beijing", "Shanghai"}, Prefer: []string{"Shanghai"}, NoSplit: true,
			Deadline: t0.Add(48 * time.Hour), QoS: "gold",
			Sim:       backends.SimHints{Runtime: time.Hour, ExitCode: 3},
			OutputDir: "/home/u/out",
		},
		State: bridge.Running, Submit: t0, Start: t0.Add(time.Minute), End: time.Time{}, Attempts: 2,
		Comps: []bridge.Component{
			{Site: "Beijing", Nodes: 32, RemoteID: "1234", State: backends.StateRunning, ExitCode: 0, Reason: "", Start: t0.Add(time.Minute)},
			{Site: "Shanghai", Nodes: 16, RemoteID: "77.pbs", State: backends.StateRunning, Reason: "x", Start: t0.Add(time.Minute), Replica: true},
		},
		Predicted: policy.Option{Parts: []policy.Part{{Site: 0, Nodes: 32}, {Site: 1, Nodes: 16}},
			Start: t0.Add(time.Minute), Runtime: time.Hour, Transfer: 2 * time.Second, Immediate: true},
		Beaten:      []policy.Option{{Parts: []policy.Part{{Site: 1, Nodes: 48}}, Start: t0.Add(time.Hour), Runtime: 50 * time.Minute}},
		SiteNames:   []string{"Beijing", "Shanghai"},
		Reason:      "none yet",
		ExitCode:    -1,
		Outputs:     []string{"/home/u/out/out.dat"},
		FetchErrors: []string{"log.txt: no such file"},
		Events: []bridge.Event{
			{Time: t0, Kind: "submitted", Msg: "48 node(s)"},
			{Time: t0.Add(time.Second), Kind: "dispatched", Site: "Beijing", Msg: "Beijing:32+Shanghai:16"},
		},
	}
}

func job(id, name string, st bridge.JobState, sites ...string) *bridge.Job {
	j := &bridge.Job{ID: id, Req: bridge.Request{Name: name, Nodes: 1, Command: []string{"true"}, Estimate: time.Minute},
		State: st, Submit: t0, ExitCode: -1,
		Events: []bridge.Event{{Time: t0, Kind: "submitted", Msg: id}}}
	for _, s := range sites {
		j.Comps = append(j.Comps, bridge.Component{Site: s, Nodes: 1})
	}
	return j
}

func ids(js []*bridge.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

func mustPut(t *testing.T, s bridge.Store, j *bridge.Job) {
	t.Helper()
	if err := s.Put(context.Background(), j); err != nil {
		t.Fatalf("Put %s: %v", j.ID, err)
	}
}

func mustList(t *testing.T, s bridge.Store, f bridge.Filter) []*bridge.Job {
	t.Helper()
	js, err := s.List(context.Background(), f)
	if err != nil {
		t.Fatalf("List %+v: %v", f, err)
	}
	return js
}
