package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/bridge/batchscript"
	"github.com/gridsub/gridsub/bridge/jobfile"
	"github.com/gridsub/gridsub/internal/config"
)

type submitFlags struct {
	outDir    string
	outDirSet bool // --out-dir given: a daemon writes there (inside its output root), else below its root
	timeScale float64
	quiet     bool
	wait      bool     // with a daemon: follow the job (jobs.go)
	embedded  bool     // never hand the job to a daemon
	dryRun    bool     // explain the placement, submit nothing (explain.go)
	inject    []string // --inject-failure SITE@DELAY[+REPAIR] (inject.go)
	// --after, --afterok, --afterany: dependencies added to the job file's
	// own (job ids, or unique prefixes or suffixes of them).
	after, afterOK, afterAny []string
}

// addDeps adds the command line's dependencies to the job's.
func (f *submitFlags) addDeps(j *jobfile.Job) {
	j.After = append(j.After, f.after...)
	j.AfterOK = append(j.AfterOK, f.afterOK...)
	j.AfterAny = append(j.AfterAny, f.afterAny...)
}

func (f *submitFlags) register(c *cobra.Command) {
	fl := c.Flags()
	f.outDir = "gridsub-out"
	fl.Var(setString{&f.outDir, &f.outDirSet}, "out-dir", "directory for fetched outputs; each job gets <out-dir>/<job-id>/ (with a daemon: default its broker.output_root, and a given one must lie inside that)")
	fl.Float64Var(&f.timeScale, "time-scale", 0, "simulated sites only: virtual seconds per wall second (default: from the config, raised so a job ends in a few seconds)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no placement or progress on stderr, only the summary")
	fl.BoolVarP(&f.wait, "wait", "w", false, "when a daemon (gridsub serve) takes the job: follow it to its end, as without a daemon")
	fl.BoolVar(&f.embedded, "embedded", false, "run on an embedded broker even when a daemon is running")
	fl.BoolVar(&f.dryRun, "dry-run", false, "check the job as a submission would and print where it would be placed now, the alternatives and the sites it cannot use; submit nothing")
	fl.StringSliceVar(&f.afterOK, "afterok", nil, "hold the job until these jobs completed (ids, or unique prefixes or suffixes of them; comma-separated or repeated); added to the job file's afterok")
	fl.StringSliceVar(&f.afterAny, "afterany", nil, "hold the job until these jobs ended, however they ended; added to the job file's afterany")
	fl.StringSliceVar(&f.after, "after", nil, "hold the job until these jobs started; added to the job file's after")
	fl.StringArrayVar(&f.inject, "inject-failure", nil, "simulated sites only: SITE@DELAY[+REPAIR] makes SITE fail DELAY (virtual time) after the submission, losing its jobs and refusing work until repaired REPAIR later (never when not given); implies --embedded; repeatable")
}

// setString is a string flag that records whether it was given.
type setString struct {
	v   *string
	set *bool
}

func (s setString) String() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}
func (s setString) Set(v string) error { *s.v, *s.set = v, true; return nil }
func (s setString) Type() string       { return "string" }

