package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/gridsub/gridsub/bridge"
)

// Row is a job encoded for a SQL store: the columns the stores index, the
// JSON body (the job without its events) and the events, built in the
// caller's goroutine so later changes by the caller cannot leak in. This
// package's SQLite store and pgstore's PostgreSQL store both write it.
type Row struct {
	ID, State, Name, Sites string
	SiteSet                []string // the sites of the job's components, sorted, once each
	Updated                int64    // unix nanoseconds
	Body                   []byte
	Events                 []bridge.Event
	Resv                   *bridge.Reservation // copy; nil for a job without a window
	Nodes                  int
	SiteFault              bool // bridge.Job.SiteFault
	// Charge is the job's use for its owner's account, added by the write
	// that first stores the job final (bridge.UsageStore); nil: none.
	Charge *bridge.Charge
}

// EncodeRow encodes j as written at now.
func EncodeRow(j *bridge.Job, now time.Time) (*Row, error) {
	c := *j
	c.Events = nil
	body, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encoding job %s: %w", j.ID, err)
	}
	r := &Row{ID: j.ID, State: string(j.State), Name: j.Req.Name, Sites: j.Sites(),
		Updated: now.UnixNano(), Body: body, Events: slices.Clone(j.Events), Nodes: j.Req.Nodes, SiteFault: j.SiteFault}
	if j.Resv != nil {
		rv := *j.Resv
		r.Resv = &rv
	}
	for _, c := range j.Comps {
		if !slices.Contains(r.SiteSet, c.Site) {
			r.SiteSet = append(r.SiteSet, c.Site)
		}
	}
	slices.Sort(r.SiteSet)
	return r, nil
}

// Outcome is what a job's row counts at each of its sites (countOutcome,
// in both SQL stores): done 1 for a completed job, failed 1 for one that
// failed through its site's fault (bridge.Job.SiteFault); ok is false for
// anything else, which counts nothing.
func (r *Row) Outcome() (done, failed int, ok bool) {
	switch bridge.JobState(r.State) {
	case bridge.Completed:
		return 1, 0, true
	case bridge.Failed:
		return 0, 1, r.SiteFault
	}
	return 0, 0, false
}
