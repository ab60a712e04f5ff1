package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/internal/config"
)

// status's summary shows a job's moves in the words of its events.
func TestStatusShowsMoves(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 14, 0, 0, 0, time.UTC)
	j := &bridge.Job{ID: "g000007", State: bridge.Dispatched, Submit: t0, Attempts: 2, Moves: 1,
		Comps: []bridge.Component{{Site: "siteB", Nodes: 1}}, Events: []bridge.Event{
			{Time: t0, Kind: "submitted", Msg: "1 node(s)"},
			{Time: t0.Add(time.Minute), Kind: bridge.EventMoved, Msg: "moved from siteA (predicted start 14:45 UTC) to siteB (start now): gain 44m (move 1 of 2)"},
		}}
	out := summaryText(j, false)
	if !strings.Contains(out, "moved      14:01:00 moved from siteA (predicted start 14:45 UTC) to siteB (start now): gain 44m (move 1 of 2)") {
		t.Fatalf("status does not show the move:\n%s", out)
	}
	j.Events = j.Events[:1]
	if strings.Contains(summaryText(j, false), "moved") {
		t.Fatal("a job never moved shows a move")
	}
}

// broker.remap reaches the broker's options only when enabled.
func TestRemapConfigReachesTheBroker(t *testing.T) {
	const base = "sites:\n  - {name: A, kind: sim, nodes: 4}\n  - {name: B, kind: sim, nodes: 2}\n"
	lookup := func(k string) (string, bool) {
		if k == "HOME" {
			return "/h", true
		}
		return "", false
	}
	for _, tc := range []struct {
		src  string
		want *bridge.RemapOptions
	}{
		{base, nil},
		{base + "broker: {remap: {enabled: true}}\n", &bridge.RemapOptions{}},
		{base + "broker: {remap: {enabled: true, min_gain: 20m, max_moves: 1, interval: 1m}}\n",
			&bridge.RemapOptions{MinGain: 20 * time.Minute, MaxMoves: 1, Interval: time.Minute}},
	} {
		cfg, err := config.Parse("t.yaml", []byte(tc.src), lookup)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := specFromConfig(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if (spec.Remap == nil) != (tc.want == nil) || (spec.Remap != nil && *spec.Remap != *tc.want) {
			t.Errorf("%q: spec.Remap = %+v, want %+v", tc.src, spec.Remap, tc.want)
		}
	}
}
