package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// repoRoot is the repository root; tests start in cmd/gridsub.
var repoRoot, _ = filepath.Abs("../..")

// gridsub runs the CLI in process from the repository root.
func gridsub(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Chdir(repoRoot)
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelloRunsOnEmbeddedTestbed(t *testing.T) {
	out := t.TempDir()
	start := time.Now()
	code, stdout, stderr := gridsub(t, "examples/hello.yaml", "--out-dir", out)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("hello took %s, the README promises under 10 s", d)
	}
	for _, want := range []string{"placement:", "predicted start", "it beat:", "completed"} {
		if !strings.Contains(stderr+stdout, want) {
			t.Errorf("output lacks %q\nstderr:\n%s\nstdout:\n%s", want, stderr, stdout)
		}
	}
	for _, want := range []string{"state      completed (exit 0)", "sites", "wait", "run time", "output"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	files, _ := filepath.Glob(filepath.Join(out, "*", "gridsub.out")) // the same name on every backend
	if len(files) == 0 {
		t.Fatalf("no output fetched into %s", out)
	}
	data, _ := os.ReadFile(files[0])
	if !strings.Contains(string(data), "gridsub sim") {
		t.Errorf("output %s does not say it is simulated: %q", files[0], data)
	}
}

func TestWideJobIsCoAllocated(t *testing.T) {
	// 48 nodes fit Beijing (128) alone on paper 000's testbed, so the
	// co-allocation is shown on sim-pair, where no single site has 48 nodes.
	code, stdout, stderr := gridsub(t, "--config", "sim-pair", "examples/wide.yaml", "--output", "json", "--time-scale", "1e6", "--out-dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var j struct {
		State string `json:"state"`
		Sites []struct {
			Site  string `json:"site"`
			Nodes int    `json:"nodes"`
		} `json:"sites"`
		ExitCode *int `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(stdout), &j); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if j.State != "completed" || j.ExitCode == nil || *j.ExitCode != 0 {
		t.Fatalf("state %s exit %v", j.State, j.ExitCode)
	}
	total := 0
	for _, s := range j.Sites {
		total += s.Nodes
	}
	if total != 48 || len(j.Sites) != 2 {
		t.Fatalf("placement %+v does not add up to 48 nodes", j.Sites)
	}
}

func TestTooWideJobIsRejectedClearly(t *testing.T) {
	code, stdout, stderr := gridsub(t, "examples/toowide.yaml", "--time-scale", "1e6")
	if code != exitJobFailed {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, exitJobFailed, stdout, stderr)
	}
	// Refused at submission (bridge.Feasible), as with a daemon: nothing ran.
	if stdout != "" || !strings.Contains(stderr, "needs 300 nodes") || !strings.Contains(stderr, "224") {
		t.Fatalf("the refusal does not name the width and the capacity:\nstdout %q\nstderr %q", stdout, stderr)
	}
}

func TestFailingJobExitsNonZero(t *testing.T) {
	code, stdout, _ := gridsub(t, "examples/failing.yaml", "--time-scale", "1e6", "--out-dir", t.TempDir())
	if code != exitJobFailed || !strings.Contains(stdout, "failed") {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
}

func TestValidateInvalidExamples(t *testing.T) {
	files, _ := filepath.Glob("../../examples/invalid/*.yaml")
	if len(files) < 10 {
		t.Fatalf("only %d invalid examples", len(files))
	}
	for _, f := range files {
		rel := strings.TrimPrefix(f, "../../")
		t.Run(filepath.Base(f), func(t *testing.T) {
			code, stdout, _ := gridsub(t, "validate", rel)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d:\n%s", code, exitUsage, stdout)
			}
			if !strings.Contains(stdout, rel+":") {
				t.Fatalf("message does not name the file and line:\n%s", stdout)
			}
		})
	}
}

func TestValidateAllExamples(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.yaml")
	args := []string{"validate"}
	for _, f := range files {
		if filepath.Base(f) != "toowide.yaml" { // valid, but no site can run it: below
			args = append(args, strings.TrimPrefix(f, "../../"))
		}
	}
	if code, stdout, stderr := gridsub(t, args...); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, stdout, _ := gridsub(t, "validate", "examples/toowide.yaml"); code != exitJobFailed || !strings.Contains(stdout, "needs 300 nodes") {
		t.Fatalf("toowide: exit %d\n%s", code, stdout)
	}
}

func TestSitesJSON(t *testing.T) {
	code, stdout, stderr := gridsub(t, "sites", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []siteRow
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0].Name != "Beijing" || rows[0].Nodes != 128 || rows[0].Free == nil || *rows[0].Free != 128 {
		t.Fatalf("rows %+v", rows)
	}
}

func TestUsageErrors(t *testing.T) {
	if code, _, stderr := gridsub(t, "a.yaml", "b.yaml"); code != exitUsage || !strings.Contains(stderr, "one job file at a time") {
		t.Fatalf("two files: exit %d %s", code, stderr)
	}
	if code, _, stderr := gridsub(t, "nosuch.yaml"); code != exitUsage || !strings.Contains(stderr, "nosuch.yaml") {
		t.Fatalf("missing file: exit %d %s", code, stderr)
	}
	if code, _, stderr := gridsub(t, "--output", "xml", "sites"); code != exitUsage || !strings.Contains(stderr, "table or json") {
		t.Fatalf("bad output: exit %d %s", code, stderr)
	}
}

// TestEmbeddedRunsNeverShareIDs: every embedded run numbers its jobs afresh,
// so the ids must differ between runs, or a second run would overwrite the
// first one's outputs and reuse its remote tags and job directories.
func TestEmbeddedRunsNeverShareIDs(t *testing.T) {
	out := t.TempDir()
	ids := map[string]bool{}
	for range 2 {
		code, stdout, stderr := gridsub(t, "examples/hello.yaml", "--out-dir", out, "--output", "json", "--time-scale", "1e6")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var j struct{ ID string }
		if err := json.Unmarshal([]byte(stdout), &j); err != nil || j.ID == "" {
			t.Fatalf("no id in %s (%v)", stdout, err)
		}
		ids[j.ID] = true
	}
	dirs, _ := os.ReadDir(out)
	if len(ids) != 2 || len(dirs) != 2 {
		t.Fatalf("ids %v, output dirs %d: two runs must not share an id", ids, len(dirs))
	}
}

// TestDataSizeIsTheStagedInputs: a job submitted from this machine (no origin
// site) moves its inputs, so that is the size the transfer-cost term prices.
func TestDataSizeIsTheStagedInputs(t *testing.T) {
	j, err := loadJob(filepath.Join(repoRoot, "examples/staging.yaml"), []string{"Beijing", "Shanghai", "Harbin"})
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, in := range j.Inputs {
		fi, err := os.Stat(in.Local)
		if err != nil {
			t.Fatal(err)
		}
		want += fi.Size()
	}
	r, err := toRequest(j, time.Unix(0, 0), "")
	if err != nil {
		t.Fatal(err)
	}
	if want == 0 || r.DataSize != want {
		t.Fatalf("data size %d, want the inputs' %d bytes", r.DataSize, want)
	}
}

// examples/reservation.yaml on the embedded testbed: admitted at once,
// bound when its window opens, run inside it; its JSON says so.
func TestReservationExampleRunsInItsWindow(t *testing.T) {
	code, stdout, stderr := gridsub(t, "examples/reservation.yaml", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"reservation admitted, window opens +15m0s", "reservation bound: "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr)
		}
	}
	var j jobJSON
	if err := json.Unmarshal([]byte(stdout), &j); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	r := j.Resv
	if j.State != "completed" || r == nil || r.State != "released" || r.Site == "" || r.Start == nil || r.Start.Before(r.Earliest) ||
		j.Start == nil || j.Start.Before(r.Earliest) || j.End.After(r.Latest) {
		t.Fatalf("job %+v reservation %+v; want completed inside its released reservation", j, r)
	}
}

// A window no site can hold is refused at once, with the admission test's
// reason, and exits 1.
func TestReservationRefusedAtOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "big.yaml")
	job := "name: big\ncommand: [\"true\"]\nresources: {nodes: 200, walltime: 10m}\nscheduling:\n  reservation: {earliest_start: +15m, latest_end: +45m}\n"
	if err := os.WriteFile(path, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := gridsub(t, path)
	if code != 1 || !strings.Contains(stdout, "reservation not admitted: no candidate resource: needs 200 nodes on one resource, the largest has 128") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
