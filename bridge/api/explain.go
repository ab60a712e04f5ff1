package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/gridsub/gridsub/bridge"
)

// Explainer is optionally implemented by a Broker that can say where a
// job would be placed without placing it (the daemon's is the
// bridge.Broker's Explain and ExplainJob). Without it POST /v1/explain and
// GET /v1/jobs/{id}/explain answer 501.
//
// Contract: neither stores, submits nor changes anything; Explain
// validates the request exactly as Submit does and fails with the same
// errors; ExplainJob fails with bridge.ErrNotFound for an unknown job and
// bridge.ErrBadRequest for one that is not queued.
type Explainer interface {
	Explain(ctx context.Context, req bridge.Request, now time.Time) (*bridge.Explanation, error)
	ExplainJob(ctx context.Context, id string, now time.Time) (*bridge.Explanation, error)
}

// dryRun answers POST /v1/explain: the request body is decoded as POST
// /v1/jobs decodes it.
func (s *Server) dryRun(w http.ResponseWriter, r *http.Request) {
	ex, ok := s.b.(Explainer)
	if !ok {
		s.fail(w, r, http.StatusNotImplemented, "not_implemented", "this broker cannot explain placements")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBody))
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, CodeBadRequest, "reading the request body: "+err.Error())
		return
	}
	var req bridge.Request
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		msg := "request body is not one job request"
		if err != nil {
			msg += ": " + err.Error()
		}
		s.fail(w, r, http.StatusBadRequest, CodeBadRequest, msg+" (see the Request schema in GET /openapi.yaml)")
		return
	}
	// As POST /v1/jobs: the request is the caller's (its dependencies
	// must be their jobs).
	if p := caller(r); !p.Admin || req.Owner == "" {
		req.Owner = p.User
	}
	if req.Owner == s.opts.Owner {
		req.Owner = ""
	}
	e, err := ex.Explain(r.Context(), req, s.opts.Now())
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

// explainJob answers GET /v1/jobs/{id}/explain.
func (s *Server) explainJob(w http.ResponseWriter, r *http.Request) {
	ex, ok := s.b.(Explainer)
	if !ok {
		s.fail(w, r, http.StatusNotImplemented, "not_implemented", "this broker cannot explain placements")
		return
	}
	id, err := s.resolve(r.Context(), r.PathValue("id"))
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	e, err := ex.ExplainJob(r.Context(), id, s.opts.Now())
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

// Explain asks where a job request would be placed now (POST /v1/explain),
// without submitting it.
func (c *Client) Explain(ctx context.Context, req bridge.Request) (*bridge.Explanation, error) {
	var e bridge.Explanation
	if err := c.do(ctx, http.MethodPost, "/v1/explain", req, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// ExplainJob asks where a queued job would be placed now (GET
// /v1/jobs/{id}/explain).
func (c *Client) ExplainJob(ctx context.Context, id string) (*bridge.Explanation, error) {
	var e bridge.Explanation
	if err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/explain", nil, &e); err != nil {
		return nil, err
	}
	return &e, nil
}
