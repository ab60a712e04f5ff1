package jobfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustLoad(t *testing.T, path string) *Job {
	t.Helper()
	j, err := Load(path)
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	return j
}

func TestLoadFull(t *testing.T) {
	j := mustLoad(t, "testdata/full.yaml")
	abs, _ := filepath.Abs("testdata")
	check := func(name string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", name, got, want)
		}
	}
	check("Name", j.Name, "full.job-1")
	check("Command", j.Command, []string{"/bin/echo", "42", "true"})
	check("Argv", j.Argv(), []string{"/bin/echo", "42", "true", "--n", "4"})
	check("Env", j.Env, map[string]string{"OMP_NUM_THREADS": "4", "EMPTY": ""})
	check("WorkDir", j.WorkDir, "run/sub")
	check("Inputs", j.Inputs, []Input{
		{Local: filepath.Join(abs, "inputs/a.txt"), Remote: "a.txt"},
		{Local: filepath.Join(abs, "inputs/b.bin"), Remote: "bin/b.bin", Mode: 0o755},
	})
	check("Outputs", j.Outputs, []string{"result.txt", "logs/", "out/x"})
	check("Resources", j.Resources, Resources{Nodes: 48, CoresPerNode: 2, Walltime: 26*time.Hour + 3*time.Minute + 4*time.Second})
	s := j.Scheduling
	check("Origin", s.Origin, "Beijing")
	check("DataSize", s.DataSize, int64(1.5*(1<<30)))
	check("Sites", s.Sites, []string{"Beijing", "Shanghai"})
	check("Prefer", s.Prefer, []string{"Shanghai"})
	check("NoSplit", s.NoSplit, true)
	cst := time.FixedZone("", 8*3600)
	if !s.Deadline.Abs.Equal(time.Date(2026, 12, 1, 12, 0, 0, 0, cst)) || s.Deadline.Relative {
		t.Errorf("Deadline = %v", s.Deadline)
	}
	check("QoS", s.QoS, QoSHigh)
	check("Benefit", *s.Benefit, Benefit{Shape: BenefitLinear, A: 100, B: 0.5, C: 2})
	es := time.Date(2026, 12, 1, 8, 0, 0, 0, cst)
	if r := s.Reservation; !r.EarliestStart.Abs.Equal(es) || !r.LatestEnd.Abs.Equal(es.Add(2*j.Resources.Walltime)) {
		t.Errorf("Reservation = %+v, want [%v, %v]", r, es, es.Add(2*j.Resources.Walltime))
	}
	check("Simulate", j.Simulate, Simulate{Runtime: 20 * time.Minute, ExitCode: 7})
	if p, ok := j.Pos("resources.nodes"); !ok || p != (Pos{Line: 15, Column: 10}) {
		t.Errorf("Pos(resources.nodes) = %v, %v", p, ok)
	}
	if j.Dir() != abs || j.File() != "testdata/full.yaml" {
		t.Errorf("Dir, File = %q, %q", j.Dir(), j.File())
	}

	spec := j.Spec("g-7")
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	check("spec.Command", spec.Command, j.Argv())
	check("spec.Inputs[1]", spec.Inputs[1].Remote, "bin/b.bin")
	check("spec.Sim", spec.Sim.Runtime, 20*time.Minute)
	check("spec.Sim.ExitCode", spec.Sim.ExitCode, 7)
	check("spec.Components", spec.Components, 1)
	spec.Env["X"] = "changed"
	if _, leaked := j.Env["X"]; leaked {
		t.Error("Spec shares the Env map with the Job")
	}
}

