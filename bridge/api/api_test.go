package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/store"
)

var t0 = time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)

// storeBroker is a fake broker that queues into a real bridge.Store: enough
// of the broker's contract (validation, ids, cancel) for the API.
type storeBroker struct {
	st     bridge.Store
	sites  []string
	mu     sync.Mutex // cancel is read-modify-write
	health error
}

var _ api.Broker = (*storeBroker)(nil)

func (b *storeBroker) Submit(ctx context.Context, req bridge.Request, now time.Time) (*bridge.Job, error) {
	if req.Nodes < 1 {
		return nil, fmt.Errorf("%w: nodes must be >= 1, got %d", bridge.ErrBadRequest, req.Nodes)
	}
	for _, s := range req.Sites {
		if !slices.Contains(b.sites, s) {
			return nil, fmt.Errorf("%w: sites names %q", bridge.ErrUnknownSite, s)
		}
	}
	n, err := b.st.NextID(ctx)
	if err != nil {
		return nil, err
	}
	j := &bridge.Job{ID: fmt.Sprintf("g%06d", n), Req: req, State: bridge.Queued, Submit: now, ExitCode: -1,
		Events: []bridge.Event{{Time: now, Kind: "submitted", Msg: fmt.Sprintf("%d node(s)", req.Nodes)}}}
	if err := b.st.Put(ctx, j); err != nil {
		return nil, err
	}
	return j, nil
}

func (b *storeBroker) Job(id string) (*bridge.Job, error) { return b.st.Get(context.Background(), id) }
func (b *storeBroker) ListJobs(ctx context.Context, f bridge.Filter) ([]*bridge.Job, error) {
	return b.st.List(ctx, f)
}
func (b *storeBroker) Cancel(ctx context.Context, id string, now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	j, err := b.st.Get(ctx, id)
	if err != nil {
		return err
	}
	if j.State.Final() {
		return fmt.Errorf("%w: %s is %s", bridge.ErrFinal, id, j.State)
	}
	j.State, j.End = bridge.Cancelled, now
	j.Events = append(j.Events, bridge.Event{Time: now, Kind: "cancelled", Msg: "cancelled by the user"})
	return b.st.Put(ctx, j)
}
func (b *storeBroker) SiteNames() []string { return slices.Clone(b.sites) }
func (b *storeBroker) Health(context.Context) error {
	return b.health
}

func newSQLiteBroker(t testing.TB) *storeBroker {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "gridsub.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &storeBroker{st: st, sites: []string{"Beijing", "Shanghai"}}
}

