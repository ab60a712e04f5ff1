package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/regularfile"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/jobrules"
	"github.com/gridsub/gridsub/simbackend/experiment"
	"github.com/gridsub/gridsub/simbackend/experiment/paper003"
)

// A sweep on batch sites (gridsub sim EXPERIMENT --on SITE,...): the
// experiment's runs become one grid job array per site, submitted to the
// running daemon. Per site one stage-in job puts the gridsub binary, the
// experiment file and its traces into <remote_dir>/gridsub-sweeps/<key>/;
// every element links them into its job directory (inputs that lie at the
// site, docs/data-location.md), runs one run (gridsub sim --run-index) and
// returns its run file, which is gathered as soon as the element ends.
// Everything the client must remember lives in <out>/sweep-state.json,
// written before each submission it names, so a client killed at any point
// resumes where it was: submissions carry idempotency keys derived from the
// state, and a run whose file is in <out>/runs/ is never run again.

const (
	sweepStateFile = "sweep-state.json"
	sweepRunsDir   = "runs"
	sweepRunFile   = "run.json"       // what an element writes and returns
	sweepArea      = "gridsub-sweeps" // below each site's remote_dir
	sweepFormat    = "gridsub-sweep/1"
)

// sweepState is <out>/sweep-state.json.
type sweepState struct {
	Format      string    `json:"format"`
	Key         string    `json:"key"`         // names the staging area and every idempotency key
	Fingerprint string    `json:"fingerprint"` // of the experiment file, the binary and the run arguments
	Started     time.Time `json:"started"`
	Sites       []string  `json:"sites"`
	// Assign is each run's site (index: run index).
	Assign []string `json:"assign"`
	// Stage is each site's stage-in job; Arrays every array submitted.
	Stage  map[string]*sweepJob `json:"stage"`
	Arrays []*sweepArray        `json:"arrays"`
	// Cleanup is each site's job that removes the staging area once every
	// run is done.
	Cleanup map[string]string `json:"cleanup,omitempty"`
}

// sweepJob is one submission: Gen numbers the attempts at it (its
// idempotency key), ID is the daemon's job once it answered.
type sweepJob struct {
	Gen int    `json:"gen"`
	ID  string `json:"id,omitempty"`
}

type sweepArray struct {
	sweepJob
	Site  string `json:"site"`
	Runs  []int  `json:"runs"`
	Ended bool   `json:"ended,omitempty"` // the parent ended; its runs without a file failed
}

// sweepTrace is a trace a run reads: where it is here, its name there.
type sweepTrace struct{ local, remote string }