// TestManyErrors checks that every problem of a file is reported, in file
// order, each with its own line and sentinel.
func TestManyErrors(t *testing.T) {
	data, err := os.ReadFile("testdata/many-errors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse("many-errors.yaml", data)
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %v is not an ErrorList", err)
	}
	want := []struct {
		line     int
		field    string
		sentinel error
		text     string
	}{
		{1, "resources", ErrRequired, "missing"},
		{1, "name", ErrValue, `got "bad name!"`},
		{2, "command", ErrRequired, "must name a program"},
		{3, "", ErrUnknownField, "did you mean `resources`?"},
		{6, "scheduling.sites[1]", ErrValue, `site "Beijing" is already listed at line 6`},
		{7, "scheduling.prefer[0]", ErrConflict, "not among the allowed"},
		{8, "scheduling.no_split", ErrType, `must be true or false, got "yes"`},
		{9, "scheduling.qos", ErrValue, `did you mean "high"?`},
		{11, "simulate.runtime", ErrValue, "must be > 0, got -5m"},
		{12, "simulate.exit_code", ErrValue, "must be a whole number 0..255, got 256"},
	}
	if len(list) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(list), len(want), err)
	}
	for i, w := range want {
		e := list[i]
		if e.Pos.Line != w.line || e.Field != w.field || !errors.Is(e, w.sentinel) || !strings.Contains(e.Msg, w.text) {
			t.Errorf("error %d = %q (line %d, field %q, %v); want line %d, field %q, %v, containing %q",
				i, e.Error(), e.Pos.Line, e.Field, e.Err, w.line, w.field, w.sentinel, w.text)
		}
	}
	if !errors.Is(err, ErrUnknownField) || errors.Is(err, ErrPath) {
		t.Error("errors.Is through the ErrorList does not match its members")
	}
}

const minimal = "name: t\ncommand: [x]\nresources: {nodes: 1, walltime: 1h}\n"

