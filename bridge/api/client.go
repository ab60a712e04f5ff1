package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

// Client talks to a gridsub daemon. It is safe for concurrent use.
type Client struct {
	base  string // "http://gridsub" for a unix socket
	token string
	hc    *http.Client
	where string // what to name in "no daemon" errors
	max   int64  // bound of an answer (0 = MaxResponse)
}

// WithMaxResponse returns a copy of c that reads answers of at most n
// bytes (n <= 0: MaxResponse).
func (c *Client) WithMaxResponse(n int64) *Client {
	cc := *c
	cc.max = n
	return &cc
}

func (c *Client) maxResponse() int64 {
	if c.max > 0 {
		return c.max
	}
	return MaxResponse
}

// NewUnixClient returns a client for the daemon listening on a unix socket.
func NewUnixClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
	}
	return &Client{base: "http://gridsub", hc: &http.Client{Transport: tr}, where: "socket " + socket}
}

// NewClient returns a client for a daemon at an http(s) base URL with a
// bearer token. hc nil means http.DefaultClient.
func NewClient(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, hc: hc, where: baseURL}
}

// Error is an error response of the API. It unwraps to the matching
// sentinel (bridge.ErrNotFound, bridge.ErrBadRequest, bridge.ErrUnknownSite,
// bridge.ErrFinal, store.ErrDiskFull, store.ErrUnavailable), so callers test
// it with errors.Is as if they had called the broker directly.
type Error struct {
	Status int    // HTTP status
	Code   string // ErrorBody.Code
	Msg    string // ErrorBody.Error
}

func (e *Error) Error() string {
	return fmt.Sprintf("gridsub daemon: %s (HTTP %d %s)", e.Msg, e.Status, e.Code)
}

// Unwrap returns the sentinel of the code, or nil.
func (e *Error) Unwrap() error {
	switch e.Code {
	case CodeNotFound:
		return bridge.ErrNotFound
	case CodeBadRequest, CodeTooLarge:
		return bridge.ErrBadRequest
	case CodeUnknownSite:
		return bridge.ErrUnknownSite
	case CodeInfeasible:
		return bridge.ErrInfeasible
	case CodeFinal:
		return bridge.ErrFinal
	case CodeOverLimit:
		return bridge.ErrOverLimit
	case CodeDiskFull:
		return store.ErrDiskFull
	case CodeUnavailable:
		return store.ErrUnavailable
	}
	return nil
}

// MaxResponse bounds an answer the client reads: a page of MaxLimit jobs
// with their events fits many times over; a server that sends more (or
// without end) gets an error instead of the client's memory.
const MaxResponse = 256 << 20

// do sends a request and decodes a 2xx JSON answer into out.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	return c.doWith(ctx, method, path, nil, in, out)
}

// doWith is do with extra request headers.
func (c *Client) doWith(ctx context.Context, method, path string, hdr http.Header, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("api: encoding the request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) || errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("api: %w on %s: %w", ErrNoDaemon, c.where, err)
		}
		return fmt.Errorf("api: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var eb ErrorBody
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &eb) != nil || eb.Code == "" {
			eb = ErrorBody{Error: strings.TrimSpace(string(b)), Code: CodeInternal}
		}
		return &Error{Status: resp.StatusCode, Code: eb.Code, Msg: eb.Error}
	}
	if out == nil {
		return nil
	}
	lr := &io.LimitedReader{R: resp.Body, N: c.maxResponse() + 1}
	if err := json.NewDecoder(lr).Decode(out); err != nil {
		if lr.N <= 0 {
			return fmt.Errorf("api: %s %s: the answer is larger than %d bytes (MaxResponse)", method, path, c.maxResponse())
		}
		return fmt.Errorf("api: %s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// Submit queues a job request and returns the new job at once. It names
// the submission with an idempotency key (req.IdempotencyKey, or a new
// random one) and, when the connection fails after the request may have
// reached the daemon (reset, cut, timed out — a daemon killed or
// restarting), sends it again with the same key for up to SubmitRetryFor:
// the daemon answers a retry with the job of the first submission, so a
// retry never makes a second job. An error answer of the daemon is not
// retried, nor a first attempt that finds no daemon at all.
func (c *Client) Submit(ctx context.Context, req bridge.Request) (*bridge.Job, error) {
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = NewIdempotencyKey()
	}
	hdr := http.Header{IdempotencyHeader: {req.IdempotencyKey}}
	give := time.Now().Add(SubmitRetryFor)
	wait := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		var r SubmitResponse
		err := c.doWith(ctx, http.MethodPost, "/v1/jobs", hdr, req, &r)
		if err == nil {
			return r.Job, nil
		}
		var ae *Error
		if errors.As(err, &ae) || ctx.Err() != nil || time.Now().Add(wait).After(give) ||
			(attempt == 0 && errors.Is(err, ErrNoDaemon)) || strings.Contains(err.Error(), "decoding the answer") {
			return nil, err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, err
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// SubmitRetryFor is how long Client.Submit retries a submission whose
// connection failed.
const SubmitRetryFor = 30 * time.Second

// NewIdempotencyKey returns a new random idempotency key (128 bits, hex).
func NewIdempotencyKey() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error()) // never on Linux
	}
	return hex.EncodeToString(b[:])
}