func runSweep(ctx context.Context, g *globals, f *simFlags, file string) error {
	if paper003.IsKind(file) {
		return usageErr(fmt.Errorf("--on: %s is a paper003 experiment, which runs on this machine only; leave --on out", file))
	}
	e, err := loadSimExperiment(f, file)
	if err != nil {
		return err
	}
	if f.limit < 0 {
		return usageErr(fmt.Errorf("--limit must be >= 1 (or 0 for no limit), got %d", f.limit))
	}
	for i, s := range f.on {
		if slices.Index(f.on, s) != i {
			return usageErr(fmt.Errorf("--on: site %s listed twice", s))
		}
	}
	if f.poll <= 0 || f.patience <= 0 {
		return usageErr(fmt.Errorf("--poll and --patience must be > 0"))
	}
	if f.walltime <= 0 {
		return usageErr(fmt.Errorf("--walltime must be > 0, got %s", f.walltime))
	}
	var traces []sweepTrace
	for _, name := range e.Traces() {
		if filepath.IsAbs(name) || !filepath.IsLocal(name) || strings.HasPrefix(filepath.Base(name), ".") {
			return usageErr(fmt.Errorf("--on: the trace %q must be named relative to $GRIDSUB_WORKLOADS (a file name, no absolute path, no ..) to be staged at the sites", name))
		}
		p, err := experiment.TracePath(name)
		if err != nil {
			return usageErr(err)
		}
		traces = append(traces, sweepTrace{local: p, remote: filepath.ToSlash(name)})
	}
	bin, err := os.Executable()
	if err != nil {
		return &exitError{exitInternal, fmt.Errorf("--on: finding the gridsub binary to stage: %w", err)}
	}
	if bin, err = filepath.EvalSymlinks(bin); err != nil {
		return &exitError{exitInternal, fmt.Errorf("--on: finding the gridsub binary to stage: %w", err)}
	}
	expFile, err := filepath.Abs(file)
	if err != nil {
		return usageErr(err)
	}
	out := f.out
	if out == "" {
		out = filepath.Join("out", e.Name)
	}
	if err := os.MkdirAll(filepath.Join(out, sweepRunsDir), 0o755); err != nil {
		return &exitError{exitInternal, err}
	}
	fp, err := sweepFingerprint(expFile, bin, traces, f.runArgs())
	if err != nil {
		return &exitError{exitInternal, err}
	}
	runs := e.Expand()
	if len(runs) == 0 {
		return usageErr(fmt.Errorf("%s has no runs", file))
	}

	// A state of another sweep is refused before the daemon is asked.
	statePath := filepath.Join(out, sweepStateFile)
	st, err := loadSweepState(statePath)
	switch {
	case err != nil:
		return usageErr(err)
	case st != nil && (st.Fingerprint != fp || !slices.Equal(st.Sites, f.on) || len(st.Assign) != len(runs)):
		return usageErr(fmt.Errorf("%s holds a sweep of another experiment, binary, run arguments or --on; "+
			"give another --out, or delete %s to start this one afresh", out, statePath))
	}

	c, err := mustConnect(ctx, g)
	if err != nil {
		return err
	}
	if c.sim {
		return usageErr(fmt.Errorf("--on: the daemon at %s runs simulated sites, which hold no files and run no programs; start it with the batch sites (`gridsub --config FILE serve`)", c.where))
	}
	sr, err := c.SiteStatus(ctx)
	if err != nil {
		return clientErr(err)
	}
	weight := map[string]int{}
	for _, s := range f.on {
		i := slices.IndexFunc(sr.Details, func(d api.Site) bool { return d.Name == s })
		if i < 0 {
			return usageErr(fmt.Errorf("--on: unknown site %q (the daemon at %s has %s)", s, c.where, strings.Join(sr.Sites, ", ")))
		}
		if d := sr.Details[i]; d.Kind != "slurm" && d.Kind != "pbs" {
			return usageErr(fmt.Errorf("--on: site %s is a %s site; a sweep runs on batch sites (slurm, pbs), whose job directories can link the staged binary", s, d.Kind))
		} else {
			weight[s] = max(1, d.Nodes*max(1, d.CoresPerNode))
		}
	}

	if st == nil {
		st = &sweepState{Format: sweepFormat, Key: newSweepKey(), Fingerprint: fp, Started: time.Now().UTC(), Sites: slices.Clone(f.on),
			Assign: assignRuns(len(runs), f.on, weight), Stage: map[string]*sweepJob{}}
		if err := saveSweepState(statePath, st); err != nil {
			return &exitError{exitInternal, err}
		}
	} else {
		fmt.Fprintf(g.stderr, "gridsub: resuming the sweep in %s (started %s)\n", out, st.Started.Format(time.RFC3339))
	}

	sw := &sweeper{g: g, f: f, c: c, e: e, runs: runs, out: out, statePath: statePath, st: st,
		file: expFile, bin: bin, traces: traces}
	if err := sw.run(ctx); err != nil {
		return err
	}
	sw.cleanup(ctx)
	results := make([]experiment.Result, len(runs))
	for i := range runs {
		if results[i], err = experiment.ReadRunFile(sw.runPath(i), e, i); err != nil {
			return &exitError{exitInternal, fmt.Errorf("sweep: %w", err)}
		}
	}
	s, err := experiment.Gather(e, results, len(f.on), time.Since(st.Started))
	if err != nil {
		return &exitError{exitInternal, fmt.Errorf("sweep: %w", err)}
	}
	return writeSimResults(g, file, out, s, strings.Join(f.on, ", "))
}

