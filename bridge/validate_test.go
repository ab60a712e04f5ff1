package bridge

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/jobrules"
)

// hostileEnv is a broker with an output root and an input root (a stand-in
// home directory holding .ssh), and paths around them to attack.
type hostileEnv struct {
	b                      *Broker
	mem                    *MemStore
	base, out, home, other string
	input                  string // a readable regular file inside the input root
}

func newHostileEnv(t *testing.T, site backends.Backend) *hostileEnv {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &hostileEnv{base: base, out: filepath.Join(base, "out"), home: filepath.Join(base, "home"), other: filepath.Join(base, "other"), mem: NewMemStore()}
	for _, d := range []string{e.out, filepath.Join(e.home, "data"), filepath.Join(e.home, ".ssh"), e.other} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	e.input = filepath.Join(e.home, "data", "in.dat")
	for p, body := range map[string]string{e.input: "input", filepath.Join(e.home, ".ssh", "authorized_keys"): "ssh-ed25519 AAAA the user's key",
		filepath.Join(e.other, "secret"): "SECRET OUTSIDE THE ROOTS", filepath.Join(e.home, ".ssh", "id_ed25519"): "PRIVATE KEY"} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for target, name := range map[string]string{filepath.Join(e.home, ".ssh"): filepath.Join(e.out, "ssh"),
		filepath.Join(e.other, "secret"): filepath.Join(e.home, "data", "secret-link"), e.input: filepath.Join(e.home, "data", "in-link")} {
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(e.home, "data", "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if site == nil {
		site = newFake("A", 4)
	}
	e.b, err = New(Options{Sites: []SiteConfig{{Name: "A", Backend: site}}, Planner: scriptPlanner{firstFit}, Store: e.mem,
		OutputRoot: e.out, InputRoots: []string{e.home}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// good is a request that passes every check.
func (e *hostileEnv) good() Request {
	return Request{Name: "ok", Command: []string{"/bin/echo", "hi"}, Nodes: 1, Estimate: time.Minute,
		Env:     map[string]string{"OMP_NUM_THREADS": "4", "QUOTED": "$(touch /tmp/pwned); `id`"},
		Inputs:  []backends.StageFile{{Local: e.input, Remote: "in.dat"}},
		Outputs: []string{"out.txt"}, OutputDir: IDPlaceholder}
}

// TestSubmitRefusesHostileRequests: every hostile request of issue 12 is
// refused by Submit with ErrBadRequest and a message naming the field and
// the problem; nothing is stored, no id is used up, no file is written.
func TestSubmitRefusesHostileRequests(t *testing.T) {
	e := newHostileEnv(t, nil)
	year1 := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		edit  func(r *Request)
		field string // the field the message names
		msg   string // part of the message
	}{
		{"output dir into .ssh", func(r *Request) { r.OutputDir = filepath.Join(e.home, ".ssh") }, "OutputDir", "outside the output root"},
		{"output dir relative escape", func(r *Request) { r.OutputDir = "../home/.ssh" }, "OutputDir", "outside the output root"},
		{"output dir hidden in root", func(r *Request) { r.OutputDir = ".ssh/" + IDPlaceholder }, "OutputDir", `hidden ".ssh"`},
		{"output dir through a symlink", func(r *Request) { r.OutputDir = filepath.Join(e.out, "ssh", IDPlaceholder) }, "OutputDir", "with symbolic links resolved"},
		{"output dir /etc", func(r *Request) { r.OutputDir = "/etc" }, "OutputDir", "outside the output root"},
		{"output dir NUL", func(r *Request) { r.OutputDir = "a\x00b" }, "OutputDir", "NUL"},
		{"input /etc/shadow", func(r *Request) { r.Inputs[0].Local = "/etc/shadow" }, "Inputs[0].Local", "outside the allowed input roots"},
		{"input private key", func(r *Request) { r.Inputs[0].Local = filepath.Join(e.home, ".ssh", "id_ed25519") }, "Inputs[0].Local", "hidden"},
		{"input symlink out", func(r *Request) { r.Inputs[0].Local = filepath.Join(e.home, "data", "secret-link") }, "Inputs[0].Local", "outside"},
		{"input relative", func(r *Request) { r.Inputs[0].Local = "data/in.dat" }, "Inputs[0].Local", "must be an absolute path"},
		{"input FIFO", func(r *Request) { r.Inputs[0].Local = filepath.Join(e.home, "data", "fifo") }, "Inputs[0].Local", "not a regular file"},
		{"input directory", func(r *Request) { r.Inputs[0].Local = filepath.Join(e.home, "data") }, "Inputs[0].Local", "not a regular file"},
		{"input missing", func(r *Request) { r.Inputs[0].Local = filepath.Join(e.home, "data", "nope") }, "Inputs[0].Local", "cannot read"},
		{"input remote escape", func(r *Request) { r.Inputs[0].Remote = "../../.bashrc" }, "Inputs[0].Remote", "escapes the job directory"},
		{"input remote absolute", func(r *Request) { r.Inputs[0].Remote = "/home/u/.bashrc" }, "Inputs[0].Remote", "absolute path"},
		{"input remote duplicate", func(r *Request) { r.Inputs = append(r.Inputs, backends.StageFile{Local: e.input, Remote: "./in.dat"}) }, "Inputs[1].Remote", "already the remote name"},
		{"input setuid mode", func(r *Request) { r.Inputs[0].Mode = os.ModeSetuid | 0o755 }, "Inputs[0].Mode", "0..0777"},
		{"output ../", func(r *Request) { r.Outputs = []string{"../../x"} }, "Outputs[0]", "escapes the job directory"},
		{"output absolute", func(r *Request) { r.Outputs = []string{"ok", "/etc/passwd"} }, "Outputs[1]", "absolute path"},
		{"output hidden escape", func(r *Request) { r.Outputs = []string{"a/../../b"} }, "Outputs[0]", "escapes"},
		{"output duplicate", func(r *Request) { r.Outputs = []string{"a", "./a"} }, "Outputs[1]", "already listed"},
		{"workdir escape", func(r *Request) { r.WorkDir = "../.." }, "WorkDir", "escapes"},
		{"env name metachars", func(r *Request) { r.Env["X;touch /tmp/pwned"] = "1" }, `Env["X;touch /tmp/pwned"]`, "not a valid environment variable name"},
		{"env name substitution", func(r *Request) { r.Env["$(id)"] = "1" }, `Env["$(id)"]`, "not a valid"},
		{"env SLURM_", func(r *Request) { r.Env["SLURM_X"] = "1" }, `Env["SLURM_X"]`, "reserved name"},
		{"env GRIDSUB_", func(r *Request) { r.Env["GRIDSUB_JOB_ID"] = "g1" }, `Env["GRIDSUB_JOB_ID"]`, "reserved"},
		{"env wrapper variable", func(r *Request) { r.Env["gridsub_rc"] = "0" }, `Env["gridsub_rc"]`, "reserved"},
		{"env PBS_", func(r *Request) { r.Env["PBS_O_WORKDIR"] = "/" }, `Env["PBS_O_WORKDIR"]`, "reserved"},
		{"env value NUL", func(r *Request) { r.Env["A"] = "x\x00y" }, `Env["A"]`, "NUL"},
		{"env too many", func(r *Request) {
			for i := range jobrules.MaxEnvVars + 1 {
				r.Env[fmt.Sprintf("V%d", i)] = ""
			}
		}, "Env", "at most 1024"},
		{"negative cores", func(r *Request) { r.CoresPerNode = -4 }, "CoresPerNode", "got -4"},
		{"negative nodes", func(r *Request) { r.Nodes = -1 }, "Nodes", "got -1"},
		{"nodes 2^40", func(r *Request) { r.Nodes = 1 << 40 }, "Nodes", "from 1 to 1048576"},
		{"negative data", func(r *Request) { r.DataSize = -1 }, "DataSize", "got -1"},
		{"data 9EiB", func(r *Request) { r.DataSize = math.MaxInt64 }, "DataSize", "64 TiB"},
		{"unknown QoS", func(r *Request) { r.QoS = "platinum" }, "QoS", `must be one of auto, high, low, none, got "platinum"`},
		{"year-0001 deadline", func(r *Request) { r.Deadline = year1.Add(time.Second) }, "Deadline", "is before the submission time"},
		{"deadline year 9999", func(r *Request) { r.Deadline = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC) }, "Deadline", "more than 10 years"},
		{"2^63-1 ns estimate", func(r *Request) { r.Estimate = math.MaxInt64 }, "Estimate", "at most 8760h0m0s"},
		{"zero estimate", func(r *Request) { r.Estimate = 0 }, "Estimate", "must be > 0"},
		{"huge sim runtime", func(r *Request) { r.Sim.Runtime = math.MaxInt64 }, "Sim.Runtime", "at most"},
		{"sim exit code", func(r *Request) { r.Sim.ExitCode = 999 }, "Sim.ExitCode", "0..255"},
		{"window year 1", func(r *Request) { r.Window = &Window{Earliest: year1.Add(time.Second), Latest: t0.Add(time.Hour)} }, "Window.Earliest", "before the submission"},
		{"window zero", func(r *Request) { r.Window = &Window{Latest: t0.Add(time.Hour)} }, "Window.Earliest", "missing"},
		{"window far", func(r *Request) { r.Window = &Window{Earliest: t0, Latest: t0.Add(jobrules.MaxHorizon + time.Hour)} }, "Window.Latest", "more than 10 years"},
		{"name path", func(r *Request) { r.Name = "../../x" }, "Name", "1-64 characters"},
		{"name empty", func(r *Request) { r.Name = "" }, "Name", "1-64"},
		{"no command", func(r *Request) { r.Command = nil }, "Command", "needs a command"},
		{"empty program", func(r *Request) { r.Command = []string{""} }, "Command[0]", "must name a program"},
		{"NUL in argv", func(r *Request) { r.Command = []string{"/bin/echo", "a\x00b"} }, "Command[1]", "NUL"},
		{"command and script", func(r *Request) { r.Script = "echo hi" }, "Script", "not both"},
		{"blank script", func(r *Request) { r.Command, r.Script = nil, "  \n" }, "Script", "empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.good()
			c.edit(&r)
			j, err := e.b.Submit(context.Background(), r, t0)
			if err == nil {
				t.Fatalf("accepted as %s: %+v", j.ID, j.Req)
			}
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v does not wrap ErrBadRequest", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("error %q: first field %v, want %q", err, fe, c.field)
			}
			if want := c.field + ": "; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %q lacks %q or %q", err, want, c.msg)
			}
		})
	}
	// Nothing was stored, no id used, nothing written.
	if js, _ := e.mem.List(context.Background(), Filter{}); len(js) != 0 || len(e.b.Jobs()) != 0 {
		t.Fatalf("stored %d jobs, broker holds %d", len(js), len(e.b.Jobs()))
	}
	if ents, _ := os.ReadDir(e.out); len(ents) != 1 || ents[0].Name() != "ssh" {
		t.Fatalf("output root holds %v, want only the planted link", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(e.home, ".ssh", "authorized_keys")); string(b) != "ssh-ed25519 AAAA the user's key" {
		t.Fatalf("authorized_keys changed: %q", b)
	}
	j, err := e.b.Submit(context.Background(), e.good(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != "g000001" {
		t.Fatalf("first accepted job is %s: refused requests used up ids", j.ID)
	}
}

// TestSubmitReportsEveryProblem: one refusal lists every bad field, in
// request order, and errors.As finds each FieldError's kind.
func TestSubmitReportsEveryProblem(t *testing.T) {
	e := newHostileEnv(t, nil)
	r := e.good()
	r.Name, r.Nodes, r.QoS, r.OutputDir = "", 0, "gold", "/etc/"+IDPlaceholder
	_, err := e.b.Submit(context.Background(), r, t0)
	var re RequestError
	if !errors.As(err, &re) || len(re) != 4 {
		t.Fatalf("got %v, want 4 problems", err)
	}
	for i, f := range []string{"Name", "Nodes", "QoS", "OutputDir"} {
		if re[i].Field != f {
			t.Errorf("problem %d is %q, want %q", i, re[i].Field, f)
		}
	}
	if !errors.Is(err, ErrOutsideRoot) || !errors.Is(err, jobrules.ErrValue) {
		t.Errorf("%v: want ErrOutsideRoot and ErrValue among its kinds", err)
	}
	if !strings.HasPrefix(err.Error(), "bad request: Name: ") || strings.Count(err.Error(), "; ") != 3 {
		t.Errorf("text %q", err)
	}
}

// TestSubmitStoresResolvedPaths: an accepted request is stored with its
// input paths and output directory resolved (links followed, relative
// output directory below the root), its outputs and remote names cleaned;
// the caller's request is not changed.
func TestSubmitStoresResolvedPaths(t *testing.T) {
	e := newHostileEnv(t, nil)
	r := e.good()
	r.Inputs = []backends.StageFile{{Local: filepath.Join(e.home, "data", "in-link"), Remote: "sub/"}}
	r.Outputs = []string{"./res/../res/"}
	r.WorkDir = "w/./x/"
	r.OutputDir = "runs/" + IDPlaceholder
	j, err := e.b.Submit(context.Background(), r, t0)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := e.mem.Get(context.Background(), j.ID)
	for _, got := range []Request{j.Req, stored.Req} {
		if got.Inputs[0].Local != e.input || got.Inputs[0].Remote != "sub/in.dat" || got.Outputs[0] != "res/" || got.WorkDir != "w/x" ||
			got.OutputDir != filepath.Join(e.out, "runs", j.ID) {
			t.Fatalf("stored %+v", got)
		}
	}
	if r.Inputs[0].Local != filepath.Join(e.home, "data", "in-link") || r.Outputs[0] != "./res/../res/" {
		t.Fatalf("Submit changed the caller's request: %+v", r)
	}
}

// TestNoRootsNoFiles: a broker without roots takes no output directory and
// no inputs (the safe default of bridge.Options).
func TestNoRootsNoFiles(t *testing.T) {
	e := newHostileEnv(t, nil)
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: newFake("A", 1)}}, Planner: scriptPlanner{firstFit}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Submit(context.Background(), e.good(), t0)
	if !errors.Is(err, ErrOutsideRoot) || !strings.Contains(err.Error(), "Inputs[0].Local: ") || !strings.Contains(err.Error(), "OutputDir: {id} is not allowed: this broker has no output root") {
		t.Fatalf("got %v", err)
	}
	if _, err := b.Submit(context.Background(), req(1), t0); err != nil {
		t.Fatalf("a request without files: %v", err)
	}
	if _, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: newFake("A", 1)}}, Planner: scriptPlanner{firstFit}, OutputRoot: "relative"}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("a relative output root: %v", err)
	}
}

