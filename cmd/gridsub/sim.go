package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gridsub/gridsub/simbackend/experiment"
	"github.com/gridsub/gridsub/simbackend/experiment/paper003"
)

// simFlags are the flags of "gridsub sim".
type simFlags struct {
	out       string
	workers   int
	jobs      int    // > 0: overrides the workload's jobs
	viaBroker bool   // replay every run through bridge.Broker
	seeds     []uint // replace sweep.seed (experiment.Subset)
	workload  []int  // keep only these workloads (experiment.Subset)

	// A sweep on batch sites (sweep.go).
	on       []string      // sites the runs go to, through the daemon
	limit    int           // at most this many runs in flight per site (0: no limit)
	walltime time.Duration // each run's walltime at the sites
	qos      string        // each run's QoS tier (docs/qos.md)
	poll     time.Duration // how often the daemon is asked
	patience time.Duration // how long a silent daemon is waited for
	runIndex int           // hidden: perform this run alone (an element of a sweep)
	runOut   string        // hidden: where --run-index writes its run file
}

// runArgs are the flags a sweep's elements get, so each run is the run of
// the same experiment as here.
func (f *simFlags) runArgs() []string {
	var a []string
	if f.jobs > 0 {
		a = append(a, "--jobs", strconv.Itoa(f.jobs))
	}
	if len(f.seeds) > 0 {
		s := make([]string, len(f.seeds))
		for i, v := range f.seeds {
			s[i] = strconv.FormatUint(uint64(v), 10)
		}
		a = append(a, "--seeds", strings.Join(s, ","))
	}
	if len(f.workload) > 0 {
		s := make([]string, len(f.workload))
		for i, v := range f.workload {
			s[i] = strconv.Itoa(v)
		}
		a = append(a, "--workload", strings.Join(s, ","))
	}
	if f.viaBroker {
		a = append(a, "--via-broker")
	}
	return a
}

