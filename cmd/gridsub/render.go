package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/policy"
)

// jobJSON is the stable JSON shape of a job for scripts.
type jobJSON struct {
	ID       string     `json:"id"`
	Name     string     `json:"name"`
	State    string     `json:"state"`
	Sites    []partJSON `json:"sites"`
	Submit   time.Time  `json:"submit"`
	Start    *time.Time `json:"start,omitempty"`
	End      *time.Time `json:"end,omitempty"`
	WaitSec  *float64   `json:"wait_seconds,omitempty"`
	RunSec   *float64   `json:"run_seconds,omitempty"`
	ExitCode *int       `json:"exit_code,omitempty"`
	Reason   string     `json:"reason,omitempty"`
	Attempts int        `json:"attempts"`
	QoS      string     `json:"qos,omitempty"`
	Deadline *time.Time `json:"deadline,omitempty"`
	// DeadlineMet: the job completed by its deadline (set once it ended).
	DeadlineMet *bool          `json:"deadline_met,omitempty"`
	Tier        string         `json:"tier,omitempty"`     // the dependability tier (SPEC.md §5)
	TierWhy     string         `json:"tier_why,omitempty"` // why the job got it
	Withdrawn   []partJSON     `json:"copies_withdrawn,omitempty"`
	Predicted   *optionJSON    `json:"predicted,omitempty"`
	Beaten      []optionJSON   `json:"alternatives_beaten,omitempty"`
	Outputs     []string       `json:"outputs,omitempty"`
	NotFetched  []string       `json:"fetch_errors,omitempty"`
	Resv        *resvJSON      `json:"reservation,omitempty"`
	Parent      string         `json:"parent,omitempty"` // the array, sweep or pipeline this job is an element of
	Index       *int           `json:"index,omitempty"`  // its index there
	Group       *groupJSON     `json:"group,omitempty"`  // a parent: its elements' counts
	Waiting     string         `json:"waiting,omitempty"`
	Events      []bridge.Event `json:"events,omitempty"`
}

// resvJSON is a job's advance reservation (SPEC.md §2).
type resvJSON struct {
	State     string     `json:"state"`
	Earliest  time.Time  `json:"earliest_start"`
	Latest    time.Time  `json:"latest_end"`
	Site      string     `json:"site,omitempty"`
	Start     *time.Time `json:"start,omitempty"`
	Native    string     `json:"native_id,omitempty"`
	Preempted []string   `json:"preempted,omitempty"`
	CostSec   float64    `json:"preemption_cost_seconds,omitempty"`
	Reason    string     `json:"reason,omitempty"`
}

type partJSON struct {
	Site     string `json:"site"`
	Nodes    int    `json:"nodes"`
	RemoteID string `json:"remote_id,omitempty"`
	State    string `json:"state,omitempty"`
}

type optionJSON struct {
	Parts       []partJSON `json:"parts"`
	Start       time.Time  `json:"start"`
	End         time.Time  `json:"end"`
	RuntimeSec  float64    `json:"runtime_seconds"`
	TransferSec float64    `json:"transfer_seconds"`
	Immediate   bool       `json:"immediate"`
}

func optJSON(names []string, o policy.Option) optionJSON {
	oj := optionJSON{Start: o.Start, End: o.End(), RuntimeSec: o.Runtime.Seconds(), TransferSec: o.Transfer.Seconds(), Immediate: o.Immediate}
	for _, p := range o.Parts {
		name := fmt.Sprint(p.Site)
		if p.Site < len(names) {
			name = names[p.Site]
		}
		oj.Parts = append(oj.Parts, partJSON{Site: name, Nodes: p.Nodes})
	}
	return oj
}