// sweeper drives one sweep to its end.
type sweeper struct {
	g         *globals
	f         *simFlags
	c         *daemonClient
	e         *experiment.Experiment
	runs      []experiment.Run
	out       string
	statePath string
	st        *sweepState
	file, bin string
	traces    []sweepTrace
	failed    map[int]string // run -> why, in this invocation
}

func (sw *sweeper) runPath(i int) string {
	return filepath.Join(sw.out, sweepRunsDir, strconv.Itoa(i)+".json")
}

func (sw *sweeper) done(i int) bool {
	_, err := experiment.ReadRunFile(sw.runPath(i), sw.e, i)
	return err == nil
}

func (sw *sweeper) save() error {
	if err := saveSweepState(sw.statePath, sw.st); err != nil {
		return &exitError{exitInternal, err}
	}
	return nil
}

// run stages, submits and gathers until every run has its file, or every
// array ended with some runs failed.
func (sw *sweeper) run(ctx context.Context) error {
	sw.failed = map[int]string{}
	doneN := 0
	for i := range sw.runs {
		if sw.done(i) {
			doneN++
		}
	}
	bar := newSweepProgress(sw.g, sw.e.Name+" on "+strings.Join(sw.f.on, ","), sw.st.Started)
	defer bar.Finish()
	bar.Update(doneN, len(sw.runs), 0)
	if doneN == len(sw.runs) {
		return nil
	}
	if err := sw.submit(ctx); err != nil {
		return err
	}
	var silentSince time.Time
	for {
		progressed, err := sw.poll(ctx)
		switch {
		case err == nil:
			silentSince = time.Time{}
		case ctx.Err() != nil:
			return &exitError{exitInternal, fmt.Errorf("sweep interrupted; its jobs go on in the daemon, and the same command resumes it (state in %s)", sw.statePath)}
		default:
			var ee *exitError
			if errors.As(err, &ee) {
				return err
			}
			if silentSince.IsZero() {
				silentSince = time.Now()
				fmt.Fprintf(sw.g.stderr, "gridsub: the daemon does not answer (%v); waiting up to %s for it\n", err, sw.f.patience)
			}
			if time.Since(silentSince) > sw.f.patience {
				return &exitError{exitInternal, fmt.Errorf("the daemon at %s has not answered for %s: %w; once it runs again, the same command resumes the sweep (state in %s)",
					sw.c.where, sw.f.patience, err, sw.statePath)}
			}
		}
		doneN = 0
		for i := range sw.runs {
			if sw.done(i) {
				doneN++
			}
		}
		if progressed || err == nil {
			bar.Update(doneN, len(sw.runs), 0)
		}
		if doneN == len(sw.runs) {
			return nil
		}
		if err == nil && !slices.ContainsFunc(sw.st.Arrays, func(a *sweepArray) bool { return !a.Ended }) {
			return sw.failure(doneN)
		}
		select {
		case <-ctx.Done():
			return &exitError{exitInternal, fmt.Errorf("sweep interrupted; its jobs go on in the daemon, and the same command resumes it (state in %s)", sw.statePath)}
		case <-time.After(sw.f.poll):
		}
	}
}

func (sw *sweeper) failure(doneN int) error {
	var lines []string
	for i := range sw.runs {
		if sw.done(i) {
			continue
		}
		why := sw.failed[i]
		if why == "" {
			why = "ended without a result"
		}
		lines = append(lines, fmt.Sprintf("  run %d (%s) at %s: %s", i, describe(sw.e, sw.runs[i]), sw.st.Assign[i], why))
	}
	return &exitError{exitInternal, fmt.Errorf("sweep: %d of %d runs done, %d failed after the broker's retries:\n%s\nthe same command runs the failed ones again (state in %s)",
		doneN, len(sw.runs), len(lines), strings.Join(lines, "\n"), sw.statePath)}
}