func newSimCmd(g *globals) *cobra.Command {
	f := &simFlags{}
	cmd := &cobra.Command{
		Use:   "sim EXPERIMENT.yaml --out DIR",
		Short: "Run a simulation experiment (a figure of paper 000) and write its table and plots",
		Long: `Sim runs an experiment file on the built-in simulated testbed: a workload
shaped from a Parallel Workloads Archive trace, replayed against the very
co-allocation policy the broker runs, in virtual time, once per point of the
experiment's sweep (policies x workloads x h sets x bandwidths x p). Runs are
spread over the machine's cores; each is deterministic, so the same file gives
the same results.csv byte for byte whatever the number of workers.

A run asks the policy itself and carries out its plans on lean simulated
sites, exactly as the broker would (a test holds the two to byte-identical
records for every policy); --via-broker pushes every job through the real
broker instead: the same results, several times slower. Sabin's multi-queue
policy, whose copies wait in every site's own queue, always goes through the
broker.

A policy may be a planner plugin: "plugin:/path/to/planner [ARG...]" starts
that executable for each run (see docs/plugins.md), and
"plugin:builtin:NAME" runs a built-in planner out of process. A centre can so
replay its own policy on its own trace before it goes live. Paper 001's
policies may name an admission plugin the same way (plugin:builtin:srrm
beside SRRM_m gives the same numbers), and paper 004's dgjs.tiering a
tiering plugin.

The kind "paper003" (configs/experiments/paper003-*.yaml) runs paper 003's
repetitive mapping instead: benefit, Min-min and Sufferage (data-aware or
blind) on clusters of hosts with their inputs in data repositories, several
seeds per point, each claim checked with paired seeds; --jobs and
--via-broker do not apply. docs/results/paper003.md discusses it.

It writes DIR/summary.json (the experiment, every run's parameters and
metrics, wall times), DIR/results.csv (one row per run) and one PNG and one
SVG per plot of the file. Progress goes to stderr. Traces are looked up in
$GRIDSUB_WORKLOADS, else ../shared/workloads beside the repository.
GRIDSUB_CPUPROFILE=FILE (GRIDSUB_MEMPROFILE=FILE) writes a CPU (heap)
profile of the runs to FILE, for go tool pprof.

configs/experiments/ holds two files per figure of paper 000, paper000-*.yaml
(the paper's 10,000 jobs over 10 seeds, and a -quick variant), and the CTC-SP2
single-site EASY reference; docs/results/paper000.md discusses the results.
The kind "dgjs" (configs/experiments/paper004-*.yaml) runs paper 004's
dependable scheduling experiment instead: DGJS, Min-min and Refine on
resources that fail (Weibull, Zipf, Pareto), several seeds per point;
docs/results/paper004.md discusses it.

The kind "drrm" (configs/experiments/paper001-*.yaml) runs paper 001's
advance-reservation experiments (DRRM against SRRM_r and SRRM_m: AP, PP,
TPC, failure rate η), the kind "trust-minmin" (paper002-*.yaml) paper 002's
Trust-Min-min against Min-min over runs in which trust is learned;
docs/results/paper001.md and paper002.md discuss them.

The sites are the experiment file's own (its testbed section); --config does
not apply and is refused, except with --on.

--on SITE[,SITE...] runs the experiment on batch sites instead of this
machine, through the running daemon (gridsub serve): the runs become one job
array per site (native where the site has native_arrays), the gridsub binary,
the experiment file and its traces are staged once per site by a stage-in job
into <remote_dir>/gridsub-sweeps/<key>/, each element performs one run and
returns its result, gathered into DIR/runs/ as it ends; at the end the same
tables and plots as a local run are written (results.csv byte for byte). The
runs are spread over the sites in proportion to their cores. A failed run is
retried by the broker under --qos (default none: up to 3 attempts); runs still
failed are listed, and running the same command again submits only them.
DIR/sweep-state.json records the sweep: a client or daemon killed
mid-sweep loses nothing, and the same command resumes where it was. The
daemon must run on this machine (the fetched results are read from its
output root).

Exit status: 0 done; 2 a bad experiment file or a missing trace; 3 a run
failed or was interrupted.`,
		Example: `  gridsub sim configs/experiments/paper000-fig2-small-h-multi-vs-single-quick.yaml --out out/fig2-quick
  gridsub sim configs/experiments/ctc-easy-reference.yaml --out out/ref --output json
  gridsub sim configs/experiments/paper000-fig5-small-h-optimal-greedy-nonadaptive.yaml --out out/fig5
  GRIDSUB_WORKLOADS=/data/pwa gridsub sim my-experiment.yaml --out out/mine --workers 4
  gridsub sim configs/experiments/paper003-qos.yaml --out out/paper003-qos
  gridsub sim configs/experiments/paper001-fig5-6-interval.yaml --on siteA,siteB --out out/fig5-6`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(fmt.Errorf("sim takes one experiment file (got %d arguments); see configs/experiments/", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, n := range []string{"limit", "walltime", "qos", "poll", "patience"} {
				if cmd.Flag(n).Changed && len(f.on) == 0 {
					return usageErr(fmt.Errorf("--%s applies to a sweep on batch sites only; add --on SITE[,SITE...]", n))
				}
			}
			if cmd.Flag("run-out").Changed && f.runIndex < 0 {
				return usageErr(fmt.Errorf("--run-out goes with --run-index"))
			}
			if f.runIndex >= 0 {
				if len(f.on) > 0 {
					return usageErr(fmt.Errorf("--run-index performs one run here; it does not go with --on"))
				}
				return runSimOne(cmd.Context(), f, args[0]) // sweep.go
			}
			if len(f.on) > 0 {
				if cmd.Flag("workers").Changed {
					return usageErr(fmt.Errorf("--workers sets this machine's parallelism; with --on the runs go to the sites (--limit bounds them per site)"))
				}
				return runSweep(cmd.Context(), g, f, args[0]) // sweep.go
			}
			if fl := cmd.Flag("config"); fl != nil && fl.Changed {
				return usageErr(fmt.Errorf("gridsub sim takes its sites from the experiment file (its testbed section), not from --config %s; "+
					"leave --config out, or copy the sites into the experiment's testbed", fl.Value))
			}
			return runSim(cmd.Context(), g, f, args[0])
		},
	}
	cmd.Flags().StringVar(&f.out, "out", "", "directory for summary.json, results.csv and the plots (default out/<experiment name>)")
	cmd.Flags().IntVar(&f.workers, "workers", 0, "runs in flight at once (default GOMAXPROCS)")
	cmd.Flags().IntVar(&f.jobs, "jobs", 0, "replay the first N jobs of the trace instead of the file's workload.jobs (e.g. 10000, the paper's size); summary.json records the value used")
	cmd.Flags().UintSliceVar(&f.seeds, "seeds", nil, "run these seeds instead of the file's sweep.seed (e.g. 7,8: part of a long experiment)")
	cmd.Flags().IntSliceVar(&f.workload, "workload", nil, "run only these of the file's workloads (e.g. 1); plots and comparisons of the others are left out")
	cmd.Flags().BoolVar(&f.viaBroker, "via-broker", false, "replay every job through the real broker (same results, several times slower)")
	cmd.Flags().StringSliceVar(&f.on, "on", nil, "run on these batch sites through the daemon (e.g. siteA,siteB); resumable")
	cmd.Flags().IntVar(&f.limit, "limit", 0, "with --on: at most N runs in flight per site (0: no limit)")
	cmd.Flags().DurationVar(&f.walltime, "walltime", time.Hour, "with --on: each run's walltime at the sites")
	cmd.Flags().StringVar(&f.qos, "qos", "none", "with --on: each run's QoS tier (none: a failed run is retried, docs/qos.md)")
	cmd.Flags().DurationVar(&f.poll, "poll", 2*time.Second, "with --on: how often the daemon is asked for finished runs")
	cmd.Flags().DurationVar(&f.patience, "patience", 2*time.Minute, "with --on: how long to wait for a daemon that stopped answering before exiting (the same command resumes)")
	cmd.Flags().IntVar(&f.runIndex, "run-index", -1, "perform only this run (what each element of a --on sweep runs)")
	cmd.Flags().StringVar(&f.runOut, "run-out", "", "with --run-index: the run file to write")
	cmd.Flags().MarkHidden("run-index")
	cmd.Flags().MarkHidden("run-out")
	return cmd
}

func runSim(ctx context.Context, g *globals, f *simFlags, file string) error {
	if f.workers < 0 {
		return usageErr(fmt.Errorf("--workers must be >= 0 (0 = GOMAXPROCS), got %d", f.workers))
	}
	if f.jobs < 0 {
		return usageErr(fmt.Errorf("--jobs must be >= 1 (or left out to use the file's workload.jobs), got %d", f.jobs))
	}
	if paper003.IsKind(file) {
		return runPaper003(ctx, g, f, file) // sim003.go
	}
	e, err := loadSimExperiment(f, file)
	if err != nil {
		return err
	}
	out := f.out
	if out == "" {
		out = filepath.Join("out", e.Name)
	}
	total := len(e.Expand())
	log := g.logger()
	log.Info("experiment", "file", file, "runs", total, "out", out)
	bar := experiment.NewBar(g.stderr, isTerminal(g.stderr), e.Name)
	stopProfiles := startProfiles(log)
	s, err := experiment.Execute(ctx, e, experiment.Options{Workers: f.workers, Progress: bar.Update, ViaBroker: f.viaBroker})
	bar.Finish()
	stopProfiles()
	switch {
	case errors.Is(err, experiment.ErrNoTrace):
		return usageErr(err)
	case ctx.Err() != nil:
		return &exitError{exitInternal, fmt.Errorf("sim %s: interrupted; nothing written to %s", file, out)}
	case err != nil:
		return &exitError{exitInternal, fmt.Errorf("sim %s: %w", file, err)}
	}
	return writeSimResults(g, file, out, s, fmt.Sprintf("%d workers", s.Workers))
}

// loadSimExperiment loads an experiment file and applies --jobs, --seeds
// and --workload, as a local run, a sweep and each of its elements do.
func loadSimExperiment(f *simFlags, file string) (*experiment.Experiment, error) {
	if f.jobs < 0 {
		return nil, usageErr(fmt.Errorf("--jobs must be >= 1 (or left out to use the file's workload.jobs), got %d", f.jobs))
	}
	e, err := experiment.Load(file)
	if err != nil {
		return nil, usageErr(err)
	}
	if f.jobs > 0 {
		if e.Kind == experiment.KindCTCReference {
			return nil, usageErr(fmt.Errorf("--jobs: %s replays the whole CTC-SP2 trace against its reference schedule; it takes no job count", file))
		}
		if e.Kind == experiment.KindDRRM || e.Kind == experiment.KindTrustMinMin {
			return nil, usageErr(fmt.Errorf("--jobs: %s (kind %s) replays no trace jobs; set drrm.requests or trust.tasks in the file", file, e.Kind))
		}
		e.Workload.Jobs = f.jobs
		if e.Kind == experiment.KindDGJS {
			e.DGJS.Jobs = []int{f.jobs} // a single point of the jobs axis
		}
	}
	seeds := make([]uint64, len(f.seeds))
	for i, s := range f.seeds {
		seeds[i] = uint64(s)
	}
	if err := e.Subset(seeds, f.workload); err != nil {
		return nil, usageErr(err)
	}
	return e, nil
}

// simColumns are the metrics the table shows (results.csv has them all).
func simColumns(kind string) []string {
	if kind == experiment.KindCTCReference {
		return []string{"jobs", "start_match", "mean_bsld", "ref_mean_bsld", "mean_wait", "mean_response"}
	}
	if kind == experiment.KindDGJS {
		return []string{"success_ratio", "success_sd", "mean_completion", "completion_sd", "outages", "wasted_share"}
	}
	if kind == experiment.KindDRRM {
		return []string{"ap", "pp", "tpc", "eta", "tpc_sd", "admitted"}
	}
	if kind == experiment.KindTrustMinMin {
		return []string{"makespan", "makespan_mean", "makespan_growth", "migration_rate", "migration_rate_mean"}
	}
	return []string{"awrt", "awwt", "au", "mean_bsld", "multisite", "rejected"}
}

// simShare are the metrics shown as shares (3 decimals) besides au, multisite and start_match.
var simShare = map[string]bool{"ap": true, "pp": true, "eta": true, "makespan_growth": true, "migration_rate": true, "migration_rate_mean": true}

// writeSimResults writes an experiment's results into out (the same
// files for a local run and a sweep on the clusters) and shows them: the
// summary as JSON, or the table and a line saying where the runs ran.
func writeSimResults(g *globals, file, out string, s *experiment.Summary, where string) error {
	files, err := experiment.WriteAll(out, s)
	if err != nil {
		return &exitError{exitInternal, fmt.Errorf("sim %s: writing results: %w", file, err)}
	}
	if g.json() {
		return experiment.WriteJSON(g.stdout, s)
	}
	writeSimTable(g.stdout, s)
	fmt.Fprintf(g.stdout, "\n%d runs on %s in %s; wrote %s\n", len(s.Runs), where,
		time.Duration(s.WallSeconds*float64(time.Second)).Round(100*time.Millisecond), strings.Join(files, ", "))
	return nil
}

func writeSimTable(w io.Writer, s *experiment.Summary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := simColumns(s.Experiment.Kind)
	head := append(append([]string{}, s.Params...), cols...)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(head, "\t"))+"\t")
	for _, r := range s.Runs {
		var row []string
		for _, p := range s.Params {
			row = append(row, r.Params.Value(p))
		}
		for _, c := range cols {
			v := r.Metrics[c]
			switch {
			case c == "au" || c == "multisite" || c == "start_match" || simShare[c] || strings.HasPrefix(c, "success") || c == "wasted_share":
				row = append(row, fmt.Sprintf("%.3f", v))
			case v == float64(int64(v)):
				row = append(row, fmt.Sprintf("%d", int64(v)))
			default:
				row = append(row, fmt.Sprintf("%.1f", v))
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
}

// isTerminal reports whether w is a terminal (the progress bar redraws in
// place there and prints plain lines elsewhere).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
