package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/gridsub/gridsub/backends/transport"
)

// SiteLoginer is optionally implemented by a Broker whose sites can be
// logged in to through the API (the daemon): POST /v1/sites/{name}/login.
//
// Contract: a LoginRequest without Session starts a login to the site; one
// with Session carries the answers to that session's last challenge. The
// reply is the next challenge (Session set), or Done. Errors wrap
// bridge.ErrUnknownSite (no such site), ErrLoginSession (no such session,
// or it ended), ErrLoginUnsupported (the site's backend cannot be logged
// in to), or are the login's own (a rejected answer wraps
// transport.ErrAuth). The answers are secrets: an implementation keeps
// them in memory only for as long as the login needs them, and never logs
// or stores them. Safe for concurrent use.
type SiteLoginer interface {
	SiteLogin(ctx context.Context, site string, req LoginRequest) (*LoginReply, error)
}

// LoginRequest is the body of POST /v1/sites/{name}/login.
type LoginRequest struct {
	Session string   `json:"session,omitempty"`
	Answers []string `json:"answers,omitempty"`
}

// LoginReply is its answer: a challenge to answer in the same session, or
// done (already: the site was connected, nothing was asked).
type LoginReply struct {
	Session   string               `json:"session,omitempty"`
	Challenge *transport.Challenge `json:"challenge,omitempty"`
	Done      bool                 `json:"done"`
	Already   bool                 `json:"already,omitempty"`
}

// Errors of SiteLoginer.
var (
	ErrLoginSession     = errors.New("no such login session (it ended, or timed out)")
	ErrLoginUnsupported = errors.New("this site cannot be logged in to through the daemon")
)

// Error codes of the login route.
const (
	CodeLoginFailed = "login_failed" // 403 from the site: a rejected answer, no acceptable credential
)

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !s.requireAdmin(w, r, "logging the daemon in to a site") {
		return
	}
	sl, ok := s.b.(SiteLoginer)
	if !ok {
		s.fail(w, r, http.StatusNotImplemented, CodeBadRequest, "this broker has no site logins (run gridsub serve)")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBody))
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("reading the request body: %v", err))
		return
	}
	var req LoginRequest
	if len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || dec.More() {
			s.fail(w, r, http.StatusBadRequest, CodeBadRequest, "request body is not a login request {session, answers}")
			return
		}
	}
	if len(req.Answers) > 64 {
		s.fail(w, r, http.StatusBadRequest, CodeBadRequest, "at most 64 answers")
		return
	}
	rep, err := sl.SiteLogin(r.Context(), r.PathValue("name"), req)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, rep)
	case errors.Is(err, ErrLoginSession):
		s.fail(w, r, http.StatusNotFound, CodeNotFound, err.Error())
	case errors.Is(err, ErrLoginUnsupported):
		s.fail(w, r, http.StatusConflict, CodeBadRequest, err.Error())
	case errors.Is(err, transport.ErrAuth), errors.Is(err, transport.ErrHostKeyChanged), errors.Is(err, transport.ErrHostKeyUnknown),
		errors.Is(err, transport.ErrHostKeyRevoked), errors.Is(err, transport.ErrHostCertInvalid), errors.Is(err, transport.ErrSSHConfig):
		s.fail(w, r, http.StatusForbidden, CodeLoginFailed, err.Error())
	default:
		st, code := status(err)
		if st == http.StatusInternalServerError {
			st, code = http.StatusBadGateway, CodeUnavailable
		}
		s.fail(w, r, st, code, err.Error())
	}
}

// SiteLogin posts one step of a login (see SiteLoginer).
func (c *Client) SiteLogin(ctx context.Context, site string, req LoginRequest) (*LoginReply, error) {
	var r LoginReply
	if err := c.do(ctx, http.MethodPost, "/v1/sites/"+url.PathEscape(site)+"/login", req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