func describe(e *experiment.Experiment, r experiment.Run) string {
	var parts []string
	for _, n := range experiment.ParamNames(e.Kind) {
		parts = append(parts, n+"="+r.Params.Value(n))
	}
	return strings.Join(parts, " ")
}

// submit makes sure every site has a good stage-in job and every run not
// done is in an array that has not ended. Each submission is recorded in
// the state before it is sent, under an idempotency key the state fixes,
// so a client killed in between sends the same submission again and the
// daemon answers with the job it already has.
func (sw *sweeper) submit(ctx context.Context) error {
	// Arrays that ended while no client watched: read their last results.
	for _, a := range sw.st.Arrays {
		if a.ID != "" && !a.Ended {
			if _, err := sw.pollArray(ctx, a); err != nil {
				return sw.daemonErr(err)
			}
		}
	}
	for _, site := range sw.st.Sites {
		var want []int
		for i, s := range sw.st.Assign {
			if s == site && !sw.done(i) && !slices.ContainsFunc(sw.st.Arrays, func(a *sweepArray) bool {
				return a.Site == site && !a.Ended && slices.Contains(a.Runs, i)
			}) {
				want = append(want, i)
			}
		}
		stage := sw.st.Stage[site]
		if stage == nil {
			stage = &sweepJob{}
			sw.st.Stage[site] = stage
		}
		if stage.ID != "" && len(want) > 0 {
			j, err := sw.c.Job(ctx, stage.ID)
			switch {
			case errors.Is(err, bridge.ErrNotFound):
				fmt.Fprintf(sw.g.stderr, "gridsub: the daemon no longer knows the staging job %s at %s; staging again\n", stage.ID, site)
				stage.Gen, stage.ID = stage.Gen+1, ""
			case err != nil:
				return sw.daemonErr(err)
			case j.State.Final() && j.State != bridge.Completed:
				fmt.Fprintf(sw.g.stderr, "gridsub: staging at %s (%s) ended %s: %s; staging again\n", site, stage.ID, j.State, j.Reason)
				stage.Gen, stage.ID = stage.Gen+1, ""
			}
		}
		if stage.ID == "" && (len(want) > 0 || slices.ContainsFunc(sw.st.Arrays, func(a *sweepArray) bool { return a.Site == site && !a.Ended && a.ID == "" })) {
			if err := sw.save(); err != nil {
				return err
			}
			req, err := sw.stageRequest(site, stage.Gen)
			if err != nil {
				return err
			}
			j, err := sw.c.Submit(ctx, req)
			if err != nil {
				return sw.submitErr(err, "staging at "+site)
			}
			stage.ID = j.ID
			if err := sw.save(); err != nil {
				return err
			}
		}
		// An array recorded but never answered goes again under its key.
		for _, a := range sw.st.Arrays {
			if a.Site == site && a.ID == "" {
				if err := sw.sendArray(ctx, a, stage.ID); err != nil {
					return err
				}
			}
		}
		if len(want) == 0 {
			continue
		}
		if len(want) > jobrules.MaxElements {
			return usageErr(fmt.Errorf("--on: %d runs for %s; an array holds at most %d: add a site or split the experiment (--seeds, --workload)", len(want), site, jobrules.MaxElements))
		}
		gen := 0
		for _, a := range sw.st.Arrays {
			if a.Site == site {
				gen = max(gen, a.Gen+1)
			}
		}
		a := &sweepArray{sweepJob: sweepJob{Gen: gen}, Site: site, Runs: want}
		sw.st.Arrays = append(sw.st.Arrays, a)
		if err := sw.save(); err != nil {
			return err
		}
		if err := sw.sendArray(ctx, a, stage.ID); err != nil {
			return err
		}
	}
	return nil
}

