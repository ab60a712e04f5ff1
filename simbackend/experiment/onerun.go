package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gridsub/gridsub/backends/regularfile"
)

// The pieces of Execute a sweep spread over batch sites uses (gridsub sim
// --on): ExecuteRun performs one run where an element of a job array runs,
// WriteRunFile and ReadRunFile carry its result back, and Gather builds the
// same Summary as Execute from the results of every run. A run is
// deterministic, so a run performed alone gives the metrics it has inside
// Execute, and Gather's results.csv is byte for byte the local run's.

// ExecuteRun performs run index of e (an index of e.Expand()) alone.
func ExecuteRun(ctx context.Context, e *Experiment, index int, viaBroker bool) (Result, error) {
	runs := e.Expand()
	if index < 0 || index >= len(runs) {
		return Result{}, fmt.Errorf("%w: run %d: the experiment has runs 0..%d", ErrValue, index, len(runs)-1)
	}
	exec, err := prepare(e, viaBroker)
	if err != nil {
		return Result{}, err
	}
	if err := checkPlugins(ctx, e); err != nil {
		return Result{}, err
	}
	t0 := time.Now()
	m, err := exec(ctx, runs[index].Params, func(int, int) {})
	if err != nil {
		return Result{}, fmt.Errorf("run %d (%s): %w", index, describeParams(e.Kind, runs[index].Params), err)
	}
	return Result{Run: runs[index], Metrics: m, WallSeconds: time.Since(t0).Seconds()}, nil
}

// Gather builds the Summary of e from one result per run, in any order: the
// Summary Execute would have returned, wall time and workers aside. It
// refuses a set with a run missing, doubled, or whose parameters are not
// that run's.
func Gather(e *Experiment, results []Result, workers int, wall time.Duration) (*Summary, error) {
	runs := e.Expand()
	out := make([]Result, len(runs))
	seen := make([]bool, len(runs))
	for _, r := range results {
		if r.Index < 0 || r.Index >= len(runs) {
			return nil, fmt.Errorf("%w: a result names run %d; the experiment has runs 0..%d", ErrValue, r.Index, len(runs)-1)
		}
		if seen[r.Index] {
			return nil, fmt.Errorf("%w: run %d has two results", ErrValue, r.Index)
		}
		if got, want := describeParams(e.Kind, r.Params), describeParams(e.Kind, runs[r.Index].Params); got != want {
			return nil, fmt.Errorf("%w: the result of run %d is for %s, not %s", ErrValue, r.Index, got, want)
		}
		seen[r.Index] = true
		out[r.Index] = Result{Run: runs[r.Index], Metrics: r.Metrics, WallSeconds: r.WallSeconds}
	}
	for i, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("%w: run %d (%s) has no result", ErrValue, i, describeParams(e.Kind, runs[i].Params))
		}
	}
	return &Summary{
		Experiment: e, File: e.file, Params: ParamNames(e.Kind), Metrics: e.MetricNames(),
		Workers: workers, WallSeconds: wall.Seconds(), Runs: out,
	}, nil
}

// RunFileFormat names the format of a run file.
const RunFileFormat = "gridsub-sim-run/1"

// MaxRunFile bounds a run file read back.
const MaxRunFile = 4 << 20

// runFile is one run's result as an element writes it. Metrics are
// strings in Go's shortest round-trip form ('g', -1), so every float64,
// NaN and infinities included, reads back bit for bit (JSON numbers cannot
// hold NaN).
type runFile struct {
	Format      string            `json:"format"`
	Experiment  string            `json:"experiment"`
	Index       int               `json:"index"`
	Params      string            `json:"params"`
	Metrics     map[string]string `json:"metrics"`
	WallSeconds float64           `json:"wall_seconds"`
}

// WriteRunFile writes r, a run of e, as a run file.
func WriteRunFile(w io.Writer, e *Experiment, r Result) error {
	f := runFile{Format: RunFileFormat, Experiment: e.Name, Index: r.Index, Params: describeParams(e.Kind, r.Params),
		Metrics: make(map[string]string, len(r.Metrics)), WallSeconds: r.WallSeconds}
	for k, v := range r.Metrics {
		f.Metrics[k] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(f)
}

// ReadRunFile reads the run file at path, which must hold run index of e
// (its name and parameters are checked): a regular file of at most
// MaxRunFile bytes.
func ReadRunFile(path string, e *Experiment, index int) (Result, error) {
	data, err := regularfile.Read(path, MaxRunFile)
	if err != nil {
		return Result{}, err
	}
	var f runFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Result{}, fmt.Errorf("%s: %w: not a run file: %v", filepath.Base(path), ErrSyntax, err)
	}
	runs := e.Expand()
	switch {
	case f.Format != RunFileFormat:
		return Result{}, fmt.Errorf("%s: %w: format %q, want %q", path, ErrValue, f.Format, RunFileFormat)
	case f.Experiment != e.Name:
		return Result{}, fmt.Errorf("%s: %w: a run of experiment %q, not %q", path, ErrValue, f.Experiment, e.Name)
	case index < 0 || index >= len(runs):
		return Result{}, fmt.Errorf("%s: %w: run %d: the experiment has runs 0..%d", path, ErrValue, index, len(runs)-1)
	case f.Index != index:
		return Result{}, fmt.Errorf("%s: %w: holds run %d, want run %d", path, ErrValue, f.Index, index)
	case f.Params != describeParams(e.Kind, runs[index].Params):
		return Result{}, fmt.Errorf("%s: %w: run %d is %s here, the file says %s", path, ErrValue, index, describeParams(e.Kind, runs[index].Params), f.Params)
	}
	m := make(map[string]float64, len(f.Metrics))
	for k, s := range f.Metrics {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w: metric %s: %q is not a number", path, ErrValue, k, s)
		}
		m[k] = v
	}
	return Result{Run: runs[index], Metrics: m, WallSeconds: f.WallSeconds}, nil
}

// Traces lists the trace files the experiment's runs read, by the names
// the file gives them (looked up by TracePath): what a run elsewhere needs
// beside the experiment file.
func (e *Experiment) Traces() []string {
	switch e.Kind {
	case KindCTCReference:
		return []string{e.Reference.Trace, e.Reference.Schedule}
	case KindDRRM:
		if e.DRRM.Set == SetOSC {
			return []string{e.DRRM.Trace}
		}
		return nil
	case KindDGJS, KindTrustMinMin:
		return nil
	}
	return []string{e.Workload.Trace}
}
