package main

import (
	"fmt"

	"github.com/gridsub/gridsub/bridge"
)

// warnDeadline tells the user at once that a job was accepted although no
// site can meet its deadline (scheduling.deadline_policy: best-effort).
func warnDeadline(g *globals, j *bridge.Job) {
	for _, e := range j.Events {
		if e.Kind == bridge.EventDeadlineMissed {
			fmt.Fprintf(g.stderr, "gridsub: warning: job %s: %s\n", j.ID, e.Msg)
		}
	}
}