func (sw *sweeper) sendArray(ctx context.Context, a *sweepArray, stageID string) error {
	req, err := sw.arrayRequest(a, stageID)
	if err != nil {
		return err
	}
	j, err := sw.c.Submit(ctx, req)
	if err != nil {
		return sw.submitErr(err, fmt.Sprintf("the array of %d runs at %s", len(a.Runs), a.Site))
	}
	a.ID = j.ID
	fmt.Fprintf(sw.g.stderr, "gridsub: %d runs at %s: array %s (after staging %s)\n", len(a.Runs), a.Site, j.ID, stageID)
	return sw.save()
}

func (sw *sweeper) submitErr(err error, what string) error {
	if errors.Is(err, bridge.ErrBadRequest) || errors.Is(err, bridge.ErrUnknownSite) || errors.Is(err, bridge.ErrInfeasible) {
		return usageErr(fmt.Errorf("the daemon refused %s: %w", what, err))
	}
	return sw.daemonErr(fmt.Errorf("submitting %s: %w", what, err))
}

func (sw *sweeper) daemonErr(err error) error {
	return &exitError{exitInternal, fmt.Errorf("%w; the same command resumes the sweep (state in %s)", err, sw.statePath)}
}

// poll reads every unended array's elements, gathers the run files of
// those that completed and marks arrays whose parent ended.
func (sw *sweeper) poll(ctx context.Context) (bool, error) {
	progressed := false
	for _, a := range sw.st.Arrays {
		if a.Ended || a.ID == "" {
			continue
		}
		p, err := sw.pollArray(ctx, a)
		if err != nil {
			return progressed, err
		}
		progressed = progressed || p
	}
	return progressed, nil
}

func (sw *sweeper) pollArray(ctx context.Context, a *sweepArray) (bool, error) {
	parent, err := sw.c.Job(ctx, a.ID)
	if err != nil {
		return false, err
	}
	els, err := sw.c.ListAll(ctx, bridge.Filter{Parent: a.ID})
	if err != nil {
		return false, err
	}
	progressed := false
	for _, el := range els {
		i := el.Index
		if !slices.Contains(a.Runs, i) || !el.State.Final() || sw.done(i) {
			continue
		}
		if el.State != bridge.Completed {
			sw.failed[i] = fmt.Sprintf("element %s %s: %s", el.ID, el.State, el.Reason)
			continue
		}
		if err := sw.collect(el, i); err != nil {
			sw.failed[i] = err.Error()
			continue
		}
		progressed = true
	}
	if parent.State.Final() {
		if parent.State != bridge.Completed {
			for _, i := range a.Runs {
				if !sw.done(i) && sw.failed[i] == "" {
					sw.failed[i] = fmt.Sprintf("array %s %s: %s", a.ID, parent.State, parent.Reason)
				}
			}
		}
		a.Ended = true
		return true, sw.save()
	}
	return progressed, nil
}

// collect copies an element's run file, checked, into <out>/runs/.
func (sw *sweeper) collect(el *bridge.Job, i int) error {
	k := slices.IndexFunc(el.Outputs, func(p string) bool { return filepath.Base(p) == sweepRunFile })
	if k < 0 {
		return fmt.Errorf("element %s completed without %s among its fetched outputs (%s); is the daemon on this machine?", el.ID, sweepRunFile, strings.Join(el.Outputs, ", "))
	}
	if _, err := experiment.ReadRunFile(el.Outputs[k], sw.e, i); err != nil {
		return fmt.Errorf("element %s: %w", el.ID, err)
	}
	data, err := regularfile.Read(el.Outputs[k], experiment.MaxRunFile)
	if err != nil {
		return fmt.Errorf("element %s: %w", el.ID, err)
	}
	return writeFileAtomic(sw.runPath(i), data)
}

