package api

import (
	"bytes"
	"context"
	"crypto/tls"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

// Broker is what the API serves. *bridge.Broker provides all but ListJobs;
// WithStore adds that from the broker's store.
//
// Contract: Submit validates and queues a request and returns at once with
// the new job (errors wrap bridge.ErrBadRequest or bridge.ErrUnknownSite
// for a request that cannot be queued). Job returns a copy or an error
// wrapping bridge.ErrNotFound. ListJobs returns the jobs the filter selects
// in submission order. Cancel wraps bridge.ErrNotFound or bridge.ErrFinal.
// All methods are safe for concurrent use.
type Broker interface {
	Submit(ctx context.Context, req bridge.Request, now time.Time) (*bridge.Job, error)
	Job(id string) (*bridge.Job, error)
	ListJobs(ctx context.Context, f bridge.Filter) ([]*bridge.Job, error)
	Cancel(ctx context.Context, id string, now time.Time) error
	SiteNames() []string
}

// Checker is optionally implemented by a Broker whose health is more than
// "the process answers" (the store is reachable, the cycle is not stuck).
type Checker interface {
	Health(ctx context.Context) error
}

// WithStore adapts a *bridge.Broker (or anything with its methods) to
// Broker, answering ListJobs from the store the broker writes to. Job asks
// the broker first and the store second, so jobs of an earlier run that
// the broker did not load are still found. The result is a Checker that
// asks the store (and the broker, if it is one).
func WithStore(b interface {
	Submit(ctx context.Context, req bridge.Request, now time.Time) (*bridge.Job, error)
	Job(id string) (*bridge.Job, error)
	Cancel(ctx context.Context, id string, now time.Time) error
	SiteNames() []string
}, s bridge.Store) Broker {
	return storeBroker{b, s}
}

type storeBroker struct {
	broker interface {
		Submit(ctx context.Context, req bridge.Request, now time.Time) (*bridge.Job, error)
		Job(id string) (*bridge.Job, error)
		Cancel(ctx context.Context, id string, now time.Time) error
		SiteNames() []string
	}
	st bridge.Store
}

func (s storeBroker) Submit(ctx context.Context, r bridge.Request, now time.Time) (*bridge.Job, error) {
	return s.broker.Submit(ctx, r, now)
}
func (s storeBroker) Job(id string) (*bridge.Job, error) {
	j, err := s.broker.Job(id)
	if errors.Is(err, bridge.ErrNotFound) {
		if sj, serr := s.st.Get(context.Background(), id); serr == nil {
			return sj, nil
		}
	}
	return j, err
}
func (s storeBroker) ListJobs(ctx context.Context, f bridge.Filter) ([]*bridge.Job, error) {
	return s.st.List(ctx, f)
}
func (s storeBroker) Cancel(ctx context.Context, id string, now time.Time) error {
	return s.broker.Cancel(ctx, id, now)
}
func (s storeBroker) SiteNames() []string { return s.broker.SiteNames() }

// Health implements Checker: the store's health when it has one
// (store.SQLite does), else that of the broker, else healthy.
func (s storeBroker) Health(ctx context.Context) error {
	for _, x := range []any{s.st, s.broker} {
		if c, ok := x.(Checker); ok {
			if err := c.Health(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

//go:embed openapi.yaml
var openapi []byte

// OpenAPI returns the OpenAPI 3 document of the API.
func OpenAPI() []byte { return slices.Clone(openapi) }

// ServerOptions configure a Server.
type ServerOptions struct {
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every request. Serve refuses a TCP listener without one; on a unix
	// socket the file mode (0600) is the protection.
	Token string
	// Tokens, when set, also accepts per-user bearer tokens on a TCP
	// listener (and serves the /v1/tokens routes when it is a
	// TokenAdmin). On the unix socket the peer's credentials say who asks.
	Tokens TokenBook
	// Credentials, when set, serves the /v1/credentials routes: each
	// user's own identities at the sites (docs/users.md).
	Credentials CredentialAdmin
	// Owner is the daemon's own user (default DaemonUser()): the owner of
	// jobs stored without one, and who the service token speaks for.
	Owner  string
	Now    func() time.Time // the broker's clock for Submit and Cancel (default time.Now)
	Logger *slog.Logger
	// MaxBody bounds a request body (default 1 MiB, DefaultMaxBody): a
	// larger one is answered 413 before any handler runs.
	MaxBody int64
	// Limits bound each connection (zero fields: DefaultLimits).
	Limits Limits
	// TLS, when set, is served on a TCP listener (ServerTLS makes one).
	TLS *tls.Config
	// InsecurePlaintext lets Serve use plain HTTP on a non-loopback TCP
	// listener (see TCPOptions.InsecurePlaintext).
	InsecurePlaintext bool
	// Simulated says Now is a simulated (virtual) clock; GET /v1/health
	// tells clients so that they mark the times they show.
	Simulated bool
	// IDPrefix is what starts every job id of the broker (bridge.Options.
	// IDPrefix); GET /v1/health tells it, so the SLURM and PBS front-ends
	// can print ids as the integers their clients expect.
	IDPrefix string
}

// Server serves the API over HTTP/JSON.
type Server struct {
	b    Broker
	opts ServerOptions
	log  *slog.Logger
	h    http.Handler
	srv  *http.Server
}

// Routes lists the API's routes as "METHOD /path" (the OpenAPI document
// describes each; a test holds the two together).
var Routes = []string{
	"POST /v1/jobs",
	"GET /v1/jobs",
	"GET /v1/jobs/{id}",
	"GET /v1/jobs/{id}/events",
	"POST /v1/jobs/{id}/cancel",
	"GET /v1/sites",
	"GET /v1/reservations",
	"GET /v1/health",
	"GET /openapi.yaml",
	"GET /v1/plugins",
	"POST /v1/explain",
	"GET /v1/jobs/{id}/explain",
	"GET /v1/jobs/{id}/logs",
	"POST /v1/sites/{name}/login",
	"POST /v1/jobs/{id}/hold",
	"POST /v1/jobs/{id}/release",
	"POST /v1/jobs/{id}/requeue",
	"GET /v1/queue",
	"POST /v1/tokens",
	"GET /v1/tokens",
	"POST /v1/tokens/{id}/revoke",
	"GET /v1/whoami",
	"POST /v1/credentials",
	"GET /v1/credentials",
	"DELETE /v1/credentials/{site}",
}

// PageRoute is the status page (statuspage.go): the caller's jobs only.
const PageRoute = "GET /{$}"

// Controller is optionally implemented by a Broker that holds, releases and
// requeues jobs (bridge.Broker's Hold, Release, Requeue); without it those
// routes answer 404.
type Controller interface {
	Hold(ctx context.Context, id string, now time.Time) error
	Release(ctx context.Context, id string, now time.Time) error
	Requeue(ctx context.Context, id string, now time.Time) error
}

// NewServer returns a server for b.
func NewServer(b Broker, opts ServerOptions) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Owner == "" {
		opts.Owner = DaemonUser()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	opts.Limits = opts.Limits.WithDefaults()
	s := &Server{b: b, opts: opts, log: opts.Logger}
	mux := http.NewServeMux()
	handlers := []http.HandlerFunc{s.submit, s.list, s.get, s.events, s.cancel, s.sites, s.reservations, s.health, s.openapi, s.plugins, s.dryRun, s.explainJob, s.logs,
		s.login, s.control("hold"), s.control("release"), s.control("requeue"), s.queue,
		s.tokenCreate, s.tokenList, s.tokenRevoke, s.whoami, s.credentialAdd, s.credentialList, s.credentialRemove}
	for i, r := range Routes {
		mux.HandleFunc(r, handlers[i])
	}
	mux.HandleFunc(PageRoute, s.page)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, "no_route", fmt.Sprintf("no route %s %s; see GET /openapi.yaml", r.Method, r.URL.Path))
	})
	s.h = s.auth(s.bodyLimit(mux))
	s.srv = NewHTTPServer(s.h, opts.Limits, s.log)
	return s
}

// Handler returns the server's http.Handler (authentication included).
func (s *Server) Handler() http.Handler { return s.h }

// ErrNoToken: Serve was given a TCP listener but no token.
var ErrNoToken = errors.New("a TCP listener needs a bearer token (ServerOptions.Token)")

// Serve serves on l until Shutdown; it returns http.ErrServerClosed after a
// Shutdown. At most Limits.MaxConns connections are served at once. A
// listener that is not a unix socket needs a ServerOptions.Token that
// passes CheckToken, is served with ServerOptions.TLS when set, and must be
// loopback-only without TLS unless ServerOptions.InsecurePlaintext
// (ErrPlaintext); a refused listener is closed.
func (s *Server) Serve(l net.Listener) error {
	if _, unix := l.Addr().(*net.UnixAddr); unix {
		return s.srv.Serve(LimitListener(l, s.opts.Limits.MaxConns))
	}
	if err := CheckToken(s.opts.Token); err != nil {
		l.Close()
		return fmt.Errorf("api: serving on %s: %w", l.Addr(), err)
	}
	sl, err := secureTCP(l, TCPOptions{Token: s.opts.Token, TLS: s.opts.TLS, InsecurePlaintext: s.opts.InsecurePlaintext,
		MaxConns: s.opts.Limits.MaxConns, MaxUnauthConns: s.opts.Limits.MaxUnauthConns, MaxUnauthPerAddr: s.opts.Limits.MaxUnauthPerAddr})
	if err != nil {
		l.Close()
		return err
	}
	return s.srv.Serve(sl)
}

// Shutdown stops accepting connections and waits for requests in flight.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// auth finds who sends each request (who.go) and puts the Principal in
// its context; a request from nobody known is answered 401 and its TCP
// connection closed.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.who(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gridsub"`)
			Refuse(w, r) // closed after this answer: a refused client holds no connection
			s.fail(w, r, http.StatusUnauthorized, CodeUnauthorized, "missing or wrong bearer token (or unknown socket peer)")
			return
		}
		MarkAuthenticated(r)
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

// Error codes in an error response's "code".
const (
	CodeNotFound     = "not_found"
	CodeBadRequest   = "bad_request"
	CodeUnknownSite  = "unknown_site"
	CodeInfeasible   = "infeasible" // 422: no configured site can ever run the job (bridge.ErrInfeasible)
	CodeFinal        = "final"
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "forbidden"  // 403: only an administrator may do this
	CodeOverLimit    = "over_limit" // 429: the user's max_queued (bridge.ErrOverLimit)
	CodeUnavailable  = "unavailable"
	CodeDiskFull     = "disk_full"
	CodeInternal     = "internal"
	CodeTooLarge     = "too_large" // 413: the body is over ServerOptions.MaxBody
	CodeTimeout      = "timeout"   // 408: the body did not arrive within Limits.ReadTimeout
)

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// status maps an error to its HTTP status and code.
func status(err error) (int, string) {
	switch {
	case errors.Is(err, bridge.ErrNotFound):
		return http.StatusNotFound, CodeNotFound
	case errors.Is(err, bridge.ErrUnknownSite):
		return http.StatusBadRequest, CodeUnknownSite
	case errors.Is(err, bridge.ErrInfeasible):
		return http.StatusUnprocessableEntity, CodeInfeasible
	case errors.Is(err, bridge.ErrOverLimit):
		return http.StatusTooManyRequests, CodeOverLimit
	case errors.Is(err, bridge.ErrBadRequest):
		return http.StatusBadRequest, CodeBadRequest
	case errors.Is(err, bridge.ErrFinal):
		return http.StatusConflict, CodeFinal
	case errors.Is(err, store.ErrDiskFull):
		return http.StatusInsufficientStorage, CodeDiskFull
	case errors.Is(err, store.ErrCorrupt):
		// The store refuses writes once it has found damage: the client may
		// retry once the operator has restored a backup.
		return http.StatusServiceUnavailable, CodeUnavailable
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrClosed), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, CodeUnavailable
	}
	return http.StatusInternalServerError, CodeInternal
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, st int, code, msg string) {
	if st >= 500 {
		s.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "status", st, "err", msg)
	}
	writeJSON(w, st, ErrorBody{Error: msg, Code: code})
}

