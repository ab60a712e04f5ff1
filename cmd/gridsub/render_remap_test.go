package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
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
