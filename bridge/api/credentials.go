package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/users"
)

// CredentialAdmin keeps the per-user, per-site identities
// (users.Credentials, with the daemon's check of the site). The
// /v1/credentials routes need one in ServerOptions.Credentials (else they
// answer 501).
//
// Contract: Add checks the site (an unknown site, or one not reached over
// SSH, wraps bridge.ErrUnknownSite or bridge.ErrBadRequest) and the key,
// stores the credential and returns its record — never the key; List
// returns user's records ("" = everyone's); Remove wraps
// users.ErrNoCredential when there is none. None of them logs a key.
type CredentialAdmin interface {
	Add(n users.NewCredential, now time.Time) (users.Credential, error)
	List(user string) []users.Credential
	Remove(user, site string) (users.Credential, error)
}

// CredentialRequest is the body of POST /v1/credentials: a user's own
// identity at a site. Key is the private key file's text (unencrypted),
// Cert an OpenSSH certificate of it (optional). User is for an
// administrator storing another user's ("" = the caller's).
type CredentialRequest struct {
	User       string `json:"user,omitempty"`
	Site       string `json:"site"`
	RemoteUser string `json:"remote_user,omitempty"`
	Account    string `json:"account,omitempty"`
	RemoteDir  string `json:"remote_dir,omitempty"`
	Key        string `json:"key"`
	Cert       string `json:"cert,omitempty"`
}

// CredentialsResponse is the answer to GET /v1/credentials and to a
// removal: records only, never a key.
type CredentialsResponse struct {
	Credentials []users.Credential `json:"credentials"`
}

func (s *Server) credentialAdmin(w http.ResponseWriter, r *http.Request) (CredentialAdmin, bool) {
	if s.opts.Credentials == nil {
		s.fail(w, r, http.StatusNotImplemented, "not_implemented", "this server keeps no per-user site credentials")
		return nil, false
	}
	if caller(r).User == "" {
		s.fail(w, r, http.StatusForbidden, CodeForbidden, "site credentials belong to a user, and this request has none")
		return nil, false
	}
	return s.opts.Credentials, true
}

// credentialUser is whose credential a request names: the caller's, or,
// for an administrator, the one named (user). Another user's is 403.
func (s *Server) credentialUser(w http.ResponseWriter, r *http.Request, user string) (string, bool) {
	p := caller(r)
	if user == "" || user == p.User {
		return p.User, true
	}
	if !p.Admin {
		s.fail(w, r, http.StatusForbidden, CodeForbidden, "another user's site credentials are for administrators only")
		return "", false
	}
	return user, true
}

// privateChannel says whether r came over a channel a private key may
// cross: the unix socket, TLS, or loopback TCP.
func privateChannel(r *http.Request) bool {
	if caller(r).Via == ViaSocket || r.TLS != nil {
		return true
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}

func (s *Server) credentialAdd(w http.ResponseWriter, r *http.Request) {
	ca, ok := s.credentialAdmin(w, r)
	if !ok {
		return
	}
	if !privateChannel(r) {
		s.fail(w, r, http.StatusForbidden, CodeForbidden, "a private key is not accepted over plain HTTP from another host: use the unix socket or a TLS listener")
		return
	}
	var req CredentialRequest
	body, _ := io.ReadAll(r.Body) // bounded by bodyLimit
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		// The decoder's words, never the body's: it holds a key.
		s.fail(w, r, http.StatusBadRequest, CodeBadRequest, "request body is not a credential {\"site\", \"key\", \"cert\", \"remote_user\", \"account\", \"remote_dir\", \"user\"}")
		return
	}
	user, ok := s.credentialUser(w, r, req.User)
	if !ok {
		return
	}
	n := users.NewCredential{User: user, Site: req.Site, RemoteUser: req.RemoteUser, Account: req.Account, RemoteDir: req.RemoteDir, Key: []byte(req.Key)}
	if req.Cert != "" {
		n.Cert = []byte(req.Cert)
	}
	cr, err := ca.Add(n, time.Now())
	if err != nil {
		if errors.Is(err, users.ErrBadUser) || errors.Is(err, users.ErrBadCredential) {
			err = fmt.Errorf("%w: %w", bridge.ErrBadRequest, err)
		}
		s.failErr(w, r, err)
		return
	}
	s.log.Info("site credential stored", "user", cr.User, "site", cr.Site, "login", cr.Login(), "account", cr.Account,
		"fingerprint", cr.Fingerprint, "by", caller(r).User)
	writeJSON(w, http.StatusCreated, CredentialsResponse{Credentials: []users.Credential{cr}})
}

func (s *Server) credentialList(w http.ResponseWriter, r *http.Request) {
	ca, ok := s.credentialAdmin(w, r)
	if !ok {
		return
	}
	user := r.URL.Query().Get("user")
	if user == "" && !caller(r).Admin {
		user = caller(r).User
	}
	if user != "" {
		if user, ok = s.credentialUser(w, r, user); !ok {
			return
		}
	}
	l := ca.List(user)
	if l == nil {
		l = []users.Credential{}
	}
	writeJSON(w, http.StatusOK, CredentialsResponse{Credentials: l})
}

func (s *Server) credentialRemove(w http.ResponseWriter, r *http.Request) {
	ca, ok := s.credentialAdmin(w, r)
	if !ok {
		return
	}
	user, ok := s.credentialUser(w, r, r.URL.Query().Get("user"))
	if !ok {
		return
	}
	cr, err := ca.Remove(user, r.PathValue("site"))
	if err != nil {
		if errors.Is(err, users.ErrNoCredential) {
			err = fmt.Errorf("%w: %w", bridge.ErrNotFound, err)
		}
		s.failErr(w, r, err)
		return
	}
	s.log.Info("site credential removed", "user", cr.User, "site", cr.Site, "by", caller(r).User)
	writeJSON(w, http.StatusOK, CredentialsResponse{Credentials: []users.Credential{cr}})
}

// AddCredential stores a site credential (POST /v1/credentials): the
// caller's, or with req.User another user's (an administrator only).
func (c *Client) AddCredential(ctx context.Context, req CredentialRequest) (*users.Credential, error) {
	var out CredentialsResponse
	if err := c.do(ctx, http.MethodPost, "/v1/credentials", req, &out); err != nil {
		return nil, err
	}
	if len(out.Credentials) != 1 {
		return nil, fmt.Errorf("api: the daemon answered %d credentials for one stored", len(out.Credentials))
	}
	return &out.Credentials[0], nil
}

// Credentials lists site credentials' records (GET /v1/credentials): the
// caller's; an administrator's call lists everyone's, or user's.
func (c *Client) Credentials(ctx context.Context, user string) ([]users.Credential, error) {
	var out CredentialsResponse
	path := "/v1/credentials"
	if user != "" {
		path += "?user=" + url.QueryEscape(user)
	}
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.Credentials, nil
}

// RemoveCredential removes a site credential (DELETE
// /v1/credentials/{site}): the caller's, or user's (an administrator).
func (c *Client) RemoveCredential(ctx context.Context, site, user string) (*users.Credential, error) {
	var out CredentialsResponse
	path := "/v1/credentials/" + url.PathEscape(site)
	if user != "" {
		path += "?user=" + url.QueryEscape(user)
	}
	if err := c.do(ctx, http.MethodDelete, path, nil, &out); err != nil {
		return nil, err
	}
	if len(out.Credentials) != 1 {
		return nil, fmt.Errorf("api: the daemon answered %d credentials for one removed", len(out.Credentials))
	}
	return &out.Credentials[0], nil
}
