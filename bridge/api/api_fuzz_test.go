package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/jobfile"
	"github.com/gridsub/gridsub/bridge/store"
)

// Native fuzz targets of the API's request decoding, through the real
// http.Handler in front of a real *bridge.Broker on the SQLite store (no
// cycle runs: the sites are idle). scripts/fuzz.sh runs each target for a
// bounded time.

var fuzzNow = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// fuzzHandler is the API handler of a real broker on a fresh SQLite store,
// made once per fuzzing process. The store is on /dev/shm when there is one:
// each submission is a durable commit, and on a disk fsync would bound the
// fuzzer to a few inputs a second.
func fuzzHandler(f *testing.F) http.Handler {
	f.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "gridsub-fuzz-")
	if err != nil {
		dir = f.TempDir()
	} else {
		f.Cleanup(func() { os.RemoveAll(dir) })
	}
	st, err := store.Open(context.Background(), filepath.Join(dir, "gridsub.db"), store.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	srv := api.NewServer(realBrokerOn(f, st), api.ServerOptions{Now: func() time.Time { return fuzzNow }})
	return srv.Handler()
}

// do runs one request through h; a query is set as it arrives, raw.
func do(h http.Handler, method, target string, body []byte) *httptest.ResponseRecorder {
	p, query, _ := strings.Cut(target, "?")
	r := httptest.NewRequest(method, "http://gridsub"+p, bytes.NewReader(body))
	r.URL.RawQuery = query
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// checkErrorBody holds an error response to the API's contract: a JSON
// ErrorBody with a message and one of the expected codes.
func checkErrorBody(t *testing.T, w *httptest.ResponseRecorder, codes ...string) {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("status %d with Content-Type %q", w.Code, ct)
	}
	var e api.ErrorBody
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == "" || !slices.Contains(codes, e.Code) {
		t.Fatalf("status %d: error body %q (%v); want a message and a code in %v", w.Code, w.Body.String(), err, codes)
	}
}

// exampleRequests are the example job files as the CLI would submit them.
func exampleRequests(f *testing.F) [][]byte {
	f.Helper()
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) < 10 {
		f.Fatalf("want at least 10 example job files, found %d (%v)", len(files), err)
	}
	var out [][]byte
	for _, file := range files {
		j, err := jobfile.Load(file)
		if err != nil {
			f.Fatalf("%s: %v", file, err)
		}
		times, _ := j.Resolve(fuzzNow)
		r := bridge.Request{Name: j.Name, Command: j.Argv(), Script: j.Script, Env: j.Env, WorkDir: j.WorkDir,
			Nodes: j.Resources.Nodes, CoresPerNode: j.Resources.CoresPerNode, Estimate: j.Resources.Walltime,
			Outputs: j.Outputs, Origin: j.Scheduling.Origin, DataSize: j.Scheduling.DataSize, Sites: j.Scheduling.Sites,
			Prefer: j.Scheduling.Prefer, NoSplit: j.Scheduling.NoSplit, Deadline: times.Deadline, QoS: string(j.Scheduling.QoS),
			OutputDir: "out/" + bridge.IDPlaceholder}
		r.Sim.Runtime, r.Sim.ExitCode = j.SimRuntime(), j.Simulate.ExitCode
		for _, in := range j.Spec("g").Inputs {
			r.Inputs = append(r.Inputs, in)
		}
		if rv := j.Scheduling.Reservation; rv != nil {
			r.Window = &bridge.Window{Earliest: times.EarliestStart, Latest: times.LatestEnd}
		}
		// As given, and without the local paths, which a broker refuses
		// outside its configured roots.
		plain := r
		plain.Inputs, plain.OutputDir = nil, ""
		for _, x := range []bridge.Request{r, plain} {
			data, err := json.Marshal(x)
			if err != nil {
				f.Fatal(err)
			}
			out = append(out, data)
		}
	}
	return out
}