// stageRequest is site's stage-in job: the binary, the experiment file and
// the traces, moved into the sweep's area below the site's remote_dir
// (job directories are <remote_dir>/gridsub/<tag>), then the binary is
// asked to run there.
func (sw *sweeper) stageRequest(site string, gen int) (bridge.Request, error) {
	dest := path.Join("../..", sweepArea, sw.st.Key)
	inputs := []backends.StageFile{{Local: sw.bin, Remote: "gridsub", Mode: 0o755}, {Local: sw.file, Remote: "experiment.yaml"}}
	names := []string{"gridsub", "experiment.yaml"}
	for _, t := range sw.traces {
		inputs = append(inputs, backends.StageFile{Local: t.local, Remote: t.remote})
		names = append(names, t.remote)
	}
	var size int64
	for _, in := range inputs {
		fi, err := os.Stat(in.Local)
		if err != nil {
			return bridge.Request{}, usageErr(fmt.Errorf("--on: %w", err))
		}
		size += fi.Size()
	}
	script := "set -eu\nd=" + shq(dest) + "\nmkdir -p \"$d\"\nfor f in " + shqAll(names) + "; do\n" +
		"  mkdir -p \"$d/$(dirname \"$f\")\"\n  cp -p \"$f\" \"$d/$f.part\"\n  mv -f \"$d/$f.part\" \"$d/$f\"\ndone\n" +
		"\"$d/gridsub\" sim --help >/dev/null || { echo \"the staged gridsub does not run on $(uname -sm)\" >&2; exit 1; }\n"
	return bridge.Request{
		Name: "sweep-stage-" + sw.st.Key, Script: script, Nodes: 1, CoresPerNode: 1, Estimate: 10 * time.Minute,
		Inputs: inputs, DataSize: size, Sites: []string{site}, QoS: sw.f.qos,
		IdempotencyKey: fmt.Sprintf("sweep-%s-stage-%s-%d", sw.st.Key, site, gen),
	}, nil
}

// cleanup submits, once every run is done, one job per site that removes
// the sweep's staging area there. A failure to submit is reported, not
// fatal: the results are complete.
func (sw *sweeper) cleanup(ctx context.Context) {
	if sw.st.Cleanup == nil {
		sw.st.Cleanup = map[string]string{}
	}
	for _, site := range sw.st.Sites {
		if st := sw.st.Stage[site]; st == nil || st.ID == "" || sw.st.Cleanup[site] != "" {
			continue
		}
		j, err := sw.c.Submit(ctx, bridge.Request{
			Name: "sweep-clean-" + sw.st.Key, Script: "rm -rf -- " + shq(path.Join("../..", sweepArea, sw.st.Key)) + "\n",
			Nodes: 1, CoresPerNode: 1, Estimate: 10 * time.Minute, Sites: []string{site}, QoS: sw.f.qos,
			IdempotencyKey: fmt.Sprintf("sweep-%s-clean-%s", sw.st.Key, site),
		})
		if err != nil {
			fmt.Fprintf(sw.g.stderr, "gridsub: warning: removing the staging area %s/%s at %s: %v (remove it by hand)\n", sweepArea, sw.st.Key, site, err)
			continue
		}
		sw.st.Cleanup[site] = j.ID
		if err := saveSweepState(sw.statePath, sw.st); err != nil {
			fmt.Fprintf(sw.g.stderr, "gridsub: warning: %v\n", err)
		}
	}
}