// serveUnix serves b on a unix socket in a temp dir and returns a client.
func serveUnix(t testing.TB, b api.Broker) (*api.Client, string) {
	t.Helper()
	// Unix socket paths are limited to 108 bytes; t.TempDir() can exceed it.
	dir, err := os.MkdirTemp("", "gs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "run", "gridsub.sock")
	l, err := api.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(b, api.ServerOptions{Now: func() time.Time { return t0 }})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return api.NewUnixClient(sock), sock
}

func req(name string, nodes int) bridge.Request {
	return bridge.Request{Name: name, Nodes: nodes, Command: []string{"./run"}, Estimate: time.Hour,
		Env: map[string]string{"K": "v"}, Sites: []string{"Beijing"}}
}

func TestEndToEndOverUnixSocket(t *testing.T) {
	ctx := context.Background()
	b := newSQLiteBroker(t)
	c, sock := serveUnix(t, b)

	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a socket with 0600", fi.Mode())
	}

	j, err := c.Submit(ctx, req("first", 4))
	if err != nil {
		t.Fatal(err)
	}
	if j.ID == "" || j.State != bridge.Queued || !j.Submit.Equal(t0) || j.Req.Env["K"] != "v" {
		t.Fatalf("Submit returned %+v", j)
	}
	j2, err := c.Submit(ctx, req("second", 1))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Job(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, j) {
		t.Fatalf("Job returned\n%+v\nwant what Submit returned\n%+v", got, j)
	}
	evs, err := c.Events(ctx, j.ID)
	if err != nil || len(evs) != 1 || evs[0].Kind != "submitted" {
		t.Fatalf("Events = %v, %v", evs, err)
	}

	js, next, err := c.List(ctx, bridge.Filter{States: []bridge.JobState{bridge.Queued}, Name: "second"})
	if err != nil || next != "" || len(js) != 1 || js[0].ID != j2.ID || js[0].Events != nil {
		t.Fatalf("List(queued, second) = %v, %q, %v", js, next, err)
	}

	cj, err := c.Cancel(ctx, j.ID)
	if err != nil || cj.State != bridge.Cancelled || len(cj.Events) != 2 {
		t.Fatalf("Cancel = %+v, %v", cj, err)
	}
	_, err = c.Cancel(ctx, j.ID)
	var ae *api.Error
	if !errors.Is(err, bridge.ErrFinal) || !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != api.CodeFinal {
		t.Fatalf("second Cancel = %v, want a 409 final error wrapping bridge.ErrFinal", err)
	}
	js, _, err = c.List(ctx, bridge.Filter{States: []bridge.JobState{bridge.Cancelled}, Events: true})
	if err != nil || len(js) != 1 || len(js[0].Events) != 2 {
		t.Fatalf("List(cancelled, events) = %v, %v", js, err)
	}

	if _, err := c.Job(ctx, "g999999"); !errors.Is(err, bridge.ErrNotFound) || !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("Job(unknown) = %v, want 404 wrapping bridge.ErrNotFound", err)
	}
	if _, err := c.Events(ctx, "nope"); !errors.Is(err, bridge.ErrNotFound) {
		t.Fatalf("Events(unknown) = %v", err)
	}
	if _, err := c.Submit(ctx, req("bad", 0)); !errors.Is(err, bridge.ErrBadRequest) || !strings.Contains(err.Error(), "nodes must be >= 1") {
		t.Fatalf("Submit(0 nodes) = %v, want ErrBadRequest with the broker's reason", err)
	}
	r := req("x", 1)
	r.Sites = []string{"Mars"}
	if _, err := c.Submit(ctx, r); !errors.Is(err, bridge.ErrUnknownSite) || !errors.As(err, &ae) || ae.Status != 400 {
		t.Fatalf("Submit(unknown site) = %v, want 400 wrapping ErrUnknownSite", err)
	}

	sites, err := c.Sites(ctx)
	if err != nil || !slices.Equal(sites, []string{"Beijing", "Shanghai"}) {
		t.Fatalf("Sites = %v, %v", sites, err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Status != "ok" || h.Sites != 2 {
		t.Fatalf("Health = %+v, %v", h, err)
	}
	b.health = fmt.Errorf("%w: store locked", store.ErrUnavailable)
	if _, err := c.Health(ctx); !errors.Is(err, store.ErrUnavailable) || !errors.As(err, &ae) || ae.Status != 503 {
		t.Fatalf("Health when unhealthy = %v, want 503 unavailable", err)
	}
	doc, err := c.OpenAPI(ctx)
	if err != nil || string(doc) != string(api.OpenAPI()) {
		t.Fatalf("GET /openapi.yaml: %v (%d bytes)", err, len(doc))
	}
}

func TestPaging(t *testing.T) {
	ctx := context.Background()
	c, _ := serveUnix(t, newSQLiteBroker(t))
	var want []string
	for i := range 10 {
		j, err := c.Submit(ctx, req(fmt.Sprintf("p%d", i), 1))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, j.ID)
	}
	js, next, err := c.List(ctx, bridge.Filter{Limit: 4})
	if err != nil || len(js) != 4 || next != want[3] {
		t.Fatalf("first page: %d jobs, next %q, %v; want 4, %q", len(js), next, err, want[3])
	}
	all, err := c.ListAll(ctx, bridge.Filter{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range all {
		got = append(got, j.ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ListAll = %v, want %v", got, want)
	}
	if _, _, err := c.List(ctx, bridge.Filter{After: "g999999"}); !errors.Is(err, bridge.ErrNotFound) {
		t.Fatalf("List after an unknown id = %v, want not found", err)
	}
	// ListN stops paging once it has n: 5 from pages of 3, then the last 4
	// of the newest-first listing.
	five, err := c.ListN(ctx, bridge.Filter{Limit: 3}, 5)
	if err != nil || !slices.Equal(ids(five), want[:5]) {
		t.Fatalf("ListN(5) = %v, %v; want %v", ids(five), err, want[:5])
	}
	// Newest first, paged towards older jobs, through the SQLite store.
	rev := slices.Clone(want)
	slices.Reverse(rev)
	js, next, err = c.List(ctx, bridge.Filter{Limit: 4, Newest: true})
	if err != nil || len(js) != 4 || next != rev[3] || js[0].ID != rev[0] {
		t.Fatalf("newest page: %v, next %q, %v; want %v, next %q", ids(js), next, err, rev[:4], rev[3])
	}
	all, err = c.ListAll(ctx, bridge.Filter{Limit: 3, Newest: true})
	if err != nil || !slices.Equal(ids(all), rev) {
		t.Fatalf("ListAll newest = %v, %v; want %v", ids(all), err, rev)
	}
}

func ids(js []*bridge.Job) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

// funcBroker returns whatever error it is told to, for the status mapping.
type funcBroker struct{ err error }

func (f funcBroker) Submit(context.Context, bridge.Request, time.Time) (*bridge.Job, error) {
	return nil, f.err
}
func (f funcBroker) Job(string) (*bridge.Job, error) { return nil, f.err }
func (f funcBroker) ListJobs(context.Context, bridge.Filter) ([]*bridge.Job, error) {
	return nil, f.err
}
func (f funcBroker) Cancel(context.Context, string, time.Time) error { return f.err }
func (f funcBroker) SiteNames() []string                             { return nil }

func TestErrorMapping(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("x: %w", bridge.ErrNotFound), 404, api.CodeNotFound},
		{fmt.Errorf("x: %w", bridge.ErrBadRequest), 400, api.CodeBadRequest},
		{fmt.Errorf("x: %w", bridge.ErrUnknownSite), 400, api.CodeUnknownSite},
		{fmt.Errorf("x: %w", bridge.ErrFinal), 409, api.CodeFinal},
		{fmt.Errorf("x: %w", store.ErrDiskFull), 507, api.CodeDiskFull},
		{fmt.Errorf("x: %w", store.ErrUnavailable), 503, api.CodeUnavailable},
		{errors.New("the cycle broke"), 500, api.CodeInternal},
	} {
		ts := httptest.NewServer(api.NewServer(funcBroker{c.err}, api.ServerOptions{}).Handler())
		cl := api.NewClient(ts.URL, "", ts.Client())
		for name, call := range map[string]func() error{
			"submit": func() error { _, err := cl.Submit(context.Background(), req("x", 1)); return err },
			"get":    func() error { _, err := cl.Job(context.Background(), "g1"); return err },
			"list":   func() error { _, _, err := cl.List(context.Background(), bridge.Filter{}); return err },
			"cancel": func() error { _, err := cl.Cancel(context.Background(), "g1"); return err },
		} {
			err := call()
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != c.status || ae.Code != c.code || !strings.Contains(ae.Msg, c.err.Error()) {
				t.Errorf("%s with %v: %v, want status %d code %s", name, c.err, err, c.status, c.code)
			}
			if sentinel := errors.Unwrap(c.err); sentinel != nil && !errors.Is(err, sentinel) {
				t.Errorf("%s with %v: client error %v does not unwrap to the sentinel", name, c.err, err)
			}
		}
		ts.Close()
	}
}

func TestBadInput(t *testing.T) {
	ts := httptest.NewServer(api.NewServer(newSQLiteBroker(t), api.ServerOptions{}).Handler())
	defer ts.Close()
	for _, c := range []struct {
		method, path, body string
		status             int
		code, says         string
	}{
		{"POST", "/v1/jobs", `{"Name":"x","Nodez":3}`, 400, api.CodeBadRequest, `unknown field "Nodez"`},
		{"POST", "/v1/jobs", `{"Name":`, 400, api.CodeBadRequest, "not a job request"},
		{"POST", "/v1/jobs", `{"Nodes":1,"Command":["a"],"Estimate":1}{}`, 400, api.CodeBadRequest, "data after"},
		{"POST", "/v1/jobs", `{"Nodes":"many"}`, 400, api.CodeBadRequest, "Nodes"},
		{"GET", "/v1/jobs?state=runing", "", 400, api.CodeBadRequest, `state "runing"`},
		{"GET", "/v1/jobs?limit=0", "", 400, api.CodeBadRequest, "limit"},
		{"GET", "/v1/jobs?limit=abc", "", 400, api.CodeBadRequest, "limit"},
		{"GET", "/v1/jobs?events=maybe", "", 400, api.CodeBadRequest, "events"},
		{"GET", "/v1/jobs?sate=running", "", 400, api.CodeBadRequest, `unknown query parameter "sate"`},
		{"GET", "/v1/jobs?order=sideways", "", 400, api.CodeBadRequest, `order "sideways"; want oldest (the default) or newest`},
		{"GET", "/v2/things", "", 404, "no_route", "no route"},
	} {
		rq, _ := http.NewRequest(c.method, ts.URL+c.path, strings.NewReader(c.body))
		resp, err := ts.Client().Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		var eb api.ErrorBody
		json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode != c.status || eb.Code != c.code || !strings.Contains(eb.Error, c.says) {
			t.Errorf("%s %s %s: %d %+v; want %d %s saying %q", c.method, c.path, c.body, resp.StatusCode, eb, c.status, c.code, c.says)
		}
	}
	// A body over the limit is refused, not read to the end.
	srv := api.NewServer(newSQLiteBroker(t), api.ServerOptions{MaxBody: 1024})
	ts2 := httptest.NewServer(srv.Handler())
	defer ts2.Close()
	big := `{"Name":"` + strings.Repeat("x", 4096) + `","Nodes":1}`
	resp, err := ts2.Client().Post(ts2.URL+"/v1/jobs", "application/json", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	var eb api.ErrorBody
	json.NewDecoder(resp.Body).Decode(&eb)
	resp.Body.Close()
	if resp.StatusCode != 413 || eb.Code != api.CodeTooLarge || !strings.Contains(eb.Error, "limit of 1024 bytes") {
		t.Fatalf("oversized body: status %d %+v, want 413 too_large naming the limit", resp.StatusCode, eb)
	}
}

func TestTokenOverTCP(t *testing.T) {
	b := newSQLiteBroker(t)
	srv := api.NewServer(b, api.ServerOptions{Token: testToken})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	for _, tok := range []string{"", "wrong"} {
		_, err := api.NewClient(ts.URL, tok, ts.Client()).Sites(context.Background())
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != 401 || ae.Code != api.CodeUnauthorized {
			t.Fatalf("token %q: %v, want 401 unauthorized", tok, err)
		}
	}
	resp, err := ts.Client().Get(ts.URL + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("openapi.yaml without a token: %d, want 401", resp.StatusCode)
	}
	c := api.NewClient(ts.URL, testToken, ts.Client())
	if _, err := c.Submit(context.Background(), req("tcp", 2)); err != nil {
		t.Fatalf("with the token: %v", err)
	}

	// A TCP listener without a token is refused outright.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = api.NewServer(b, api.ServerOptions{}).Serve(l)
	if !errors.Is(err, api.ErrNoToken) {
		t.Fatalf("Serve(TCP, no token) = %v, want ErrNoToken", err)
	}
}

func TestListenUnix(t *testing.T) {
	dir, err := os.MkdirTemp("", "gs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "gridsub.sock")

	t.Run("no daemon", func(t *testing.T) {
		_, err := api.NewUnixClient(sock).Health(context.Background())
		if !errors.Is(err, api.ErrNoDaemon) || !strings.Contains(err.Error(), sock) {
			t.Fatalf("client without a daemon: %v, want ErrNoDaemon naming the socket", err)
		}
	})
	t.Run("in use", func(t *testing.T) {
		_, s := serveUnix(t, newSQLiteBroker(t))
		_, err := api.ListenUnix(s)
		if !errors.Is(err, api.ErrInUse) {
			t.Fatalf("second ListenUnix = %v, want ErrInUse", err)
		}
		// The live server is unharmed.
		if _, err := api.NewUnixClient(s).Health(context.Background()); err != nil {
			t.Fatalf("the first server after the refused second: %v", err)
		}
	})
	t.Run("stale socket", func(t *testing.T) {
		// A server that died without removing its socket.
		ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ul.SetUnlinkOnClose(false)
		ul.Close()
		if _, err := os.Stat(sock); err != nil {
			t.Fatalf("stale socket not left behind: %v", err)
		}
		l, err := api.ListenUnix(sock)
		if err != nil {
			t.Fatalf("ListenUnix over a stale socket: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Close left the socket file: %v", err)
		}
	})
	t.Run("not a socket", func(t *testing.T) {
		if err := os.WriteFile(sock, []byte("my notes"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := api.ListenUnix(sock)
		if !errors.Is(err, api.ErrNotSocket) {
			t.Fatalf("ListenUnix over a regular file = %v, want ErrNotSocket", err)
		}
		if b, _ := os.ReadFile(sock); string(b) != "my notes" {
			t.Fatalf("the file was changed: %q", b)
		}
		os.Remove(sock)
	})
	t.Run("no leftovers", func(t *testing.T) {
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			if strings.HasPrefix(e.Name(), ".gridsub-sock-") {
				t.Fatalf("temporary directory left behind: %s", e.Name())
			}
		}
	})
}

// The OpenAPI document and the server's routes describe the same API.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                               `yaml:"openapi"`
		Paths   map[string]map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.yaml is not YAML: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi: %q, want 3.x", doc.OpenAPI)
	}
	var documented []string
	for p, ops := range doc.Paths {
		for m, op := range ops {
			if _, ok := op["responses"]; !ok {
				t.Errorf("%s %s has no responses", m, p)
			}
			documented = append(documented, strings.ToUpper(m)+" "+p)
		}
	}
	slices.Sort(documented)
	routes := slices.Sorted(slices.Values(api.Routes))
	if !slices.Equal(documented, routes) {
		t.Fatalf("openapi.yaml documents\n%v\nthe server routes\n%v", documented, routes)
	}
	// Every schema reference resolves.
	var raw map[string]any
	yaml.Unmarshal(api.OpenAPI(), &raw)
	comps := raw["components"].(map[string]any)
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "$ref" {
					parts := strings.Split(strings.TrimPrefix(e.(string), "#/components/"), "/")
					sec, _ := comps[parts[0]].(map[string]any)
					if _, ok := sec[parts[1]]; !ok {
						t.Errorf("dangling $ref %s", e)
					}
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(raw)
}

// The Request schema names every field of bridge.Request (the server
// refuses unknown fields, so a missing one would be a documented lie).
func TestOpenAPIRequestFields(t *testing.T) {
	var raw struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(api.OpenAPI(), &raw); err != nil {
		t.Fatal(err)
	}
	for name, typ := range map[string]reflect.Type{
		"Request": reflect.TypeFor[bridge.Request](), "Job": reflect.TypeFor[bridge.Job](),
		"Component": reflect.TypeFor[bridge.Component](), "Event": reflect.TypeFor[bridge.Event](),
		"Site": reflect.TypeFor[api.Site](),
	} {
		props := raw.Components.Schemas[name].Properties
		for f := range typ.Fields() {
			if !f.IsExported() {
				continue
			}
			key := f.Name
			if tag := strings.Split(f.Tag.Get("json"), ",")[0]; tag != "" {
				key = tag
			}
			if _, ok := props[key]; !ok {
				t.Errorf("schema %s lacks field %s", name, key)
			}
		}
		if len(props) != countExported(typ) {
			t.Errorf("schema %s has %d properties, the Go type %d exported fields", name, len(props), countExported(typ))
		}
	}
}

func countExported(t reflect.Type) int {
	n := 0
	for f := range t.Fields() {
		if f.IsExported() {
			n++
		}
	}
	return n
}

// 50 clients submit and query at once over the socket; every submission
// is stored once, every query answers.
func TestConcurrentClients(t *testing.T) {
	ctx := context.Background()
	b := newSQLiteBroker(t)
	c, _ := serveUnix(t, b)
	const clients, each = 50, 20
	var wg sync.WaitGroup
	errc := make(chan error, clients)
	var mu sync.Mutex
	ids := map[string]bool{}
	for k := range clients {
		wg.Go(func() {
			for i := range each {
				j, err := c.Submit(ctx, req(fmt.Sprintf("c%d", k), 1+i%4))
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				dup := ids[j.ID]
				ids[j.ID] = true
				mu.Unlock()
				if dup {
					errc <- fmt.Errorf("id %s handed out twice", j.ID)
					return
				}
				if i%5 == 0 {
					if _, err := c.Cancel(ctx, j.ID); err != nil {
						errc <- err
						return
					}
				}
				got, err := c.Job(ctx, j.ID)
				if err != nil {
					errc <- err
					return
				}
				if want := bridge.Queued; i%5 == 0 {
					want = bridge.Cancelled
					if got.State != want {
						errc <- fmt.Errorf("%s is %s after cancel", j.ID, got.State)
						return
					}
				}
				js, _, err := c.List(ctx, bridge.Filter{Name: fmt.Sprintf("c%d", k)})
				if err != nil {
					errc <- err
					return
				}
				if len(js) != i+1 {
					errc <- fmt.Errorf("client %d sees %d of its %d jobs", k, len(js), i+1)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	all, err := c.ListAll(ctx, bridge.Filter{})
	if err != nil || len(all) != clients*each {
		t.Fatalf("%d jobs stored, want %d (%v)", len(all), clients*each, err)
	}
	cancelled, err := c.ListAll(ctx, bridge.Filter{States: []bridge.JobState{bridge.Cancelled}})
	if err != nil || len(cancelled) != clients*each/5 {
		t.Fatalf("%d cancelled, want %d (%v)", len(cancelled), clients*each/5, err)
	}
}

// BenchmarkSubmitOverSocket: durable submissions per second through the
// API (unix socket, JSON, the SQLite store committing before the reply),
// by 50 concurrent clients.
func BenchmarkSubmitOverSocket(b *testing.B) {
	for _, clients := range []int{1, 50} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			c, _ := serveUnix(b, newSQLiteBroker(b))
			ctx := context.Background()
			r := req("bench", 4)
			var wg sync.WaitGroup
			work := make(chan struct{}, b.N)
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			b.ResetTimer()
			errc := make(chan error, clients)
			for range clients {
				wg.Go(func() {
					for range work {
						if _, err := c.Submit(ctx, r); err != nil {
							errc <- err
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
			close(errc)
			for err := range errc {
				b.Fatal(err)
			}
		})
	}
}