func (s *Server) failErr(w http.ResponseWriter, r *http.Request, err error) {
	st, code := status(err)
	s.fail(w, r, st, code, err.Error())
}

func writeJSON(w http.ResponseWriter, st int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st)
	enc := json.NewEncoder(w)
	enc.Encode(v) // the status is sent; a failed write is the client's loss
}

// IdempotencyHeader names a submission (Request.IdempotencyKey): a
// retry with the same key gets the first submission's job, never a second
// job. Client.Submit sends a new one for each submission and retries with
// it.
const IdempotencyHeader = "Idempotency-Key"

// SubmitResponse is the answer to POST /v1/jobs.
type SubmitResponse struct {
	ID  string      `json:"id"`
	Job *bridge.Job `json:"job"`
}

// submit decodes a request strictly (bounded body, no unknown fields, one
// JSON value) and hands it to the broker's Submit, which validates it: the
// API adds no rule of its own, so it answers exactly as the CLI does.
func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBody))
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("reading the request body: %v (at most %d bytes)", err, s.opts.MaxBody))
		return
	}
	var req bridge.Request
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		msg := err.Error()
		if f := badField(body); f != "" && !strings.Contains(msg, "Request."+f) {
			msg = f + ": " + msg
		}
		s.fail(w, r, http.StatusBadRequest, CodeBadRequest, "request body is not a job request: "+msg+" (see the Request schema in GET /openapi.yaml)")
		return
	}
	if dec.More() {
		s.fail(w, r, http.StatusBadRequest, CodeBadRequest, "request body has data after the job request")
		return
	}
	if k := r.Header.Get(IdempotencyHeader); k != "" {
		if req.IdempotencyKey != "" && req.IdempotencyKey != k {
			s.fail(w, r, http.StatusBadRequest, CodeBadRequest, "the "+IdempotencyHeader+" header and the request's IdempotencyKey differ; give one")
			return
		}
		req.IdempotencyKey = k // the broker checks its form
	}
	if p := caller(r); req.Owner == "" || !p.Admin {
		if req.Owner != "" && req.Owner != p.User {
			s.fail(w, r, http.StatusForbidden, CodeForbidden, fmt.Sprintf("the request names the owner %q but you are %q; only an administrator submits for another user", req.Owner, p.User))
			return
		}
		req.Owner = p.User
	}
	if req.Owner == s.opts.Owner {
		req.Owner = "" // the daemon's own user's jobs carry no owner (OwnerOf)
	}
	j, err := s.b.Submit(r.Context(), req, s.opts.Now())
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/jobs/"+j.ID)
	writeJSON(w, http.StatusCreated, SubmitResponse{ID: j.ID, Job: j})
}

