package main

import "github.com/gridsub/gridsub/bridge"

// moveRows are the job's moves and abandoned moves (bridge/remap.go) in
// the words of its events, oldest first, for status's summary.
func moveRows(j *bridge.Job) []string {
	var out []string
	for _, e := range j.Events {
		switch e.Kind {
		case bridge.EventMoved, bridge.EventMoveAbandoned:
			out = append(out, e.Time.UTC().Format("15:04:05")+" "+e.Msg)
		}
	}
	return out
}
