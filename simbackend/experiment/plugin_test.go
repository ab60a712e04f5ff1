package experiment

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParsePluginPolicy(t *testing.T) {
	for _, c := range []struct {
		name     string
		want     pluginPolicy
		isPlugin bool
		err      string
	}{
		{"greedy-easy", pluginPolicy{}, false, ""},
		{"plugin:/opt/p/planner", pluginPolicy{path: "/opt/p/planner", args: []string{}}, true, ""},
		{"plugin:/opt/p/planner -v  least-loaded", pluginPolicy{path: "/opt/p/planner", args: []string{"-v", "least-loaded"}}, true, ""},
		{"plugin:builtin:greedy-easy", pluginPolicy{builtin: "greedy-easy"}, true, ""},
		{"plugin:builtin:nope", pluginPolicy{}, true, `no built-in planner "nope"`},
		{"plugin:  ", pluginPolicy{}, true, "names no executable"},
	} {
		got, isPlugin, err := parsePluginPolicy(c.name)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err = %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || isPlugin != c.isPlugin || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %+v, %v, %v; want %+v, %v", c.name, got, isPlugin, err, c.want, c.isPlugin)
		}
	}
}

func TestPluginPolicyValidation(t *testing.T) {
	for _, c := range []struct{ policies, want string }{
		{"[plugin:builtin:nope]", `policies[0]`},
		{"[greedy-easy, 'plugin: ']", `policies[1]`},
		{"[plugin:/x, plugin:/x]", `listed twice`},
		{"[nope]", "plugin:/path/to/planner"},
	} {
		_, err := Parse("p.yaml", []byte("name: m\nworkload: {trace: X.swf}\npolicies: "+c.policies+"\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("policies %s: err = %v, want one naming %q", c.policies, err, c.want)
		}
	}
}

// buildTestPlanner builds plannerrpc's test planner plugin (it serves a
// coalloc planner by name).
func buildTestPlanner(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "testplanner")
	cmd := exec.Command("go", "build", "-o", bin, "../../bridge/plugins/plannerrpc/internal/testplanner")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build testplanner: %v\n%s", err, out)
	}
	return bin
}

// runPolicies runs testdata/tiny.yaml with its policies replaced and
// returns results.csv with the policy column cleared (the plugin's rows
// are named after the plugin).
func runPolicies(t *testing.T, policies string) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(raw), "policies: [greedy-easy, single-site-easy]", "policies: "+policies, 1)
	e, err := Parse("tiny.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Execute(context.Background(), e, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, s); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := -1
	for i, h := range rows[0] {
		if h == "policy" {
			col = i
		}
	}
	if col < 0 {
		t.Fatalf("results.csv has no policy column: %v", rows[0])
	}
	var out bytes.Buffer
	w := csv.NewWriter(&out)
	for _, r := range rows[1:] {
		r[col] = ""
		w.Write(r)
	}
	w.Flush()
	return out.Bytes()
}

// TestPluginPolicySameResults: the tiny experiment gives the same
// results.csv (but for the policy's name) with greedy-easy in process, as
// a plugin executable, and as plugin:builtin:greedy-easy (isolated).
func TestPluginPolicySameResults(t *testing.T) {
	needTraces(t)
	bin := buildTestPlanner(t)
	old := selfExecutable
	selfExecutable = func() (string, error) { return bin, nil }
	t.Cleanup(func() { selfExecutable = old })

	want := runPolicies(t, "[greedy-easy]")
	if got := runPolicies(t, "['plugin:"+bin+" greedy-easy']"); !bytes.Equal(got, want) {
		t.Fatalf("plugin executable:\n%s\nin process:\n%s", got, want)
	}
	if got := runPolicies(t, "[plugin:builtin:greedy-easy]"); !bytes.Equal(got, want) {
		t.Fatalf("plugin:builtin:\n%s\nin process:\n%s", got, want)
	}
}

// TestPluginPolicyCannotStart: a plugin that cannot start fails the
// experiment before any run, naming the policy and the executable.
func TestPluginPolicyCannotStart(t *testing.T) {
	needTraces(t)
	missing := filepath.Join(t.TempDir(), "no-such-planner")
	raw, _ := os.ReadFile("testdata/tiny.yaml")
	e, err := Parse("tiny.yaml", []byte(strings.Replace(string(raw), "policies: [greedy-easy, single-site-easy]", "policies: [greedy-easy, 'plugin:"+missing+"']", 1)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Execute(context.Background(), e, Options{Workers: 1})
	if err == nil || !strings.Contains(err.Error(), "policies[1]") || !strings.Contains(err.Error(), missing) {
		t.Fatalf("err = %v, want one naming policies[1] and %s", err, missing)
	}
}