// TestParseTable: one field at a time, valid and invalid, on top of a
// minimal job.
func TestParseTable(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string // appended to minimal, or the whole file when it has "name:"
		sentinel error  // nil = must parse
		text     string // substring of the error
		line     int    // line of the error (0 = don't check)
		check    func(*Job) bool
	}{
		{"minimal", "", nil, "", 0, func(j *Job) bool { return j.Scheduling.QoS == QoSAuto && j.SimRuntime() == time.Hour }},
		{"command word", "name: t\ncommand: hostname\nresources: {nodes: 1, walltime: 1h}\n", nil, "", 0, func(j *Job) bool { return j.Command[0] == "hostname" }},
		{"script", "name: t\nscript: |\n  echo hi\nresources: {nodes: 1, walltime: 1h}\n", nil, "", 0, func(j *Job) bool { return j.Script == "echo hi\n" && j.Argv() == nil }},
		{"empty script", "name: t\nscript: \"  \"\nresources: {nodes: 1, walltime: 1h}\n", ErrRequired, "is empty", 2, nil},
		{"null name", "name:\ncommand: [x]\nresources: {nodes: 1, walltime: 1h}\n", ErrType, "got nothing", 1, nil},
		{"long name", "name: " + strings.Repeat("a", 65) + "\ncommand: [x]\nresources: {nodes: 1, walltime: 1h}\n", ErrValue, "1-64", 1, nil},
		{"not a mapping", "#whole\n- a\n- b\n", ErrType, "a job file is a mapping", 2, nil},
		{"empty", "#whole\n", ErrRequired, "empty job file", 1, nil},
		{"two docs", minimal + "---\n" + minimal, ErrSyntax, "one YAML document", 4, nil},
		{"duplicate", minimal + "name: u\n", ErrSyntax, "duplicate field (first given at line 1)", 4, nil},
		{"nodes float", "name: t\ncommand: [x]\nresources: {nodes: 1.5, walltime: 1h}\n", ErrType, "whole number >= 1, got 1.5", 3, nil},
		{"nodes zero", "name: t\ncommand: [x]\nresources: {nodes: 0, walltime: 1h}\n", ErrValue, "got 0", 3, nil},
		{"nodes huge", "name: t\ncommand: [x]\nresources: {nodes: 99999999999999999999, walltime: 1h}\n", ErrType, "whole number", 3, nil},
		{"walltime clock", "name: t\ncommand: [x]\nresources: {nodes: 1, walltime: \"00:90:00\"}\n", ErrValue, "minutes and seconds must be 0..59", 3, nil},
		{"walltime zero", "name: t\ncommand: [x]\nresources: {nodes: 1, walltime: 0s}\n", ErrValue, "must be > 0", 3, nil},
		{"missing walltime", "name: t\ncommand: [x]\nresources:\n  nodes: 1\n", ErrRequired, "resources.walltime: missing", 3, nil},
		{"resources list", "name: t\ncommand: [x]\nresources: [1]\n", ErrType, "resources: must be a mapping", 3, nil},
		{"env reserved", minimal + "env: {SLURM_JOB_ID: x}\n", ErrValue, "reserved", 4, nil},
		{"env null", minimal + "env: {A: }\n", ErrType, `use "" for an empty one`, 4, nil},
		{"workdir dot", minimal + "workdir: .\n", nil, "", 0, func(j *Job) bool { return j.WorkDir == "" }},
		{"workdir escape", minimal + "workdir: a/../../b\n", ErrPath, "escapes", 4, nil},
		{"workdir home", minimal + "workdir: ~/x\n", ErrPath, "absolute", 4, nil},
		{"output dot", minimal + "outputs: [.]\n", ErrValue, "must name a file", 4, nil},
		{"output string", minimal + "outputs: result.txt\n", nil, "", 0, func(j *Job) bool { return len(j.Outputs) == 1 && j.Outputs[0] == "result.txt" }},
		{"output dup", minimal + "outputs: [a, ./a]\n", ErrValue, "already listed", 4, nil},
		{"input dup remote", minimal + "inputs: [x/a, y/a]\n", ErrValue, `remote name "a" is already used`, 4, nil},
		{"input no local", minimal + "inputs:\n  - remote: a\n", ErrRequired, "inputs[0].local: missing", 5, nil},
		{"input bad mode", minimal + "inputs:\n  - {local: a, mode: \"0999\"}\n", ErrValue, "octal file mode", 5, nil},
		{"input dotdot local", minimal + "inputs: [..]\n", ErrValue, "does not name a file", 4, nil},
		{"data_size without origin", minimal + "scheduling: {data_size: 1MB}\n", ErrConflict, "needs scheduling.origin", 4, nil},
		{"data_size", minimal + "scheduling: {origin: A, data_size: 64MiB}\n", nil, "", 0, func(j *Job) bool { return j.Scheduling.DataSize == 64<<20 }},
		{"deadline relative", minimal + "scheduling: {deadline: +1d}\n", nil, "", 0, func(j *Job) bool { return j.Scheduling.Deadline == TimeSpec{Rel: 24 * time.Hour, Relative: true} }},
		{"deadline zero", minimal + "scheduling: {deadline: +0s}\n", ErrValue, "after the submission", 4, nil},
		{"deadline negative", minimal + "scheduling: {deadline: +-1h}\n", ErrValue, "cannot read", 4, nil},
		{"benefit c negative", minimal + "scheduling: {deadline: +1h, benefit: {a: 1, b: 1, c: -1}}\n", ErrValue, "benefit.c: must be a number >= 0", 4, nil},
		{"benefit type", minimal + "scheduling: {deadline: +1h, benefit: {a: x, b: 1, c: 1}}\n", ErrType, "benefit.a", 4, nil},
		{"benefit step default c", minimal + "scheduling: {deadline: +1h, benefit: {shape: step, a: 5, b: 0.5}}\n", nil, "", 0, func(j *Job) bool {
			b := j.Scheduling.Benefit
			return *b == Benefit{Shape: BenefitStep, A: 5, B: 0.5, C: 5} && b.Value(31*time.Minute, time.Hour) == 0 && b.Value(29*time.Minute, time.Hour) == 5
		}},
		{"benefit linear needs c", minimal + "scheduling: {deadline: +1h, benefit: {shape: linear, a: 5, b: 0.5}}\n", ErrRequired, "benefit.c: missing", 4, nil},
		{"benefit bad shape", minimal + "scheduling: {deadline: +1h, benefit: {shape: steep, a: 5, b: 0.5, c: 1}}\n", ErrValue, "must be linear", 4, nil},
		{"deadline_policy", minimal + "scheduling: {deadline: +1h, deadline_policy: best-effort}\n", nil, "", 0, func(j *Job) bool { return j.Scheduling.DeadlinePolicy == "best-effort" }},
		{"deadline_policy typo", minimal + "scheduling: {deadline: +1h, deadline_policy: best-efort}\n", ErrValue, `did you mean "best-effort"`, 4, nil},
		{"deadline_policy without deadline", minimal + "scheduling: {deadline_policy: strict}\n", ErrConflict, "needs scheduling.deadline", 4, nil},
		{"reservation both", minimal + "scheduling:\n  reservation: {earliest_start: +1h, latest_end: +3h, flexibility: 0.5}\n", ErrConflict, "not both", 5, nil},
		{"reservation default window", minimal + "scheduling:\n  reservation: {earliest_start: +1h}\n", nil, "", 0, func(j *Job) bool {
			return j.Scheduling.Reservation.LatestEnd == TimeSpec{Rel: 2 * time.Hour, Relative: true}
		}},
		{"reservation no start", minimal + "scheduling:\n  reservation: {latest_end: +3h}\n", ErrRequired, "earliest_start: missing", 5, nil},
		{"site name", minimal + "scheduling: {origin: \"a b\"}\n", ErrValue, "is not a site name", 4, nil},
		{"alias", "name: &n t\ncommand: [*n]\nresources: {nodes: 1, walltime: 1h}\n", nil, "", 0, func(j *Job) bool { return j.Command[0] == "t" }},
		{"non-scalar key", minimal + "? [a]\n: 1\n", ErrType, "plain words", 4, nil},
		{"command with NUL", "name: t\ncommand: [\"a\\0b\"]\nresources: {nodes: 1, walltime: 1h}\n", ErrValue, "NUL", 2, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.yaml
			if !strings.Contains(src, "name:") && !strings.HasPrefix(src, "#whole") {
				src = minimal + src
			}
			j, err := Parse("t.yaml", []byte(src))
			if tc.sentinel == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if tc.check != nil && !tc.check(j) {
					t.Errorf("parsed job does not match: %+v", j)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted %q", src)
			}
			if j != nil {
				t.Error("Parse returned a job with an error")
			}
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("error %q is not %v", err, tc.sentinel)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not contain %q", err, tc.text)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("no *FieldError in %v", err)
			}
			if tc.line != 0 && fe.Pos.Line != tc.line {
				t.Errorf("first error at line %d, want %d: %v", fe.Pos.Line, tc.line, err)
			}
		})
	}
}