// arrayRequest is the array of a's runs at its site, after staging.
func (sw *sweeper) arrayRequest(a *sweepArray, stageID string) (bridge.Request, error) {
	area := path.Join(sweepArea, sw.st.Key)
	var inputs []backends.SiteFile
	add := func(local, name string, mode string) error {
		fi, err := os.Stat(local)
		if err != nil {
			return usageErr(fmt.Errorf("--on: %w", err))
		}
		inputs = append(inputs, backends.SiteFile{Site: a.Site, Path: path.Join(area, name), Size: fi.Size(), Remote: name})
		return nil
	}
	if err := add(sw.bin, "gridsub", ""); err != nil {
		return bridge.Request{}, err
	}
	if err := add(sw.file, "experiment.yaml", ""); err != nil {
		return bridge.Request{}, err
	}
	for _, t := range sw.traces {
		if err := add(t.local, t.remote, ""); err != nil {
			return bridge.Request{}, err
		}
	}
	spec := arraySpec(a.Runs)
	if sw.f.limit > 0 {
		spec += "%" + strconv.Itoa(sw.f.limit)
	}
	script := "export GRIDSUB_WORKLOADS=\"$PWD\"\nexec ./gridsub sim experiment.yaml --run-index \"$GRIDSUB_ARRAY_INDEX\" --run-out " + sweepRunFile +
		" " + shqAll(sw.f.runArgs()) + "\n"
	req := bridge.Request{
		Name: "sweep-" + sw.e.Name, Script: script, Nodes: 1, CoresPerNode: 1, Estimate: sw.f.walltime,
		SiteInputs: inputs, Outputs: []string{sweepRunFile}, OutputDir: bridge.IDPlaceholder,
		Sites: []string{a.Site}, QoS: sw.f.qos, Array: spec,
		IdempotencyKey: fmt.Sprintf("sweep-%s-array-%s-%d", sw.st.Key, a.Site, a.Gen),
	}
	if stageID != "" {
		req.AfterOK = []string{stageID}
	}
	return req, nil
}

// arraySpec writes sorted indices as SLURM ranges: 0-3,7,9-10.
func arraySpec(idx []int) string {
	s := slices.Clone(idx)
	sort.Ints(s)
	var parts []string
	for k := 0; k < len(s); {
		j := k
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if j > k {
			parts = append(parts, fmt.Sprintf("%d-%d", s[k], s[j]))
		} else {
			parts = append(parts, strconv.Itoa(s[k]))
		}
		k = j + 1
	}
	return strings.Join(parts, ",")
}

// assignRuns spreads the runs over the sites in proportion to their
// weights (cores), interleaved: each run goes to the site with the least
// share so far, the first listed on a tie.
func assignRuns(n int, sites []string, weight map[string]int) []string {
	got := map[string]int{}
	out := make([]string, n)
	for i := range out {
		best := ""
		for _, s := range sites {
			if best == "" || (got[s]+1)*weight[best] < (got[best]+1)*weight[s] {
				best = s
			}
		}
		out[i] = best
		got[best]++
	}
	return out
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func shqAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = shq(s)
	}
	return strings.Join(q, " ")
}

func newSweepKey() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

// sweepFingerprint hashes what decides the sweep's results: the
// experiment file, the binary that runs it, the traces and the run
// arguments. A state with another fingerprint is another sweep.
func sweepFingerprint(file, bin string, traces []sweepTrace, args []string) (string, error) {
	h := sha256.New()
	files := []string{file, bin}
	for _, t := range traces {
		files = append(files, t.local)
		fmt.Fprintf(h, "trace %s\n", t.remote)
	}
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
	}
	fmt.Fprintf(h, "args %q\n", args)
	return hex.EncodeToString(h.Sum(nil)), nil
}

func loadSweepState(p string) (*sweepState, error) {
	data, err := regularfile.Read(p, 16<<20)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sweep state: %w", err)
	}
	var st sweepState
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil || st.Format != sweepFormat || st.Stage == nil {
		return nil, fmt.Errorf("%s is not a sweep state gridsub can read (%v); delete it to start the sweep afresh", p, err)
	}
	if err := st.check(); err != nil {
		return nil, fmt.Errorf("%s: %w; delete it to start the sweep afresh", p, err)
	}
	return &st, nil
}

