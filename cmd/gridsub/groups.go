package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gridsub/gridsub/bridge"
)

// groupCounts says where a group's elements stand: "37 of 100 ended (35
// completed, 2 failed), 10 unfinished, 53 not made yet".
func groupCounts(g *bridge.Group) string {
	ended := 0
	var parts []string
	for _, st := range []bridge.JobState{bridge.Completed, bridge.Failed, bridge.Timeout, bridge.Cancelled, bridge.Rejected} {
		if n := g.Counts[st]; n > 0 {
			ended += n
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	s := fmt.Sprintf("%d of %d ended", ended, g.Total)
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	s += fmt.Sprintf(", %d unfinished", g.Made-ended)
	if g.Made < g.Total {
		s += fmt.Sprintf(", %d not made yet", g.Total-g.Made)
	}
	if g.Limit > 0 {
		s += fmt.Sprintf("; at most %d at once", g.Limit)
	}
	return s
}

// groupLine is the progress line of a group's parent.
func groupLine(j *bridge.Job, now time.Time) string {
	if j.State == bridge.Held {
		return fmt.Sprintf("[%s] held: %s", rel(now, j.Submit), j.Waiting)
	}
	return fmt.Sprintf("[%s] %s %s: %s", rel(now, j.Submit), j.Group.Kind, j.State, groupCounts(j.Group))
}

// groupText is what status prints of a group below its summary: the
// counts, then its elements (every step of a pipeline; the unfinished and
// failed elements of an array or sweep, at most maxShown).
func groupText(j *bridge.Job, els []*bridge.Job) string {
	const maxShown = 20
	var sb strings.Builder
	fmt.Fprintf(&sb, "  %-10s %s %s\n", "elements", j.Group.Kind, groupCounts(j.Group))
	tw := tabwriter.NewWriter(&sb, 0, 4, 2, ' ', 0)
	shown := 0
	for _, e := range els {
		if j.Group.Kind != bridge.KindPipeline && e.State == bridge.Completed {
			continue
		}
		if shown == maxShown {
			fmt.Fprintf(tw, "    ...\t(%s)\n", "gridsub list --parent "+j.ID+" shows all")
			break
		}
		shown++
		what := e.Reason
		if e.State == bridge.Held {
			what = e.Waiting
		}
		sites := e.Sites()
		if sites == "" {
			sites = "-"
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\n", e.ID, e.Req.Name, e.State, sites, oneLine(what))
	}
	tw.Flush()
	return sb.String()
}

// foldGroups drops from a listing the elements whose parent is listed too
// (the parent's row summarises them), unless all is set.
func foldGroups(js []*bridge.Job, all bool) []*bridge.Job {
	if all {
		return js
	}
	parents := map[string]bool{}
	for _, j := range js {
		if j.Group != nil {
			parents[j.ID] = true
		}
	}
	if len(parents) == 0 {
		return js
	}
	out := js[:0:0]
	for _, j := range js {
		if j.Parent == "" || !parents[j.Parent] {
			out = append(out, j)
		}
	}
	return out
}

// groupJSON is a group parent's state in --output json.
type groupJSON struct {
	Kind   string         `json:"kind"`  // array, sweep or pipeline
	Total  int            `json:"total"` // elements in all
	Made   int            `json:"made"`  // elements made so far
	Limit  int            `json:"limit"` // at most this many unfinished at once; 0 = no limit
	Counts map[string]int `json:"ended"` // ended elements by final state
}

func toGroupJSON(g *bridge.Group) *groupJSON {
	if g == nil {
		return nil
	}
	out := &groupJSON{Kind: g.Kind, Total: g.Total, Made: g.Made, Limit: g.Limit, Counts: map[string]int{}}
	for st, n := range g.Counts {
		out.Counts[string(st)] = n
	}
	return out
}