// FuzzAPISubmit posts arbitrary bodies to POST /v1/jobs. The answer is 201
// with the job, or a 4xx with a JSON error naming the problem; never a 5xx
// or a panic. An accepted job is stored as sent: GET /v1/jobs/{id} returns
// it, and its request is exactly the body decoded as the API documents it
// (the {id} placeholder of OutputDir replaced), and it obeys the rules of a
// job file (checkAccepted). The seeds include issue 12's hostile requests.
func FuzzAPISubmit(f *testing.F) {
	for _, b := range exampleRequests(f) {
		f.Add(b)
	}
	for _, s := range []string{`{}`, `null`, `[]`, `{"Name":"x","Nodes":1,"Estimate":1,"Command":["x"]}{}`, `{"Nodes":1e40}`, `{"Unknown":1}`,
		`{"Name":"x","Nodes":1,"Estimate":3600000000000,"Command":["x"],"Window":{"Earliest":"2026-11-24T13:00:00Z","Latest":"2026-11-24T12:00:00Z"}}`,
		`{"Name":"x","Nodes":1,"Estimate":3600000000000,"Script":"true","Sites":["Mars"]}`,
		`{"Name":"a","Nodes":1,"Estimate":60000000000,"Command":["x"],"Array":"1-10%2"}`,
		`{"Name":"s","Nodes":1,"Estimate":60000000000,"Command":["x"],"Sweep":{"Params":[{"Name":"A","Values":["1","2"]}],"Limit":1}}`,
		`{"Name":"p","Steps":[{"Name":"one","Nodes":1,"Estimate":60000000000,"Command":["x"]},{"Name":"two","Nodes":1,"Estimate":60000000000,"Command":["x"],"AfterOK":["one"]}]}`} {
		f.Add([]byte(s))
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		w := do(h, http.MethodPost, "/v1/jobs", body)
		switch {
		case w.Code == http.StatusCreated:
		case w.Code == http.StatusBadRequest:
			checkErrorBody(t, w, api.CodeBadRequest, api.CodeUnknownSite)
			return
		case w.Code == http.StatusUnprocessableEntity: // a job that can never run (its strict deadline)
			checkErrorBody(t, w, api.CodeInfeasible)
			return
		case w.Code == http.StatusRequestEntityTooLarge:
			checkErrorBody(t, w, api.CodeBadRequest)
			return
		default:
			t.Fatalf("POST /v1/jobs %q: status %d: %s", body, w.Code, w.Body.String())
		}
		var resp api.SubmitResponse
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp.ID == "" || resp.Job == nil || resp.Job.ID != resp.ID {
			t.Fatalf("201 with body %q (%v)", w.Body.String(), err)
		}
		if loc := w.Header().Get("Location"); loc != "/v1/jobs/"+resp.ID {
			t.Fatalf("Location %q for job %s", loc, resp.ID)
		}
		var sent bridge.Request
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sent); err != nil {
			t.Fatalf("the API accepted a body that does not decode: %v", err)
		}
		if len(sent.Steps) > 0 { // a pipeline: each step is a job
			for _, st := range sent.Steps {
				checkAccepted(t, st)
			}
		} else {
			checkAccepted(t, sent)
		}
		sent.OutputDir = strings.ReplaceAll(sent.OutputDir, bridge.IDPlaceholder, resp.ID)
		checkStoredAsSent(t, h, resp.ID, sent)
	})
}

// The rules every accepted job obeys (issue 12: one validation at the
// boundary every job crosses), written out again here rather than taken
// from the broker, so that the target checks the broker against them.
var (
	wantEnvName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	reservedEnv  = []string{"GRIDSUB_", "SLURM_", "PBS_"}
	wantQoS      = []string{"", "auto", "high", "low", "none"}
	maxEstimate  = 100 * 365 * 24 * time.Hour // far beyond any documented limit, far below an overflow
	earliestTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
)

