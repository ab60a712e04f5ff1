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
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/users"
)

// TokenAdmin is a TokenBook that also makes, lists and revokes tokens
// (users.Tokens). The /v1/tokens routes need one in ServerOptions.Tokens
// (else they answer 501) and an administrator.
type TokenAdmin interface {
	TokenBook
	Create(user string, admin bool, now time.Time) (string, users.TokenInfo, error)
	List() []users.TokenInfo
	Revoke(id string) ([]users.TokenInfo, error)
}

// TokenRequest is the body of POST /v1/tokens.
type TokenRequest struct {
	User  string `json:"user"`
	Admin bool   `json:"admin,omitempty"`
}

// TokenResponse is the answer to POST /v1/tokens: the token, shown this
// once, and its record.
type TokenResponse struct {
	Token string          `json:"token"`
	Info  users.TokenInfo `json:"info"`
}

// TokensResponse is the answer to GET /v1/tokens and to a revocation.
type TokensResponse struct {
	Tokens []users.TokenInfo `json:"tokens"`
}

func (s *Server) tokenAdmin(w http.ResponseWriter, r *http.Request) (TokenAdmin, bool) {
	if !s.requireAdmin(w, r, "managing tokens") {
		return nil, false
	}
	ta, ok := s.opts.Tokens.(TokenAdmin)
	if !ok {
		s.fail(w, r, http.StatusNotImplemented, "not_implemented", "this server keeps no per-user tokens")
		return nil, false
	}
	return ta, true
}

func (s *Server) tokenCreate(w http.ResponseWriter, r *http.Request) {
	ta, ok := s.tokenAdmin(w, r)
	if !ok {
		return
	}
	var req TokenRequest
	body, _ := io.ReadAll(r.Body) // bounded by bodyLimit
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		s.fail(w, r, http.StatusBadRequest, CodeBadRequest, "request body is not {\"user\": NAME, \"admin\": BOOL}: "+err.Error())
		return
	}
	tok, info, err := ta.Create(req.User, req.Admin, time.Now())
	if err != nil {
		if errors.Is(err, users.ErrBadUser) {
			err = fmt.Errorf("%w: %w", bridge.ErrBadRequest, err)
		}
		s.failErr(w, r, err)
		return
	}
	s.log.Info("token created", "id", info.ID, "user", info.User, "admin", info.Admin, "by", caller(r).User)
	writeJSON(w, http.StatusCreated, TokenResponse{Token: tok, Info: info})
}

func (s *Server) tokenList(w http.ResponseWriter, r *http.Request) {
	ta, ok := s.tokenAdmin(w, r)
	if !ok {
		return
	}
	l := ta.List()
	if l == nil {
		l = []users.TokenInfo{}
	}
	writeJSON(w, http.StatusOK, TokensResponse{Tokens: l})
}

func (s *Server) tokenRevoke(w http.ResponseWriter, r *http.Request) {
	ta, ok := s.tokenAdmin(w, r)
	if !ok {
		return
	}
	gone, err := ta.Revoke(r.PathValue("id"))
	if err != nil {
		if errors.Is(err, users.ErrNoToken) {
			err = fmt.Errorf("%w: %w", bridge.ErrNotFound, err)
		}
		s.failErr(w, r, err)
		return
	}
	s.log.Info("token revoked", "id", r.PathValue("id"), "tokens", len(gone), "by", caller(r).User)
	writeJSON(w, http.StatusOK, TokensResponse{Tokens: gone})
}

// whoami answers GET /v1/whoami: the request's Principal.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, caller(r))
}

// CreateToken asks for a new token for user (POST /v1/tokens; an
// administrator only). The token is in the answer only.
func (c *Client) CreateToken(ctx context.Context, user string, admin bool) (*TokenResponse, error) {
	var out TokenResponse
	if err := c.do(ctx, http.MethodPost, "/v1/tokens", TokenRequest{User: user, Admin: admin}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tokens lists the tokens' records (GET /v1/tokens).
func (c *Client) Tokens(ctx context.Context) ([]users.TokenInfo, error) {
	var out TokensResponse
	if err := c.do(ctx, http.MethodGet, "/v1/tokens", nil, &out); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

// RevokeToken revokes a token by id, or every token of a user with
// "user:NAME" (POST /v1/tokens/{id}/revoke).
func (c *Client) RevokeToken(ctx context.Context, id string) ([]users.TokenInfo, error) {
	var out TokensResponse
	if err := c.do(ctx, http.MethodPost, "/v1/tokens/"+url.PathEscape(id)+"/revoke", nil, &out); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

// WhoAmI asks who the daemon takes this client for (GET /v1/whoami).
func (c *Client) WhoAmI(ctx context.Context) (*Principal, error) {
	var p Principal
	if err := c.do(ctx, http.MethodGet, "/v1/whoami", nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
