package api

import (
	"context"
	"net/http"
	"time"

	"github.com/gridsub/gridsub/bridge/store"
)

// ReservationLister is optionally implemented by a Broker that keeps its
// advance reservations in a store (the daemon does). Without it GET
// /v1/reservations answers 501.
//
// Contract: Reservations returns the stored reservations, earliest window
// first; with active set only those admitted, binding or bound. It does not
// contact the sites and is safe for concurrent use.
type ReservationLister interface {
	Reservations(ctx context.Context, active bool) ([]Reservation, error)
}

// Reservation is one advance reservation in GET /v1/reservations (SPEC.md
// §2): the job that asked for it, its window, and where it stands. Site,
// start and native_id are empty until it is bound to a site, shortly
// before its window opens.
type Reservation struct {
	Job      string     `json:"job"`
	State    string     `json:"state"` // admitted, binding, bound, released, failed
	Earliest time.Time  `json:"earliest_start"`
	Latest   time.Time  `json:"latest_end"`
	Nodes    int        `json:"nodes"`
	Site     string     `json:"site,omitempty"`
	Start    *time.Time `json:"start,omitempty"`
	Native   string     `json:"native_id,omitempty"`
	Reason   string     `json:"reason,omitempty"`
}

// NewReservation converts a stored reservation.
func NewReservation(r store.ResvRecord) Reservation {
	out := Reservation{Job: r.Job, State: string(r.State), Earliest: r.Earliest, Latest: r.Latest, Nodes: r.Nodes,
		Site: r.Site, Native: r.Native, Reason: r.Reason}
	if !r.Start.IsZero() {
		st := r.Start
		out.Start = &st
	}
	return out
}

// ReservationsResponse is the answer to GET /v1/reservations.
type ReservationsResponse struct {
	Reservations []Reservation `json:"reservations"`
}

func (s *Server) reservations(w http.ResponseWriter, r *http.Request) {
	rl, ok := s.b.(ReservationLister)
	if !ok {
		s.fail(w, r, http.StatusNotImplemented, "not_implemented", "this broker keeps no reservations")
		return
	}
	active := false
	switch v := r.URL.Query().Get("active"); v {
	case "", "false":
	case "true":
		active = true
	default:
		s.fail(w, r, http.StatusBadRequest, CodeBadRequest, "active must be true or false, got "+v)
		return
	}
	rs, err := rl.Reservations(r.Context(), active)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	rs = s.ownReservations(caller(r), rs)
	if rs == nil {
		rs = []Reservation{}
	}
	writeJSON(w, http.StatusOK, ReservationsResponse{Reservations: rs})
}

// Reservations lists the daemon's advance reservations (GET
// /v1/reservations); active limits them to those not yet ended.
func (c *Client) Reservations(ctx context.Context, active bool) ([]Reservation, error) {
	path := "/v1/reservations"
	if active {
		path += "?active=true"
	}
	var r ReservationsResponse
	if err := c.do(ctx, http.MethodGet, path, nil, &r); err != nil {
		return nil, err
	}
	return r.Reservations, nil
}

// ownReservations keeps the reservations of the jobs p sees.
func (s *Server) ownReservations(p Principal, rs []Reservation) []Reservation {
	if p.Admin {
		return rs
	}
	var out []Reservation
	for _, r := range rs {
		if j, err := s.b.Job(r.Job); err == nil && s.sees(p, j) {
			out = append(out, r)
		}
	}
	return out
}
