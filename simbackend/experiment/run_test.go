package experiment

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/simbackend/swf"
)

// needTraces skips when the PWA traces are not on this machine.
func needTraces(t testing.TB) {
	t.Helper()
	if dir, ok := swf.WorkloadsDir(); !ok {
		t.Skipf("workload traces not found (looked in %q): set GRIDSUB_WORKLOADS to the directory holding CTC-SP2-1996-3.1-cln.swf.gz", dir)
	}
}

func runTiny(t *testing.T, workers int) (*Summary, []byte) {
	t.Helper()
	return runTinyWith(t, Options{Workers: workers})
}

func runTinyWith(t *testing.T, o Options) (*Summary, []byte) {
	t.Helper()
	e, err := Load("testdata/tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Execute(context.Background(), e, o)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, s); err != nil {
		t.Fatal(err)
	}
	return s, b.Bytes()
}

// TestDeterministic runs the tiny experiment twice with one worker and once
// with two: results.csv must be identical byte for byte.
func TestDeterministic(t *testing.T) {
	needTraces(t)
	_, a := runTiny(t, 1)
	_, b := runTiny(t, 1)
	_, c := runTiny(t, 2)
	if !bytes.Equal(a, b) {
		t.Fatalf("two runs with one worker differ:\n%s\n---\n%s", a, b)
	}
	if !bytes.Equal(a, c) {
		t.Fatalf("1 and 2 workers differ:\n%s\n---\n%s", a, c)
	}
}

// TestViaBrokerSameResults: replaying every run through the real broker
// gives the results.csv of the default direct driver, byte for byte.
func TestViaBrokerSameResults(t *testing.T) {
	needTraces(t)
	_, direct := runTinyWith(t, Options{Workers: 2})
	_, broker := runTinyWith(t, Options{Workers: 2, ViaBroker: true})
	if !bytes.Equal(direct, broker) {
		t.Fatalf("direct and via-broker results differ:\n%s\n---\n%s", direct, broker)
	}
}

func TestCSVAndJSONShape(t *testing.T) {
	needTraces(t)
	s, out := runTiny(t, 2)
	rows, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// 2 workloads × 2 policies × 2 p.
	if len(rows) != 1+8 {
		t.Fatalf("%d rows", len(rows))
	}
	head := strings.Join(rows[0], ",")
	wantHead := "run,workload,h_set,bandwidth,policy,p,seed,awrt,awwt,au,mean_wait,mean_response,mean_bsld,max_bsld,makespan,jobs,ran,rejected,failed,unfinished,multisite,cycles,util_Beijing,util_Shanghai,util_Harbin"
	if head != wantHead {
		t.Fatalf("header\n %s\nwant\n %s", head, wantHead)
	}
	if got := strings.Join(rows[1][:6], ","); got != "0,1,small,100KB/s,greedy-easy,1" {
		t.Fatalf("first row params %s", got)
	}
	col := func(name string) int {
		for i, h := range rows[0] {
			if h == name {
				return i
			}
		}
		t.Fatalf("no column %s", name)
		return -1
	}
	for _, r := range rows[1:] {
		if r[col("jobs")] != "300" || r[col("ran")] != "300" || r[col("unfinished")] != "0" {
			t.Fatalf("row %v: want 300 jobs all run", r)
		}
		if r[col("policy")] == "single-site-easy" && r[col("multisite")] != "0" {
			t.Fatalf("single-site ran multi-site jobs: %v", r)
		}
	}
	for _, r := range s.Runs {
		m := r.Metrics
		if !(m["au"] > 0 && m["au"] <= 1) || m["awrt"] < m["awwt"] || m["awwt"] < 0 {
			t.Fatalf("implausible metrics %+v", m)
		}
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, s); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Experiment struct {
			Name     string   `json:"name"`
			Policies []string `json:"policies"`
		} `json:"experiment"`
		Params  []string `json:"params"`
		Metrics []string `json:"metrics"`
		Runs    []struct {
			Index   int                `json:"index"`
			Params  map[string]any     `json:"params"`
			Metrics map[string]float64 `json:"metrics"`
			Wall    float64            `json:"wall_seconds"`
		} `json:"runs"`
		Wall    float64 `json:"wall_seconds"`
		Workers int     `json:"workers"`
	}
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `"reference"`) || !strings.Contains(b.String(), `"trace": "CTC-SP2-1996-3.1-cln.swf.gz"`) {
		t.Fatalf("summary.json shows the sections of the wrong kind:\n%.600s", b.String())
	}
	if back.Experiment.Name != "tiny" || len(back.Experiment.Policies) != 2 || len(back.Runs) != 8 || back.Workers != 2 || back.Wall <= 0 {
		t.Fatalf("summary.json: %+v", back)
	}
	if len(back.Runs[3].Metrics) != len(back.Metrics) || back.Runs[3].Params["policy"] != "single-site-easy" || back.Runs[3].Wall <= 0 {
		t.Fatalf("run 3 in summary.json: %+v", back.Runs[3])
	}
}