// Job returns one job with its events.
func (c *Client) Job(ctx context.Context, id string) (*bridge.Job, error) {
	var j bridge.Job
	if err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// List returns one page of jobs the filter selects (Filter.Limit 0 means
// the server's default page, DefaultLimit) and the After value of the next
// page ("" when this was the last).
func (c *Client) List(ctx context.Context, f bridge.Filter) ([]*bridge.Job, string, error) {
	var r ListResponse
	if err := c.do(ctx, http.MethodGet, "/v1/jobs?"+FilterQuery(f).Encode(), nil, &r); err != nil {
		return nil, "", err
	}
	return r.Jobs, r.Next, nil
}

// ListAll follows the pages to the end.
func (c *Client) ListAll(ctx context.Context, f bridge.Filter) ([]*bridge.Job, error) {
	return c.ListN(ctx, f, 0)
}

// ListN follows the pages (of Filter.Limit jobs each) until it has n jobs
// or the list ends, and returns at most n; n <= 0 means all.
func (c *Client) ListN(ctx context.Context, f bridge.Filter, n int) ([]*bridge.Job, error) {
	var all []*bridge.Job
	for n <= 0 || len(all) < n {
		js, next, err := c.List(ctx, f)
		if err != nil {
			return nil, err
		}
		all = append(all, js...)
		if next == "" {
			break
		}
		f.After = next
	}
	if n > 0 && len(all) > n {
		all = all[:n]
	}
	return all, nil
}

// FilterQuery encodes a filter as GET /v1/jobs query parameters.
func FilterQuery(f bridge.Filter) url.Values {
	q := url.Values{}
	for _, s := range f.States {
		q.Add("state", string(s))
	}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("site", f.Site)
	set("name", f.Name)
	set("parent", f.Parent)
	set("after", f.After)
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Events {
		q.Set("events", "true")
	}
	if f.Newest {
		q.Set("order", "newest")
	}
	return q
}

// Events returns a job's history.
func (c *Client) Events(ctx context.Context, id string) ([]bridge.Event, error) {
	var r EventsResponse
	if err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/events", nil, &r); err != nil {
		return nil, err
	}
	return r.Events, nil
}

// Cancel cancels a job and returns it as it is after the cancellation.
func (c *Client) Cancel(ctx context.Context, id string) (*bridge.Job, error) {
	var j bridge.Job
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/cancel", nil, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// Control holds, releases or requeues a job (action "hold", "release" or
// "requeue") and returns it as it is after the change.
func (c *Client) Control(ctx context.Context, id, action string) (*bridge.Job, error) {
	var j bridge.Job
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/"+url.PathEscape(action), nil, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// Sites lists the broker's site names.
func (c *Client) Sites(ctx context.Context) ([]string, error) {
	r, err := c.SiteStatus(ctx)
	if err != nil {
		return nil, err
	}
	return r.Sites, nil
}

// SiteStatus returns the whole answer of GET /v1/sites: the names and,
// from a daemon that records site health, a record per site (Details is
// nil from an older daemon, which lists names only).
func (c *Client) SiteStatus(ctx context.Context) (*SitesResponse, error) {
	var r SitesResponse
	if err := c.do(ctx, http.MethodGet, "/v1/sites", nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Health asks whether the daemon is up and well. An unhealthy daemon gives
// an *Error with status 503.
func (c *Client) Health(ctx context.Context) (*HealthResponse, error) {
	var r HealthResponse
	if err := c.do(ctx, http.MethodGet, "/v1/health", nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// OpenAPI fetches the daemon's OpenAPI document.
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/openapi.yaml", nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &Error{Status: resp.StatusCode, Code: CodeInternal, Msg: resp.Status}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.maxResponse()+1))
	if err == nil && int64(len(b)) > c.maxResponse() {
		return nil, fmt.Errorf("api: GET /openapi.yaml: the answer is larger than %d bytes (MaxResponse)", c.maxResponse())
	}
	return b, err
}
