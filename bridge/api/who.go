package api

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gridsub/gridsub/bridge"
)

// Principal is who sends a request: a user, and whether they administer
// the daemon. Every request the Server serves has one (the auth
// middleware puts it in the request's context; PrincipalOf reads it).
type Principal struct {
	User  string `json:"user"`
	UID   int    `json:"uid"`   // the peer's uid on the unix socket; -1 when it came from a token
	Admin bool   `json:"admin"` // sees and acts on every job; manages tokens
	// Via says how the user was known: ViaSocket (peer credentials),
	// ViaToken (a per-user token), ViaServiceToken (the daemon's own
	// token, ServerOptions.Token) or ViaInProcess (a handler served
	// without any authentication: tests and embedded servers).
	Via string `json:"via"`
}

// How a Principal was known (Principal.Via).
const (
	ViaSocket       = "socket"
	ViaToken        = "token"
	ViaServiceToken = "service-token"
	ViaInProcess    = "in-process"
)

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalOf returns the principal of a request's context, if any.
func PrincipalOf(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// TokenBook finds the user of a per-user bearer token (bridge/users'
// Tokens is one).
//
// Contract: Lookup compares in constant time per stored token, never logs
// or keeps the token, and reports false for an unknown or revoked one.
// Safe for concurrent use.
type TokenBook interface {
	Lookup(token string) (user string, admin bool, ok bool)
}

// DaemonUser is the name of the user this process runs as ("uid:N" when
// the account has no name).
func DaemonUser() string {
	return userName(os.Getuid())
}

// userName is the name of uid, or "uid:N".
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid:" + strconv.Itoa(uid)
}

// peerConn is an accepted unix-socket connection with its peer's
// credentials, read from the kernel (SO_PEERCRED) when it was accepted.
type peerConn struct {
	net.Conn
	uid    int
	credOK bool
}

// withPeer reads the credentials of a unix-socket connection's peer; any
// other connection is returned as it is.
func withPeer(c net.Conn) net.Conn {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return c
	}
	pc := &peerConn{Conn: c}
	raw, err := uc.SyscallConn()
	if err != nil {
		return pc
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil || cerr != nil {
		return pc
	}
	pc.uid, pc.credOK = int(cred.Uid), true
	return pc
}

// peerKey holds the socket peer's Principal in a connection's context.
type peerKey struct{}

// peerPrincipal is the Principal of a unix-socket peer: its user, an
// administrator when it is root or the daemon's own user. ok is false
// for a connection that is not a unix socket's; a unix connection whose
// credentials could not be read gets a principal without a user (the
// auth middleware refuses it).
func peerPrincipal(c net.Conn) (Principal, bool) {
	pc, ok := c.(*peerConn)
	if !ok {
		return Principal{}, false
	}
	if !pc.credOK {
		return Principal{UID: -1, Via: ViaSocket}, true
	}
	return Principal{User: userName(pc.uid), UID: pc.uid, Admin: pc.uid == 0 || pc.uid == os.Getuid(), Via: ViaSocket}, true
}

// who says who sends r, or false when nobody is known (answer 401).
// On a unix socket: the peer's credentials (a bearer token is not
// looked at). Else a bearer token: the daemon's own (ServerOptions.Token,
// its owner as an administrator) or a per-user one (ServerOptions.Tokens).
// A server with neither is an in-process handler: its caller is the
// daemon's owner.
func (s *Server) who(r *http.Request) (Principal, bool) {
	if p, ok := r.Context().Value(peerKey{}).(Principal); ok {
		return p, p.User != ""
	}
	if s.opts.Token == "" && s.opts.Tokens == nil {
		return Principal{User: s.opts.Owner, UID: os.Getuid(), Admin: true, Via: ViaInProcess}, true
	}
	h := r.Header.Get("Authorization")
	if s.opts.Token != "" && subtle.ConstantTimeCompare([]byte(h), []byte("Bearer "+s.opts.Token)) == 1 {
		return Principal{User: s.opts.Owner, UID: -1, Admin: true, Via: ViaServiceToken}, true
	}
	if tok, ok := strings.CutPrefix(h, "Bearer "); ok && s.opts.Tokens != nil && tok != "" {
		if u, admin, ok := s.opts.Tokens.Lookup(tok); ok {
			return Principal{User: u, UID: -1, Admin: admin, Via: ViaToken}, true
		}
	}
	return Principal{}, false
}

// caller is the principal of a request that passed the auth middleware.
func caller(r *http.Request) Principal {
	p, _ := PrincipalOf(r.Context())
	return p
}

// OwnerOf is the owner of a job: its Request.Owner, or def (the daemon's
// user) for a job without one.
func OwnerOf(j *bridge.Job, def string) string {
	if j.Req.Owner == "" {
		return def
	}
	return j.Req.Owner
}

// sees says whether p may see and act on j: its owner or an administrator.
func (s *Server) sees(p Principal, j *bridge.Job) bool {
	return p.Admin || (p.User != "" && OwnerOf(j, s.opts.Owner) == p.User)
}

// notYours is the error for a job p may not see: exactly what an unknown
// id gets, so another user's job ids cannot be probed.
func notYours(id string) error {
	return fmt.Errorf("%w: no job %q", bridge.ErrNotFound, id)
}

// ownMatcher filters an IDMatcher's matches to the jobs p sees.
type ownMatcher struct {
	s *Server
	p Principal
	m bridge.IDMatcher
}

// matchScan bounds the matches ownMatcher looks through for one query.
const matchScan = 1000

func (o ownMatcher) MatchIDs(ctx context.Context, q string, limit int) ([]string, error) {
	ids, err := o.m.MatchIDs(ctx, q, matchScan)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		if j, err := o.s.b.Job(id); err == nil && o.s.sees(o.p, j) {
			out = append(out, id)
			if limit > 0 && len(out) >= limit {
				break
			}
		}
	}
	return out, nil
}

// requireAdmin answers 403 and returns false unless r's principal is an
// administrator.
func (s *Server) requireAdmin(w http.ResponseWriter, r *http.Request, what string) bool {
	if caller(r).Admin {
		return true
	}
	s.fail(w, r, http.StatusForbidden, CodeForbidden, what+" is for administrators only (root, or the daemon's own user on its socket, or an administrator's token)")
	return false
}

// PeerOf is the Principal of a unix-socket request's peer (its
// connection's credentials), for handlers served beside the Server's on
// the same listener; false when the request did not come over a unix
// socket or its credentials could not be read.
func PeerOf(r *http.Request) (Principal, bool) {
	p, ok := r.Context().Value(peerKey{}).(Principal)
	return p, ok && p.User != ""
}