func TestWriteAllPlots(t *testing.T) {
	needTraces(t)
	s, _ := runTiny(t, 2)
	dir := t.TempDir()
	files, err := WriteAll(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{SummaryFile, ResultsFile, "tiny-awrt.png", "tiny-awrt.svg", "tiny-au.png", "tiny-au.svg"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Size() < 100 {
			t.Errorf("%s: %v (size %v)", name, err, st)
		}
	}
	if len(files) != 6 {
		t.Errorf("wrote %v", files)
	}
	lines, cats := PlotData(s.Experiment.Plots[0], s)
	if len(lines) != 2 || len(cats) != 2 || lines[0].Label != "greedy-easy" || len(lines[0].X) != 2 || lines[0].X[1] != 1.3 {
		t.Fatalf("plot data %+v %v", lines, cats)
	}
	if lines[0].Y[0] != s.Runs[0].Metrics["awrt"] || lines[1].Y[1] != s.Runs[3].Metrics["awrt"] {
		t.Fatalf("plot points are not the runs' AWRT: %+v", lines)
	}
	if lines, _ := PlotData(s.Experiment.Plots[1], s); len(lines) != 4 || lines[2].Label != "greedy-easy, Workload 2" {
		t.Fatalf("series of the AU plot: %+v", lines)
	}
}

func TestCancel(t *testing.T) {
	needTraces(t)
	e, err := Load("testdata/tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Execute(ctx, e, Options{Workers: 2}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
}

func TestMissingTrace(t *testing.T) {
	t.Setenv("GRIDSUB_WORKLOADS", filepath.Join(t.TempDir(), "nowhere"))
	e, err := Load("testdata/tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Execute(context.Background(), e, Options{})
	if !errors.Is(err, ErrNoTrace) || !strings.Contains(err.Error(), "nowhere") || !strings.Contains(err.Error(), "set GRIDSUB_WORKLOADS") {
		t.Fatalf("missing trace: %v", err)
	}
}

func TestBar(t *testing.T) {
	var b bytes.Buffer
	bar := NewBar(&b, false, "fig")
	clock := bar.start
	bar.now = func() time.Time { return clock }
	clock = clock.Add(10 * time.Second)
	bar.Update(1, 4, 0.25)
	bar.Update(1, 4, 0.3) // same run count: no new plain line
	clock = clock.Add(10 * time.Second)
	bar.Update(2, 4, 0.5)
	clock = clock.Add(31 * time.Second)
	bar.Update(2, 4, 0.6) // no run finished, but 30 s passed: a line
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("plain output %q", b.String())
	}
	if !strings.Contains(lines[0], "1/4 runs  25%") || !strings.Contains(lines[0], "elapsed 10s  ETA 30s") {
		t.Errorf("line 1 %q", lines[0])
	}
	if !strings.Contains(lines[1], "2/4 runs  50%  elapsed 20s  ETA 20s") || !strings.Contains(lines[1], "[############............]") {
		t.Errorf("line 2 %q", lines[1])
	}
	var tty bytes.Buffer
	tb := NewBar(&tty, true, "fig")
	tb.Update(1, 2, 0.5)
	tb.Finish()
	if !strings.HasPrefix(tty.String(), "\rfig [") || !strings.HasSuffix(tty.String(), "\n") {
		t.Errorf("terminal output %q", tty.String())
	}
}

// BenchmarkExecuteTiny runs the tiny experiment (8 runs of 300 jobs) on
// GOMAXPROCS workers: the cost of the runner around replay.Run.
func BenchmarkExecuteTiny(b *testing.B) {
	needTraces(b)
	e, err := Load("testdata/tiny.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Execute(context.Background(), e, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