// check refuses a state that does not hold together (edited or corrupt):
// the key names remote paths and every run must have one of the sites.
func (st *sweepState) check() error {
	if len(st.Key) != 16 || strings.Trim(st.Key, "0123456789abcdef") != "" {
		return fmt.Errorf("key %q is not 16 hexadecimal digits", st.Key)
	}
	for i, s := range st.Assign {
		if !slices.Contains(st.Sites, s) {
			return fmt.Errorf("run %d is assigned to %q, not one of the sweep's sites %v", i, s, st.Sites)
		}
	}
	for _, a := range st.Arrays {
		if a == nil || !slices.Contains(st.Sites, a.Site) {
			return fmt.Errorf("an array names a site outside the sweep's %v", st.Sites)
		}
		for _, r := range a.Runs {
			if r < 0 || r >= len(st.Assign) {
				return fmt.Errorf("an array holds run %d; the sweep has runs 0..%d", r, len(st.Assign)-1)
			}
		}
	}
	for s, j := range st.Stage {
		if j == nil || !slices.Contains(st.Sites, s) {
			return fmt.Errorf("a stage-in job names site %q outside the sweep's %v", s, st.Sites)
		}
	}
	return nil
}

func saveSweepState(p string, st *sweepState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(p, append(data, '\n'))
}

// writeFileAtomic writes data to p through a synced temporary file renamed
// into place: p is the old or the new content, never a part.
func writeFileAtomic(p string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-"+filepath.Base(p)+"-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), p)
}

// runSimOne is gridsub sim --run-index: one run, its file written to
// --run-out (what an element of a sweep runs).
func runSimOne(ctx context.Context, f *simFlags, file string) error {
	if f.runOut == "" {
		return usageErr(errors.New("--run-index needs --run-out FILE"))
	}
	e, err := loadSimExperiment(f, file)
	if err != nil {
		return err
	}
	r, err := experiment.ExecuteRun(ctx, e, f.runIndex, f.viaBroker)
	switch {
	case errors.Is(err, experiment.ErrNoTrace), errors.Is(err, experiment.ErrValue):
		return usageErr(err)
	case err != nil:
		return &exitError{exitInternal, fmt.Errorf("sim %s: %w", file, err)}
	}
	var b bytes.Buffer
	if err := experiment.WriteRunFile(&b, e, r); err != nil {
		return &exitError{exitInternal, err}
	}
	if err := writeFileAtomic(f.runOut, b.Bytes()); err != nil {
		return &exitError{exitInternal, fmt.Errorf("--run-out: %w", err)}
	}
	return nil
}

// sweepProgress reports a sweep's progress on stderr: the bar of a local
// run (runs done of all, elapsed, ETA), or with --output json one JSON
// object per line each time the count changes:
//
//	{"experiment":"...","done":3,"total":9,"elapsed_seconds":12.5,"eta_seconds":25}
//
// Elapsed time counts from the sweep's start, across resumptions; the
// ETA extrapolates from the runs done since this client started.
type sweepProgress struct {
	bar     *experiment.Bar
	w       io.Writer
	label   string
	started time.Time // the sweep's
	t0      time.Time // this client's
	first   int       // runs done when this client started
	last    int
}

func newSweepProgress(g *globals, label string, started time.Time) *sweepProgress {
	p := &sweepProgress{label: label, started: started, t0: time.Now(), first: -1, last: -1}
	if g.json() {
		p.w = g.stderr
	} else {
		p.bar = experiment.NewBar(g.stderr, isTerminal(g.stderr), label)
	}
	return p
}

func (p *sweepProgress) Update(done, total int, _ float64) {
	if p.first < 0 {
		p.first = done
	}
	if p.bar != nil {
		p.bar.Update(done, total, 0)
		return
	}
	if done == p.last {
		return
	}
	p.last = done
	line := map[string]any{"experiment": p.label, "done": done, "total": total,
		"elapsed_seconds": roundSec(time.Since(p.started))}
	if n := done - p.first; n > 0 && done < total {
		line["eta_seconds"] = roundSec(time.Duration(float64(time.Since(p.t0)) / float64(n) * float64(total-done)))
	} else if done == total {
		line["eta_seconds"] = 0
	}
	b, _ := json.Marshal(line)
	fmt.Fprintf(p.w, "%s\n", b)
}

func (p *sweepProgress) Finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}

func roundSec(d time.Duration) float64 {
	return float64(d.Round(100*time.Millisecond)) / float64(time.Second)
}