func newSubmitCmd(g *globals) *cobra.Command {
	f := &submitFlags{}
	c := &cobra.Command{
		Use:   "submit job.yaml",
		Short: "Run a job and follow it to its end (same as `gridsub job.yaml`)",
		Long: `Submit runs one job: it validates the job file, asks the scheduler where the job
goes (printing the placement, its predicted start and end, and the alternatives
it beat), shows progress until the job ends, fetches the outputs and prints a
summary. Placement and progress go to stderr; the summary goes to stdout
(--output json for scripts). Ctrl-C cancels the job everywhere.

When a daemon runs (gridsub serve, found on its socket), the job goes to it
instead: submit prints the grid job id at once (--output json: the queued job)
and returns; --wait follows the job to its end with the same progress display
and exit status (Ctrl-C then stops following, the job goes on). --embedded
runs the job here even when a daemon runs.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSubmit(cmd.Context(), g, f, args[0])
		},
	}
	f.register(c)
	return c
}

// loadJob loads and checks a job file against the configured sites.
func loadJob(path string, sites []string) (*jobfile.Job, error) {
	if isBatchScript(path) { // #SBATCH, #PBS (fe_script.go)
		j, _, err := loadBatchScript(path, sites, batchscript.Options{Environ: os.Environ()})
		return j, err
	}
	j, err := jobfile.Load(path)
	if err != nil {
		return nil, err
	}
	if err := j.CheckSites(sites); err != nil {
		return nil, err
	}
	return j, nil
}

// toRequest turns a job file into a broker request submitted at now.
func toRequest(j *jobfile.Job, now time.Time, outDir string) (bridge.Request, error) {
	return j.Request(now, outDir)
}

// embeddedRoots are the roots of the embedded broker: the output root is
// --out-dir (none when it is ""), the input roots are the configured ones,
// the current directory and the job file's directory.
func embeddedRoots(outDir, jobDir string, inputRoots []string) (string, []string, error) {
	root := ""
	if outDir != "" {
		abs, err := filepath.Abs(outDir)
		if err != nil {
			return "", nil, fmt.Errorf("--out-dir: %w", err)
		}
		root = abs
	}
	roots := slices.Clone(inputRoots)
	if wd, err := os.Getwd(); err == nil {
		roots = append(roots, wd)
	}
	if jobDir != "" {
		roots = append(roots, jobDir)
	}
	return root, roots, nil
}

func runSubmit(ctx context.Context, g *globals, f *submitFlags, path string) error {
	if len(f.inject) > 0 {
		f.embedded = true // the failure is injected into this process's simulated sites
	}
	if f.dryRun {
		return runDryRun(ctx, g, f, path)
	}
	if !f.embedded {
		// A running daemon takes the job; without one, run it here.
		c, err := connect(ctx, g)
		var ee *exitError
		switch {
		case err == nil:
			return runRemoteSubmit(ctx, g, f, c, path)
		case errors.As(err, &ee):
			return err
		case !errors.Is(err, errNoDaemon):
			return &exitError{exitInternal, fmt.Errorf("%w (--embedded runs the job without the daemon)", err)}
		}
	}
	cfg, job, spec, err := embeddedSetup(g, path, f.outDir)
	if err != nil {
		return usageErr(err)
	}
	f.addDeps(job)
	env, err := assemble.Build(ctx, spec, assemble.Options{Logger: g.logger()})
	if err != nil {
		return &exitError{exitInternal, siteAdvice(err, cfg.Source)}
	}
	defer env.Close()
	if err := reachable(g, env, cfg.Source); err != nil {
		return &exitError{exitInternal, err}
	}

	now := env.Now()
	outDir := ""
	if f.outDir != "" {
		outDir = bridge.IDPlaceholder // one directory per job, below the output root (--out-dir)
	}
	req, err := toRequest(job, now, outDir)
	if err != nil {
		return usageErr(err)
	}
	if err := injectFailures(env, f.inject, now); err != nil {
		return usageErr(err)
	}
	j, err := env.Broker.Submit(ctx, req, now)
	if err != nil {
		return clientErr(err) // the same exit status as with a daemon
	}
	warnDeadline(g, j)
	p := newProgress(g, f, env, j)
	p.header(job, path)

	final, err := follow(ctx, env, j.ID, f, p)
	if err != nil {
		return &exitError{exitInternal, err}
	}
	p.done(final)
	if g.json() {
		if err := writeJSON(g.stdout, toJSON(final, true)); err != nil {
			return err
		}
	} else {
		if !f.quiet {
			echoJobOutput(g, final)
		}
		fmt.Fprint(g.stdout, summaryText(final, env.Simulated()))
	}
	if final.State != bridge.Completed {
		return &exitError{exitJobFailed, fmt.Errorf("job %s %s: %s", final.ID, final.State, final.Reason)}
	}
	return nil
}

// maxEcho bounds what echoJobOutput copies from each stream.
const maxEcho = 64 << 10

// echoJobOutput copies an ended job's fetched standard output to stdout and
// its standard error to stderr, as srun would show them, before the
// summary: at most maxEcho bytes of each, saying where the rest is.
func echoJobOutput(g *globals, j *bridge.Job) {
	for _, o := range j.Outputs {
		var w io.Writer
		switch filepath.Base(o) {
		case "gridsub.out":
			w = g.stdout
		case "gridsub.err":
			w = g.stderr
		default:
			continue
		}
		f, err := os.Open(o)
		if err != nil {
			continue
		}
		data, _ := io.ReadAll(io.LimitReader(f, maxEcho+1))
		f.Close()
		if len(data) == 0 {
			continue
		}
		more := len(data) > maxEcho
		if more {
			data = data[:maxEcho]
		}
		w.Write(data)
		if data[len(data)-1] != '\n' {
			fmt.Fprintln(w)
		}
		if more {
			fmt.Fprintf(w, "[... more in %s]\n", o)
		}
	}
}

// follow runs broker cycles until the job ends. On Ctrl-C it cancels the job
// and keeps going until the cancel is recorded.
func follow(ctx context.Context, env *assemble.Env, id string, f *submitFlags, p *progress) (*bridge.Job, error) {
	clock := env.Clock(f.timeScale)
	cancelled := false
	for {
		now := clock.Now()
		if _, err := env.Broker.BindReservations(context.WithoutCancel(ctx), now); err != nil {
			return nil, err
		}
		if _, err := env.Broker.Cycle(context.WithoutCancel(ctx), now); err != nil {
			return nil, err
		}
		j, err := env.Broker.Job(id)
		if err != nil {
			return nil, err
		}
		p.update(j, now)
		if j.State.Final() {
			return j, nil
		}
		if ctx.Err() != nil && !cancelled {
			cancelled = true
			p.note("interrupted: cancelling " + id + " at every site")
			if err := env.Broker.Cancel(context.WithoutCancel(ctx), id, now); err != nil && !errors.Is(err, bridge.ErrFinal) {
				return nil, err
			}
			continue
		}
		clock.Tick(j)
	}
}

// progress renders placement and live progress on stderr.
type progress struct {
	g        *globals
	quiet    bool
	tty      bool
	env      *assemble.Env
	placed   bool
	reserved bool
	last     string
	lastLen  int
}

func newProgress(g *globals, f *submitFlags, env *assemble.Env, _ *bridge.Job) *progress {
	tty := false
	if fd, ok := g.stderr.(*os.File); ok {
		tty = term.IsTerminal(int(fd.Fd()))
	}
	return &progress{g: g, quiet: f.quiet, tty: tty, env: env}
}

func (p *progress) printf(format string, a ...any) {
	if !p.quiet {
		p.clearLine()
		fmt.Fprintf(p.g.stderr, format, a...)
	}
}

func (p *progress) clearLine() {
	if p.tty && p.lastLen > 0 {
		fmt.Fprintf(p.g.stderr, "\r%*s\r", p.lastLen, "")
		p.lastLen = 0
	}
}

func (p *progress) note(s string) { p.printf("%s\n", s) }

func (p *progress) header(job *jobfile.Job, path string) {
	if job.IsPipeline() {
		p.printf("gridsub: %s (%s): pipeline of %d steps, on %s\n", path, job.Name, len(job.Steps), p.env.Describe())
		return
	}
	p.printf("gridsub: %s (%s): %d node(s), walltime %s, on %s\n", path, job.Name, job.Resources.Nodes,
		job.Resources.Walltime, p.env.Describe())
}

func (p *progress) update(j *bridge.Job, now time.Time) {
	if r := j.Resv; r != nil && !p.placed && r.Site != "" {
		// A reservation's placement is its binding.
		p.placed = true
		p.printf("reservation bound: %s:%d from %s (%s)\n", r.Site, j.Req.Nodes, rel(r.Start, j.Submit), r.Reason)
	}
	if j.Predicted.Parts != nil && !p.placed && (j.State != bridge.Queued || !p.reserved) {
		if j.State == bridge.Queued {
			p.reserved = true
			p.printf("waiting: no placement is free now\n%s", placementText(j, j.Submit))
		} else {
			p.placed = true
			p.printf("%s", placementText(j, j.Submit))
		}
	}
	line := progressLine(j, now)
	if p.quiet || line == p.last {
		return
	}
	if p.tty {
		p.clearLine()
		fmt.Fprint(p.g.stderr, line)
		p.lastLen = len([]rune(line))
	} else if progressKey(line) != progressKey(p.last) {
		fmt.Fprintln(p.g.stderr, line)
	}
	p.last = line
}

// progressKey reduces a progress line to its state, so a non-terminal gets one
// line per state change rather than one per tick.
func progressKey(line string) string {
	for i := 0; i < len(line); i++ {
		if line[i] == ']' {
			rest := line[i+1:]
			for k, r := range rest {
				if r == ',' || r == '▕' {
					return rest[:k]
				}
			}
			return rest
		}
	}
	return line
}

// done ends the live line: the last update already shows the final state.
func (p *progress) done(*bridge.Job) {
	if !p.quiet && p.tty && p.lastLen > 0 {
		fmt.Fprintln(p.g.stderr)
		p.lastLen = 0
	}
}

// embeddedIDPrefix makes the job ids of one embedded run unique: "g", the
// start time in nanoseconds in base 36, "-" (g0lx8k2p3q9ab-000001).
func embeddedIDPrefix(now time.Time) string {
	return "g" + strconv.FormatInt(now.UnixNano(), 36) + "-"
}

// reachable warns about each site that cannot be reached now; the job is
// placed on the others (and on those sites too if they answer in time). It
// is an error when no site can be reached: nothing would ever run.
func reachable(g *globals, env *assemble.Env, source string) error {
	down := env.Unreachable()
	if len(down) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(down))
	if len(down) == len(env.Broker.SiteNames()) {
		var errs []error
		for _, n := range names {
			errs = append(errs, fmt.Errorf("site %s: %w", n, down[n]))
		}
		return siteAdvice(errors.Join(errs...), source)
	}
	for _, n := range names {
		fmt.Fprintf(g.stderr, "gridsub: site %s cannot be reached now (%v); placing the job on the other sites (%s is retried and used if it answers)\n", n, down[n], n)
	}
	return nil
}

// siteAdvice adds what to check to an error about reaching a site.
func siteAdvice(err error, source string) error {
	if errors.Is(err, backends.ErrUnavailable) {
		return fmt.Errorf("%w\n  nothing was submitted; check that the site is up and that its ssh host and port in %s are right (`gridsub sites` shows every site's state)", err, source)
	}
	return err
}

// embeddedSetup loads what the embedded broker needs for the job file at
// path: the site configuration, the job, and the broker's spec. The
// embedded broker's store ends with this process, so its ids carry the
// start time and no later run reuses them (remote tags, job directories,
// gridsub-out/<id>). It writes outputs below outDir only ("" = none), and
// reads inputs from the configured input roots, the current directory and
// the job file's directory (bridge/validate.go checks each path).
func embeddedSetup(g *globals, path, outDir string) (*config.Config, *jobfile.Job, assemble.Spec, error) {
	cfg, err := loadConfig(g)
	if err != nil {
		return nil, nil, assemble.Spec{}, err
	}
	job, err := loadJob(path, cfg.SiteNames())
	if err != nil {
		return nil, nil, assemble.Spec{}, err
	}
	spec, err := specFromConfig(cfg, g.logger())
	if err != nil {
		return nil, nil, assemble.Spec{}, err
	}
	promptOnTerminal(&spec, g)
	spec.IDPrefix = embeddedIDPrefix(time.Now())
	if spec.OutputRoot, spec.InputRoots, err = embeddedRoots(outDir, job.Dir(), spec.InputRoots); err != nil {
		return nil, nil, assemble.Spec{}, err
	}
	return cfg, job, spec, nil
}