// countingFetcher counts FetchOutputs calls and writes nothing.
type countingFetcher struct {
	*fakeSite
	calls int
}

func (f *countingFetcher) FetchOutputs(_ context.Context, _ backends.JobID, _ *backends.JobSpec, dir string) ([]string, error) {
	f.calls++
	return []string{filepath.Join(dir, "stdout.txt")}, nil
}

// TestFetchRechecksTheOutputDir: an output directory that became a link out
// of the root after submission is refused when the outputs are fetched:
// nothing is fetched, the job still ends, and why is recorded.
func TestFetchRechecksTheOutputDir(t *testing.T) {
	site := &countingFetcher{fakeSite: newFake("A", 4)}
	e := newHostileEnv(t, site)
	ok, err := e.b.Submit(context.Background(), e.good(), t0)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := e.b.Submit(context.Background(), e.good(), t0)
	if err != nil {
		t.Fatal(err)
	}
	// After submission the attacker plants a link where the second job's
	// outputs go.
	if err := os.Symlink(filepath.Join(e.home, ".ssh"), bad.Req.OutputDir); err != nil {
		t.Fatal(err)
	}
	mustCycle(t, e.b, t0)
	site.set(ok.ID, backends.StateCompleted, 0)
	site.set(bad.ID, backends.StateCompleted, 0)
	mustCycle(t, e.b, t0.Add(time.Minute))
	// Fetching runs off the cycle (fetch.go): wait for it, and let the
	// next cycle apply what it brought.
	if err := e.b.WaitFetches(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustCycle(t, e.b, t0.Add(2*time.Minute))
	if site.calls != 1 {
		t.Fatalf("FetchOutputs called %d times, want 1 (the good job only)", site.calls)
	}
	gotOK, _ := e.b.Job(ok.ID)
	gotBad, _ := e.b.Job(bad.ID)
	if gotOK.State != Completed || len(gotOK.Outputs) != 1 {
		t.Fatalf("good job: %s, outputs %v", gotOK.State, gotOK.Outputs)
	}
	if gotBad.State != Completed || len(gotBad.Outputs) != 0 || len(gotBad.FetchErrors) != 1 ||
		!strings.Contains(gotBad.FetchErrors[0], "outputs not fetched: OutputDir: ") || !strings.Contains(gotBad.FetchErrors[0], "outside the output root") {
		t.Fatalf("hijacked job: %s, outputs %v, fetch errors %q", gotBad.State, gotBad.Outputs, gotBad.FetchErrors)
	}
}

// BenchmarkValidate: the cost Submit adds per request, for a trace replay's
// request (no files) and for one with an input and an output directory
// (each resolved through the file system).
func BenchmarkValidate(b *testing.B) {
	base, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	in := filepath.Join(base, "in.dat")
	if err := os.WriteFile(in, []byte("x"), 0o600); err != nil {
		b.Fatal(err)
	}
	br, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: newFake("A", 1)}}, Planner: scriptPlanner{firstFit}, OutputRoot: base, InputRoots: []string{base}})
	if err != nil {
		b.Fatal(err)
	}
	plain := Request{Name: "job-12345", Command: []string{"replay"}, Nodes: 64, Estimate: time.Hour, DataSize: 1 << 30}
	files := plain
	files.Inputs = []backends.StageFile{{Local: in, Remote: "in.dat"}}
	files.Outputs = []string{"out.txt", "res/"}
	files.Env = map[string]string{"OMP_NUM_THREADS": "4"}
	files.OutputDir = IDPlaceholder
	for name, r := range map[string]Request{"plain": plain, "files": files} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				c := r.clone()
				if err := br.in.validate(&c, t0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestOffLimits: a directory off limits (the daemon's state directory)
// inside the roots is neither read as an input nor written as an output
// directory, nor held by one (an output's relative name could reach it).
func TestOffLimits(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(base, "state")
	os.MkdirAll(filepath.Join(state, "credentials"), 0o700)
	key := filepath.Join(state, "credentials", "key")
	os.WriteFile(key, []byte("secret"), 0o600)
	ok := filepath.Join(base, "in.dat")
	os.WriteFile(ok, []byte("x"), 0o600)
	br, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: newFake("A", 1)}}, Planner: scriptPlanner{firstFit},
		OutputRoot: base, InputRoots: []string{base}, OffLimits: []string{state}})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		in, out string
		bad     bool
	}{
		"input inside":        {in: key, bad: true},
		"output inside":       {out: filepath.Join(state, "x"), bad: true},
		"output holding it":   {out: base, bad: true},
		"relative output":     {out: "state", bad: true},
		"an input beside":     {in: ok},
		"an output beside":    {out: filepath.Join(base, "out")},
		"relative output dir": {out: "out"},
	} {
		r := req(1)
		if c.in != "" {
			r.Inputs = []backends.StageFile{{Local: c.in, Remote: "in"}}
		}
		r.OutputDir = c.out
		_, err := br.Submit(context.Background(), r, t0)
		if c.bad && (err == nil || !strings.Contains(err.Error(), "the daemon's own state")) {
			t.Errorf("%s: %v, want a refusal naming the daemon's state", name, err)
		}
		if !c.bad && err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