func TestCheckSites(t *testing.T) {
	j := mustLoad(t, "testdata/sites.yaml")
	err := j.CheckSites(defaultSites)
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 3 {
		t.Fatalf("CheckSites = %v, want 3 errors", err)
	}
	want := []string{
		`testdata/sites.yaml:5:11: scheduling.origin: unknown site "Bejing" (known sites: Beijing, Shanghai, Harbin); did you mean "Beijing"?`,
		`testdata/sites.yaml:8:7: scheduling.sites[1]: unknown site "Tokyo" (known sites: Beijing, Shanghai, Harbin)`,
		`testdata/sites.yaml:10:7: scheduling.prefer[0]: unknown site "Tokyo" (known sites: Beijing, Shanghai, Harbin)`,
	}
	for i, w := range want {
		if list[i].Error() != w || !errors.Is(list[i], ErrUnknownSite) {
			t.Errorf("error %d = %q, want %q", i, list[i].Error(), w)
		}
	}
	if err := j.CheckSites([]string{"Bejing", "Beijing", "Tokyo"}); err != nil {
		t.Errorf("CheckSites with all sites known: %v", err)
	}
	if err := j.CheckSites(nil); err == nil || !strings.Contains(err.Error(), "no sites are configured") {
		t.Errorf("CheckSites(nil) = %v", err)
	}
}