// requestFields are the JSON names of bridge.Request's fields.
var requestFields = func() []string {
	var out []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[bridge.Request]()) {
		if f.IsExported() {
			out = append(out, f.Name)
		}
	}
	return out
}()

// badField finds the top-level field of a request body that does not decode
// (encoding/json does not name the field for errors such as a malformed
// time), or "".
func badField(body []byte) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.ContainsFunc(requestFields, func(f string) bool { return strings.EqualFold(f, k) }) {
			continue // unknown: the decoder's own error names it
		}
		one, err := json.Marshal(map[string]json.RawMessage{k: m[k]})
		if err != nil {
			return k
		}
		var r bridge.Request
		if json.Unmarshal(one, &r) != nil {
			return k
		}
	}
	return ""
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	j, err := s.job(r)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

// EventsResponse is the answer to GET /v1/jobs/{id}/events.
type EventsResponse struct {
	ID     string         `json:"id"`
	State  string         `json:"state"`
	Events []bridge.Event `json:"events"`
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	j, err := s.job(r)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	evs := j.Events
	if evs == nil {
		evs = []bridge.Event{}
	}
	writeJSON(w, http.StatusOK, EventsResponse{ID: j.ID, State: string(j.State), Events: evs})
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	id, err := s.resolve(r.Context(), r.PathValue("id"))
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	if err := s.b.Cancel(r.Context(), id, s.opts.Now()); err != nil {
		s.failErr(w, r, err)
		return
	}
	j, err := s.b.Job(id)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

// control serves POST /v1/jobs/{id}/hold, release and requeue: the job
// after the change.
func (s *Server) control(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := s.b.(Controller)
		if !ok {
			s.fail(w, r, http.StatusNotFound, CodeNotFound, "this server cannot "+action+" jobs")
			return
		}
		id, err := s.resolve(r.Context(), r.PathValue("id"))
		if err != nil {
			s.failErr(w, r, err)
			return
		}
		do := map[string]func(context.Context, string, time.Time) error{"hold": c.Hold, "release": c.Release, "requeue": c.Requeue}[action]
		if err := do(r.Context(), id, s.opts.Now()); err != nil {
			s.failErr(w, r, err)
			return
		}
		j, err := s.b.Job(id)
		if err != nil {
			s.failErr(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, j)
	}
}

// ListResponse is the answer to GET /v1/jobs. Next, when set, is the
// "after" value of the next page.
type ListResponse struct {
	Jobs []*bridge.Job `json:"jobs"`
	Next string        `json:"next,omitempty"`
}

// MaxLimit bounds one page of GET /v1/jobs; DefaultLimit is the page size
// when none is asked for.
const (
	MaxLimit     = 10000
	DefaultLimit = 1000
)

// parseFilter reads a Filter from query parameters: state (repeatable or
// comma-separated), site, name, after, limit, events.
func parseFilter(q map[string][]string) (bridge.Filter, error) {
	f := bridge.Filter{Limit: DefaultLimit}
	for k := range q {
		if !slices.Contains([]string{"state", "site", "name", "after", "limit", "events", "order", "parent"}, k) {
			return f, fmt.Errorf("%w: unknown query parameter %q; known: state, site, name, after, limit, events, order, parent", bridge.ErrBadRequest, k)
		}
	}
	for _, v := range q["state"] {
		for st := range strings.SplitSeq(v, ",") {
			if st == "" {
				continue
			}
			js, err := bridge.ParseState(st)
			if err != nil {
				return f, err
			}
			f.States = append(f.States, js)
		}
	}
	one := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[len(v)-1]
		}
		return ""
	}
	f.Site, f.Name, f.After, f.Parent = one("site"), one("name"), one("after"), one("parent")
	if v := one("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			return f, fmt.Errorf("%w: limit %q; want an integer from 1 to %d", bridge.ErrBadRequest, v, MaxLimit)
		}
		f.Limit = n
	}
	switch v := one("order"); v {
	case "", "oldest":
	case "newest":
		f.Newest = true
	default:
		return f, fmt.Errorf("%w: order %q; want oldest (the default) or newest", bridge.ErrBadRequest, v)
	}
	if v := one("events"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return f, fmt.Errorf("%w: events %q; want true or false", bridge.ErrBadRequest, v)
		}
		f.Events = b
	}
	return f, nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query())
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	js, err := s.listFor(r.Context(), caller(r), f)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	if js == nil {
		js = []*bridge.Job{}
	}
	resp := ListResponse{Jobs: js}
	if len(js) == f.Limit {
		resp.Next = js[len(js)-1].ID
	}
	writeJSON(w, http.StatusOK, resp)
}