func toJSON(j *bridge.Job, events bool) jobJSON {
	out := jobJSON{ID: j.ID, Name: j.Req.Name, State: string(j.State), Submit: j.Submit, Reason: j.Reason,
		Attempts: j.Attempts, Outputs: j.Outputs, NotFetched: j.FetchErrors, Sites: []partJSON{},
		Parent: j.Parent, Group: toGroupJSON(j.Group), Waiting: j.Waiting}
	if j.Parent != "" {
		i := j.Index
		out.Index = &i
	}
	for _, c := range j.Comps {
		out.Sites = append(out.Sites, partJSON{Site: c.Site, Nodes: c.Nodes, RemoteID: string(c.RemoteID), State: c.State.String()})
	}
	out.Tier, out.TierWhy = j.Tier, j.TierWhy
	for _, c := range j.Withdrawn {
		out.Withdrawn = append(out.Withdrawn, partJSON{Site: c.Site, Nodes: c.Nodes, RemoteID: string(c.RemoteID), State: c.State.String()})
	}
	if !j.Start.IsZero() {
		s := j.Start
		w := s.Sub(j.Submit).Seconds()
		out.Start, out.WaitSec = &s, &w
	}
	if !j.End.IsZero() {
		e := j.End
		out.End = &e
		if !j.Start.IsZero() {
			r := e.Sub(j.Start).Seconds()
			out.RunSec = &r
		}
	}
	if j.State == bridge.Completed || j.State == bridge.Failed {
		x := j.ExitCode
		out.ExitCode = &x
	}
	out.QoS = j.Req.QoS
	if d := j.Req.Deadline; !d.IsZero() {
		out.Deadline = &d
		if j.State.Final() {
			met := j.State == bridge.Completed && !j.End.After(d)
			out.DeadlineMet = &met
		}
	}
	if j.Predicted.Parts != nil {
		p := optJSON(j.SiteNames, j.Predicted)
		out.Predicted = &p
	}
	for _, b := range j.Beaten {
		out.Beaten = append(out.Beaten, optJSON(j.SiteNames, b))
	}
	if r := j.Resv; r != nil {
		rj := &resvJSON{State: string(r.State), Earliest: r.Earliest, Latest: r.Latest, Site: r.Site, Native: string(r.Native),
			Preempted: r.Preempted, CostSec: r.Cost, Reason: r.Reason}
		if !r.Start.IsZero() {
			st := r.Start
			rj.Start = &st
		}
		out.Resv = rj
	}
	if events {
		out.Events = j.Events
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// rel formats t relative to base ("+1m30s").
func rel(t, base time.Time) string {
	d := t.Sub(base).Round(time.Second)
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}

// placementText explains where the job goes and why.
func placementText(j *bridge.Job, now time.Time) string {
	var sb strings.Builder
	o := j.Predicted
	where := bridge.PartsString(j.SiteNames, o.Parts)
	kind := "single site"
	if len(o.Parts) > 1 {
		kind = fmt.Sprintf("co-allocated across %d sites", len(o.Parts))
	}
	fmt.Fprintf(&sb, "placement: %s (%s)\n", where, kind)
	fmt.Fprintf(&sb, "  predicted start %s, end %s (run %s", rel(o.Start, now), rel(o.End(), now), o.Runtime.Round(time.Second))
	if o.Transfer > 0 {
		fmt.Fprintf(&sb, " + transfer %s", roundDur(o.Transfer))
	}
	sb.WriteString(")\n")
	if len(j.Beaten) == 0 {
		sb.WriteString("  no other placement was possible\n")
		return sb.String()
	}
	sb.WriteString("  chosen for the earliest predicted completion; it beat:\n")
	for _, b := range j.Beaten {
		how := "start reserved later"
		if b.Immediate {
			how = "could start now"
		}
		diff := b.End().Sub(o.End())
		later := fmt.Sprintf("%s later", roundDur(diff))
		if diff <= 0 {
			later = "same end; ties go to the site listed first"
		}
		fmt.Fprintf(&sb, "    %-28s end %s (%s; %s)\n", bridge.PartsString(j.SiteNames, b.Parts), rel(b.End(), now), how, later)
	}
	return sb.String()
}

// roundDur rounds a predicted duration for people: to the millisecond
// below a minute (sub-second differences stay visible), to the second above.
func roundDur(d time.Duration) time.Duration {
	if d >= time.Minute || d <= -time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// progressLine is one line of live progress.
func progressLine(j *bridge.Job, now time.Time) string {
	if j.Group != nil || j.State == bridge.Held {
		return groupLine(j, now) // groups.go
	}
	switch j.State {
	case bridge.Queued:
		s := fmt.Sprintf("[%s] queued", rel(now, j.Submit))
		if j.Predicted.Parts != nil {
			s += fmt.Sprintf(", predicted start %s on %s", rel(j.Predicted.Start, j.Submit), bridge.PartsString(j.SiteNames, j.Predicted.Parts))
		}
		return s
	case bridge.Reserved:
		r := j.Resv
		if r.State == bridge.ResvBound {
			return fmt.Sprintf("[%s] reservation bound at %s from %s", rel(now, j.Submit), r.Site, rel(r.Start, j.Submit))
		}
		return fmt.Sprintf("[%s] reservation admitted, window opens %s", rel(now, j.Submit), rel(r.Earliest, j.Submit))
	case bridge.Dispatched:
		if c := copiesText(j); c != "" {
			return fmt.Sprintf("[%s] submitted: %s (tier %s)", rel(now, j.Submit), c, j.Tier)
		}
		return fmt.Sprintf("[%s] submitted to %s, waiting for every part to start", rel(now, j.Submit), j.Sites())
	case bridge.Running:
		el := now.Sub(j.Start)
		tot := j.Predicted.Runtime
		if tot <= 0 {
			tot = j.Req.Estimate
		}
		frac := min(1, float64(el)/float64(tot))
		const w = 24
		n := int(frac * w)
		on := j.Sites()
		if c := copiesText(j); c != "" {
			on = c
		}
		return fmt.Sprintf("[%s] running on %s %s %3.0f%%  %s of ~%s", rel(now, j.Submit), on,
			"▕"+strings.Repeat("█", n)+strings.Repeat("░", w-n)+"▏", frac*100, el.Round(time.Second), tot.Round(time.Second))
	default:
		return fmt.Sprintf("[%s] %s", rel(now, j.Submit), j.State)
	}
}

// summaryText is the end-of-job summary (also status's). sim: the job's
// times are on the simulated clock (stamp marks them).
func summaryText(j *bridge.Job, sim bool) string {
	var sb strings.Builder
	row := func(k, v string) { fmt.Fprintf(&sb, "  %-10s %s\n", k, v) }
	fmt.Fprintf(&sb, "summary of %s (%s)\n", j.ID, j.Req.Name)
	state := string(j.State)
	if j.State == bridge.Completed || j.State == bridge.Failed {
		state += fmt.Sprintf(" (exit %d)", j.ExitCode)
	}
	row("state", state)
	if j.Reason != "" {
		row("reason", j.Reason)
	}
	if s := j.Sites(); s != "" {
		row("sites", s)
	}
	if ids := remoteIDs(j); ids != "" {
		row("batch ids", ids)
	}
	if j.Tier != "" {
		row("tier", j.Tier+" — "+j.TierWhy)
	} else {
		qos := j.Req.QoS
		if qos == "" {
			qos = "auto"
		}
		row("qos", qos)
	}
	for _, c := range j.Withdrawn {
		st := c.State.String()
		if c.RemoteID == "" {
			st = "never submitted"
		}
		row("withdrawn", fmt.Sprintf("%s copy at %s:%d (%s)", c.Role, c.Site, c.Nodes, st))
	}
	if !j.Req.Deadline.IsZero() {
		row("deadline", stamp(j.Req.Deadline, sim)+deadlineMet(j))
	}
	if r := j.Resv; r != nil {
		v := fmt.Sprintf("%s, window %s .. %s", r.State, stamp(r.Earliest, sim), stamp(r.Latest, sim))
		if r.Site != "" {
			v += fmt.Sprintf("; bound at %s from %s", r.Site, stamp(r.Start, sim))
		}
		if len(r.Preempted) > 0 {
			v += fmt.Sprintf("; restarted %s (cost %.0f s)", strings.Join(r.Preempted, ", "), r.Cost)
		}
		row("reservation", v)
	}
	row("submitted", stamp(j.Submit, sim))
	if !j.Start.IsZero() {
		row("wait", j.Start.Sub(j.Submit).Round(time.Second).String())
		if !j.End.IsZero() {
			row("run time", j.End.Sub(j.Start).Round(time.Second).String())
		}
	}
	row("attempts", fmt.Sprint(j.Attempts))
	for _, m := range moveRows(j) { // render_remap.go
		row("moved", m)
	}
	for _, e := range j.FetchErrors {
		row("not fetched", e)
	}
	if len(j.Outputs) > 0 {
		row("output", strings.Join(j.Outputs, "\n             "))
	} else if j.Req.OutputDir != "" && j.Group == nil && (j.State == bridge.Completed || j.State == bridge.Failed || j.State == bridge.Timeout) {
		row("output", "(none fetched) "+j.Req.OutputDir)
	}
	return sb.String()
}

// remoteIDs lists the batch job ids the sites gave the job's components
// ("siteA:1234, siteB:77"), "" before any was submitted.
func remoteIDs(j *bridge.Job) string {
	var ids []string
	for _, c := range j.Comps {
		if c.RemoteID != "" {
			ids = append(ids, c.Site+":"+string(c.RemoteID))
		}
	}
	return strings.Join(ids, ", ")
}

// deadlineMet says whether a job that ended met its deadline.
func deadlineMet(j *bridge.Job) string {
	switch {
	case j.State != bridge.Completed && j.State.Final():
		return " (not met: the job " + string(j.State) + ")"
	case j.End.IsZero():
		return ""
	case j.End.After(j.Req.Deadline):
		return fmt.Sprintf(" (missed by %s)", j.End.Sub(j.Req.Deadline).Round(time.Second))
	}
	return fmt.Sprintf(" (met, %s to spare)", j.Req.Deadline.Sub(j.End).Round(time.Second))
}