func TestResolveAndPolicyJob(t *testing.T) {
	src := minimal + "scheduling:\n  origin: Harbin\n  data_size: 2KB\n  sites: [Harbin, Beijing]\n  prefer: [Beijing]\n  deadline: +3h\n  no_split: true\n  reservation: {earliest_start: +1h, latest_end: +5h}\n"
	j, err := Parse("r.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	submit := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	times, err := j.Resolve(submit)
	if err != nil {
		t.Fatal(err)
	}
	if !times.Deadline.Equal(submit.Add(3*time.Hour)) || !times.EarliestStart.Equal(submit.Add(time.Hour)) ||
		!times.LatestEnd.Equal(submit.Add(5*time.Hour)) || times.Flexibility != 0.75 {
		t.Errorf("Resolve = %+v", times)
	}
	idx := map[string]int{"Beijing": 0, "Shanghai": 1, "Harbin": 2}
	lookup := func(n string) (int, bool) { i, ok := idx[n]; return i, ok }
	pj, err := j.PolicyJob("g-1", submit, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if pj.ID != "g-1" || pj.Width != 1 || pj.Estimate != time.Hour || pj.Origin != 2 || pj.DataSize != 2000 ||
		!reflect.DeepEqual(pj.Allowed, []int{2, 0}) || !reflect.DeepEqual(pj.Preferred, []int{0}) ||
		!pj.NoSplit || !pj.Deadline.Equal(times.Deadline) || !pj.Submit.Equal(submit) {
		t.Errorf("PolicyJob = %+v", pj)
	}
	if _, err := j.PolicyJob("g-1", submit, func(string) (int, bool) { return 0, false }); !errors.Is(err, ErrUnknownSite) {
		t.Errorf("PolicyJob with no sites: %v", err)
	}

	// Absolute times in the past are caught by Resolve, with their line.
	j, err = Parse("p.yaml", []byte(minimal+"scheduling:\n  deadline: 2020-01-01T00:00:00Z\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Resolve(submit); !errors.Is(err, ErrTime) || !strings.Contains(err.Error(), "p.yaml:5:13: scheduling.deadline") {
		t.Errorf("Resolve past deadline: %v", err)
	}
	j, err = Parse("w.yaml", []byte(minimal+"scheduling:\n  reservation:\n    earliest_start: +1h\n    latest_end: 2026-11-22T04:30:00Z\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Resolve(submit); !errors.Is(err, ErrTime) || !strings.Contains(err.Error(), "w.yaml:7:17: scheduling.reservation.latest_end: window") {
		t.Errorf("Resolve short mixed window: %v", err)
	}
}

func TestLoadInputErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(file, []byte(minimal+"inputs: [sub, missing.txt]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(file)
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 2 || !errors.Is(err, ErrInput) {
		t.Fatalf("Load = %v, want two ErrInput errors", err)
	}
	if !strings.Contains(list[0].Msg, "is a directory") || !strings.Contains(list[1].Msg, "cannot read") {
		t.Errorf("Load errors = %v", err)
	}
	if _, err := Load(filepath.Join(dir, "nope.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file = %v", err)
	}
}

func TestParseTooLarge(t *testing.T) {
	_, err := Parse("big.yaml", make([]byte, MaxFileSize+1))
	if !errors.Is(err, ErrSyntax) {
		t.Errorf("Parse of a huge file = %v", err)
	}
}

func TestSuggest(t *testing.T) {
	valid := []string{"nodes", "cores_per_node", "walltime"}
	for in, want := range map[string]string{"node": "nodes", "Nodes": "nodes", "wallclock": "", "waltime": "walltime", "x": "", "cores_per_nod": "cores_per_node"} {
		if got := Suggest(in, valid); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/full.yaml", "testdata/many-errors.yaml", "testdata/sites.yaml", "../../examples/reference.yaml"} {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(minimal))
	f.Add([]byte("a: &x [*x]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := Parse("fuzz.yaml", data)
		if (j == nil) == (err == nil) {
			t.Fatalf("Parse returned job %v and error %v", j, err)
		}
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Error() == "" {
				t.Fatalf("error without a FieldError: %v", err)
			}
			return
		}
		if j.Resources.Nodes < 1 || j.Resources.Walltime <= 0 || (len(j.Command) == 0) == (j.Script == "") {
			t.Fatalf("accepted an invalid job: %+v", j)
		}
		s := j.Spec("g")
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted job gives an invalid spec: %v", err)
		}
		_ = j.CheckSites([]string{"A"})
		_, _ = j.Resolve(time.Unix(0, 0))
	})
}

func BenchmarkParseReference(b *testing.B) {
	data, err := os.ReadFile("../../examples/reference.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse("reference.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}