// listFor is ListJobs as p sees it: an administrator every job, a user
// their own, read page after page of the Broker's listing until f.Limit
// of theirs are found or the listing ends.
func (s *Server) listFor(ctx context.Context, p Principal, f bridge.Filter) ([]*bridge.Job, error) {
	if p.Admin {
		return s.b.ListJobs(ctx, f)
	}
	var out []*bridge.Job
	for {
		js, err := s.b.ListJobs(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, j := range js {
			if s.sees(p, j) {
				out = append(out, j)
				if f.Limit > 0 && len(out) == f.Limit {
					return out, nil
				}
			}
		}
		if f.Limit <= 0 || len(js) < f.Limit {
			return out, nil
		}
		f.After = js[len(js)-1].ID
	}
}

// SitesResponse is the answer to GET /v1/sites. Sites keeps the names
// alone (what clients before site health read); Details has one record per
// site in the same order, and is absent when the Broker is not a
// SiteReporter. Time is the server's wall clock at the answer: the ages of
// the records are measured against it.
type SitesResponse struct {
	Sites   []string  `json:"sites"`
	Details []Site    `json:"details,omitempty"`
	Time    time.Time `json:"time"`
}

func (s *Server) sites(w http.ResponseWriter, r *http.Request) {
	resp := SitesResponse{Sites: s.b.SiteNames(), Time: time.Now()}
	if resp.Sites == nil {
		resp.Sites = []string{}
	}
	if sr, ok := s.b.(SiteReporter); ok {
		d, err := sr.SiteStatus(r.Context())
		if err != nil {
			s.failErr(w, r, err)
			return
		}
		if d == nil {
			d = []Site{}
		}
		resp.Details = d
	}
	writeJSON(w, http.StatusOK, resp)
}

// HealthResponse is the answer to GET /v1/health.
type HealthResponse struct {
	Status string `json:"status"` // "ok" or "unhealthy"
	Error  string `json:"error,omitempty"`
	Code   string `json:"code,omitempty"` // "unavailable" when unhealthy
	// Reason says what is wrong when unhealthy, for scripts and alerts:
	// one of the Reason* constants.
	Reason string    `json:"reason,omitempty"`
	Time   time.Time `json:"time"`
	// Simulated: Time is the simulated sites' virtual clock (ServerOptions.Simulated).
	Simulated bool `json:"simulated,omitempty"`
	Sites     int  `json:"sites"`
	// SiteNames are the configured sites, in configuration order: a client
	// holding a configuration checks that this daemon runs the same one.
	SiteNames []string `json:"site_names,omitempty"`
	// IDPrefix starts every job id ("g0lx8k2p3q9ab-"); the rest is a
	// zero-padded sequence number, the id the front-ends print.
	IDPrefix string `json:"id_prefix,omitempty"`
}

// Reasons of an unhealthy daemon (HealthResponse.Reason).
const (
	ReasonCorrupt  = "database_corrupt"   // the store failed an integrity check or met a damaged page
	ReasonReadOnly = "database_read_only" // the database or its directory cannot be written
	ReasonDiskFull = "disk_full"          // the database's file system (or its size limit) is full
	ReasonClosed   = "store_closed"       // the store was closed (the daemon is stopping)
	ReasonStore    = "store_unavailable"  // the store cannot be read or written otherwise
	ReasonOther    = "other"              // anything else the daemon checks (a stuck task, ...)
)

// healthReason classifies an error of a Checker.
func healthReason(err error) string {
	switch {
	case errors.Is(err, store.ErrCorrupt):
		return ReasonCorrupt
	case errors.Is(err, store.ErrReadOnly):
		return ReasonReadOnly
	case errors.Is(err, store.ErrDiskFull):
		return ReasonDiskFull
	case errors.Is(err, store.ErrClosed):
		return ReasonClosed
	case errors.Is(err, store.ErrUnavailable):
		return ReasonStore
	}
	return ReasonOther
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	names := s.b.SiteNames()
	h := HealthResponse{Status: "ok", Time: s.opts.Now(), Simulated: s.opts.Simulated, Sites: len(names), SiteNames: names, IDPrefix: s.opts.IDPrefix}
	if c, ok := s.b.(Checker); ok {
		if err := c.Health(r.Context()); err != nil {
			h.Status, h.Error, h.Code, h.Reason = "unhealthy", err.Error(), CodeUnavailable, healthReason(err)
			writeJSON(w, http.StatusServiceUnavailable, h)
			return
		}
	}
	writeJSON(w, http.StatusOK, h)
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(openapi)
}