// confinedRel reports whether p is a relative path that stays inside its
// directory.
func confinedRel(p string) bool {
	if p == "" || strings.ContainsRune(p, 0) || path.IsAbs(p) || strings.HasPrefix(p, "~") || strings.Contains(p, `\`) {
		return false
	}
	c := path.Clean(p)
	return c != "." && c != ".." && !strings.HasPrefix(c, "../")
}

// checkAccepted holds an accepted request to the rules a job file obeys:
// remote paths confined to the job directory, environment names valid and
// not reserved, every number in range.
func checkAccepted(t *testing.T, r bridge.Request) {
	t.Helper()
	for i, o := range r.Outputs {
		if !confinedRel(o) {
			t.Errorf("accepted Outputs[%d] %q: not confined to the job directory", i, o)
		}
	}
	if r.WorkDir != "" && !confinedRel(r.WorkDir) {
		t.Errorf("accepted WorkDir %q: not confined to the job directory", r.WorkDir)
	}
	for i, in := range r.Inputs {
		if !confinedRel(in.Remote) {
			t.Errorf("accepted Inputs[%d].Remote %q: not confined to the job directory", i, in.Remote)
		}
		if in.Local == "" || strings.ContainsRune(in.Local, 0) {
			t.Errorf("accepted Inputs[%d].Local %q", i, in.Local)
		}
	}
	for k, v := range r.Env {
		if !wantEnvName.MatchString(k) || strings.ContainsRune(v, 0) {
			t.Errorf("accepted Env[%q] = %q", k, v)
		}
		for _, p := range reservedEnv {
			if strings.HasPrefix(k, p) {
				t.Errorf("accepted the reserved Env name %q", k)
			}
		}
	}
	if (len(r.Command) > 0) == (r.Script != "") || len(r.Command) > 0 && r.Command[0] == "" {
		t.Errorf("accepted Command %q with Script %q: want exactly one, and a program to run", r.Command, r.Script)
	}
	for _, w := range r.Command {
		if strings.ContainsRune(w, 0) {
			t.Errorf("accepted a command word with a NUL: %q", w)
		}
	}
	if r.Nodes < 1 || r.CoresPerNode < 0 || r.DataSize < 0 || r.Sim.Runtime < 0 {
		t.Errorf("accepted Nodes %d, CoresPerNode %d, DataSize %d, Sim.Runtime %v", r.Nodes, r.CoresPerNode, r.DataSize, r.Sim.Runtime)
	}
	if r.Estimate <= 0 || r.Estimate > maxEstimate {
		t.Errorf("accepted Estimate %v", r.Estimate)
	}
	if !slices.Contains(wantQoS, r.QoS) {
		t.Errorf("accepted QoS %q", r.QoS)
	}
	if !r.Deadline.IsZero() && r.Deadline.Before(earliestTime) {
		t.Errorf("accepted Deadline %v", r.Deadline)
	}
	if w := r.Window; w != nil && (w.Earliest.Before(earliestTime) || w.Latest.Before(w.Earliest)) {
		t.Errorf("accepted Window %v .. %v", w.Earliest, w.Latest)
	}
}

// checkStoredAsSent fetches job id and compares its request with sent. The
// broker may normalise what it stores (an absolute output directory, say),
// so the comparison is of the fields a client cannot see changed.
func checkStoredAsSent(t *testing.T, h http.Handler, id string, sent bridge.Request) {
	t.Helper()
	w := do(h, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /v1/jobs/%s after a 201: %d %s", id, w.Code, w.Body.String())
	}
	var j bridge.Job
	if err := json.Unmarshal(w.Body.Bytes(), &j); err != nil || j.ID != id {
		t.Fatalf("GET /v1/jobs/%s: %q (%v)", id, w.Body.String(), err)
	}
	got := j.Req
	// Local paths are resolved against the broker's roots where the broker
	// has them; compare what remains literal.
	sent.OutputDir, got.OutputDir = "", ""
	// A pipeline's steps get its output directory, and their dependencies
	// on earlier steps by name become those steps' ids.
	if len(sent.Steps) == len(got.Steps) {
		for i := range sent.Steps {
			s, g := &sent.Steps[i], &got.Steps[i]
			s.OutputDir, g.OutputDir = "", ""
			for k := range s.Inputs {
				if k < len(g.Inputs) {
					s.Inputs[k].Local, g.Inputs[k].Local = "", ""
				}
			}
			for _, lists := range [][2][]string{{s.After, g.After}, {s.AfterOK, g.AfterOK}, {s.AfterAny, g.AfterAny}} {
				for k := range min(len(lists[0]), len(lists[1])) {
					if at := slices.IndexFunc(sent.Steps[:i], func(r bridge.Request) bool { return r.Name == lists[0][k] }); at >= 0 &&
						lists[1][k] == bridge.ElementID(id, at+1) {
						lists[1][k] = lists[0][k]
					}
				}
			}
		}
	}
	for i := range sent.Inputs {
		if i < len(got.Inputs) {
			sent.Inputs[i].Local, got.Inputs[i].Local = "", ""
		}
	}
	a, _ := json.Marshal(sent)
	b, _ := json.Marshal(got)
	if !bytes.Equal(a, b) {
		t.Fatalf("job %s stored differently from what was sent:\nsent:   %s\nstored: %s", id, a, b)
	}
}

// FuzzAPIList sends arbitrary query strings to GET /v1/jobs over a store
// holding jobs of several names and states. The answer is 200 with jobs
// matching the filter (states, name, site; at most limit; oldest first
// unless order=newest) or a 400 naming the bad parameter.
func FuzzAPIList(f *testing.F) {
	for _, q := range []string{"", "state=queued", "state=queued,cancelled&limit=2", "state=running&state=failed", "name=a&order=newest",
		"limit=0", "limit=10001", "limit=-1", "after=x", "events=true", "events=maybe", "order=sideways", "bogus=1", "state=", "state=%2C",
		"site=Beijing", "limit=1&after=000002&order=newest", "after=000001"} {
		f.Add(q)
	}
	h := fuzzHandler(f)
	var ids []string
	for i, name := range []string{"a", "b", "a", "c"} {
		body, _ := json.Marshal(bridge.Request{Name: name, Nodes: 1, Estimate: time.Hour, Command: []string{"/bin/true"}})
		w := do(h, http.MethodPost, "/v1/jobs", body)
		if w.Code != http.StatusCreated {
			f.Fatalf("submit %d: %d %s", i, w.Code, w.Body.String())
		}
		var resp api.SubmitResponse
		json.Unmarshal(w.Body.Bytes(), &resp)
		ids = append(ids, resp.ID)
	}
	if w := do(h, http.MethodPost, "/v1/jobs/"+ids[1]+"/cancel", nil); w.Code != http.StatusOK {
		f.Fatalf("cancel: %d %s", w.Code, w.Body.String())
	}
	f.Fuzz(func(t *testing.T, query string) {
		w := do(h, http.MethodGet, "/v1/jobs?"+query, nil)
		// The filter as the server reads the query (it skips malformed pairs).
		rq := (&url.URL{RawQuery: query}).Query()
		after := ""
		if v := rq["after"]; len(v) > 0 {
			after = v[len(v)-1]
		}
		switch {
		case w.Code == http.StatusOK:
		case w.Code == http.StatusBadRequest:
			checkErrorBody(t, w, api.CodeBadRequest)
			return
		case w.Code == http.StatusNotFound && after != "" && !slices.Contains(ids, after):
			checkErrorBody(t, w, api.CodeNotFound) // the paging cursor names no job
			return
		default:
			t.Fatalf("GET /v1/jobs?%s: status %d: %s", query, w.Code, w.Body.String())
		}
		var resp api.ListResponse
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
			t.Fatalf("GET /v1/jobs?%s: %q (%v)", query, w.Body.String(), err)
		}
		limit := api.DefaultLimit
		if v := rq["limit"]; len(v) > 0 {
			fmt.Sscan(v[len(v)-1], &limit)
		}
		if len(resp.Jobs) > limit {
			t.Fatalf("GET /v1/jobs?%s: %d jobs, limit %d", query, len(resp.Jobs), limit)
		}
		var states []string
		for _, v := range rq["state"] {
			for _, s := range strings.Split(v, ",") {
				if s != "" {
					states = append(states, s)
				}
			}
		}
		name := ""
		if v := rq["name"]; len(v) > 0 {
			name = v[len(v)-1]
		}
		newest := len(rq["order"]) > 0 && rq["order"][len(rq["order"])-1] == "newest"
		for i, j := range resp.Jobs {
			if len(states) > 0 && !slices.Contains(states, string(j.State)) || name != "" && j.Req.Name != name {
				t.Fatalf("GET /v1/jobs?%s returned job %s (%s, %s)", query, j.ID, j.Req.Name, j.State)
			}
			if !slices.Contains(ids, j.ID) {
				t.Fatalf("GET /v1/jobs?%s returned unknown job %s", query, j.ID)
			}
			if i > 0 && (resp.Jobs[i-1].ID < j.ID) == newest {
				t.Fatalf("GET /v1/jobs?%s: %s before %s (newest first: %v)", query, resp.Jobs[i-1].ID, j.ID, newest)
			}
		}
	})
}

// FuzzAPIJobID sends arbitrary job ids to GET /v1/jobs/{id},
// GET /v1/jobs/{id}/events and POST /v1/jobs/{id}/cancel: an unknown id is
// a 404 with a JSON error (or the mux's redirect to a clean path), never a
// 5xx and never a job.
func FuzzAPIJobID(f *testing.F) {
	for _, id := range []string{"000001", "g-1", "", "..", "../../etc/passwd", "%00", "000001/../000002", "'; DROP TABLE jobs; --", "\x00", strings.Repeat("9", 400)} {
		f.Add(id)
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, id string) {
		p := "/v1/jobs/" + url.PathEscape(id)
		for _, c := range []struct{ method, path string }{{http.MethodGet, p}, {http.MethodGet, p + "/events"}, {http.MethodPost, p + "/cancel"}} {
			w := do(h, c.method, c.path, nil)
			if w.Code == http.StatusMovedPermanently || w.Code == http.StatusTemporaryRedirect {
				continue // the mux cleans a path holding "." or ".." segments or "//"
			}
			if w.Code >= 500 {
				t.Fatalf("%s %s: status %d: %s", c.method, c.path, w.Code, w.Body.String())
			}
			if w.Code == http.StatusOK {
				t.Fatalf("%s %s: 200 for a job never submitted: %s", c.method, c.path, w.Body.String())
			}
			checkErrorBody(t, w, api.CodeNotFound, "no_route")
		}
	})
}
