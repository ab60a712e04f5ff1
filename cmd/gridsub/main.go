package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/frontend"
)

// Exit codes. Scripts can rely on them.
const (
	exitOK        = 0 // the job (or command) succeeded
	exitJobFailed = 1 // the job failed, was rejected or cancelled
	exitUsage     = 2 // bad command line, job file or configuration
	exitInternal  = 3 // gridsub itself could not do its work (a site unreachable, a store error)
	// exitInterrupted (130, basics.go): Ctrl-C stopped following a daemon's job.
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(err error) error { return &exitError{exitUsage, err} }

// globals are the persistent flags.
type globals struct {
	config string
	// configFlag: --config was given on the command line (not only
	// GRIDSUB_CONFIG), so the job is meant for its sites.
	configFlag bool
	output     string
	logLevel   string
	stdout     io.Writer
	stderr     io.Writer
}

func (g *globals) json() bool { return g.output == "json" }

func (g *globals) logger() *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
		lvl = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: lvl}))
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	sub := &submitFlags{}
	root := &cobra.Command{
		Use:   "gridsub [job.yaml]",
		Short: "Run a job on the best of your HPC sites, or across several at once",
		Long: `gridsub is a meta-scheduler for people with accounts on several clusters.

Write one job.yaml and run "gridsub job.yaml": gridsub picks the site (or
several sites at once for a co-allocated parallel job), stages the files,
submits through the site's own batch system (SLURM, PBS), follows the job to
its end and brings the outputs back.

Without --config it runs the job here, on the built-in local site (real
processes on this machine, one slot per core; walltime enforced, outputs
fetched), so you can try it anywhere; --config testbed is the built-in
simulated testbed (paper 000's three sites: Beijing 128 nodes, Shanghai 64,
Harbin 32).

With a daemon running ("gridsub serve &"), jobs go to it: "gridsub job.yaml"
returns the grid job id at once (--wait follows the job), and status, list,
watch, events, cancel, history and output query it.

Exit status: 0 the job succeeded; 1 it failed, was rejected or cancelled;
2 a usage, job-file or configuration error; 3 gridsub could not do its work;
130 Ctrl-C stopped following a daemon's job (--wait, watch, logs -f), which
goes on in the daemon.`,
		Example: `  gridsub examples/hello.yaml                 # run it here: prints "hello from gridsub"
  gridsub --config testbed examples/wide.yaml --output json   # on the simulated testbed; JSON summary
  gridsub validate examples/*.yaml            # check job files
  gridsub --config configs/local-slurm.yaml examples/hello.yaml   # real SLURM sites`,
		Args:          cobra.ArbitraryArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			if len(args) > 1 {
				return usageErr(fmt.Errorf("one job file at a time (got %d arguments); did you mean `gridsub validate %s`?", len(args), strings.Join(args, " ")))
			}
			if !isFile(args[0]) {
				return usageErr(notAJobFile(cmd, args[0]))
			}
			return runSubmit(cmd.Context(), g, sub, args[0])
		},
	}
	root.ValidArgsFunction = completeJobFiles
	root.Version = readBuildInfo().String()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVarP(&g.config, "config", "c", os.Getenv("GRIDSUB_CONFIG"), "site configuration file or built-in name (env GRIDSUB_CONFIG; default: the built-in local site, real processes on this machine; testbed: the simulated testbed)")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table or json")
	pf.StringVar(&g.logLevel, "log-level", "warn", "log level: debug, info, warn, error (logs go to stderr)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if fl := cmd.Flag("config"); fl != nil {
			g.configFlag = fl.Changed
		}
		if g.output != "table" && g.output != "json" {
			return usageErr(fmt.Errorf("--output must be table or json, got %q", g.output))
		}
		return nil
	}
	sub.register(root)
	root.AddCommand(newHoldCmd(g), newReleaseCmd(g), newRequeueCmd(g)) // control.go
	root.AddCommand(newSubmitCmd(g), newValidateCmd(g), newSitesCmd(g), newSimCmd(g),
		newServeCmd(g), newStatusCmd(g), newListCmd(g), newWatchCmd(g), newEventsCmd(g), newCancelCmd(g), newHistoryCmd(g), newOutputCmd(g), newReservationsCmd(g), newStoreCmd(g), newDocsCmd(),
		newPluginCmd(), newPluginsCmd(g), newExplainCmd(g), newVersionCmd(g), newLogsCmd(g), newConfigCmd(g), newSimsiteCmd(g),
		newLoginCmd(g), newDoctorCmd(g))
	root.AddCommand(newTokenCmd(g), newWhoamiCmd(g)) // users.go
	root.AddCommand(newCredentialsCmd(g))            // credentials.go
	root.AddCommand(newFrontEndCmds(g)...)           // fe_*.go: sbatch, squeue... and shims
	usageArgs(root)
	return root
}

func main() {
	os.Exit(run(multiCall(os.Args[0], os.Args[1:]), os.Stdout, os.Stderr)) // fe_shims.go
}

// run executes the CLI and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err, ok := fastPath(ctx, args, stdout, stderr); ok { // fe_shims.go
		return processExit(err, stderr)
	}
	root := newRoot(stdout, stderr)
	if len(args) > 0 && !isFile(args[0]) {
		if _, ok := batchVerbs[args[0]]; ok {
			if c, _, err := root.Find(args[:1]); err != nil || c == root {
				// A batch verb with its own flags (squeue -u me): point at
				// gridsub's way before the flags are refused one by one.
				fmt.Fprintln(stderr, "gridsub:", notAJobFile(root, args[0]))
				return exitUsage
			}
		}
	}
	root.SetArgs(args)
	return processExit(root.ExecuteContext(ctx), stderr)
}

// processExit prints a command's error as a sentence and returns the
// process exit code for it.
func processExit(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var fe *frontend.Error // a front-end's error, as the tool prints it
	if errors.As(err, &fe) {
		return frontend.Exit(fe, stderr)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && (ee.code != exitJobFailed || errors.Is(ee.err, bridge.ErrInfeasible)) { // a job that can never run has no summary to say why
			fmt.Fprintln(stderr, "gridsub:", sentence(ee.err))
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "gridsub:", sentence(err))
	if strings.Contains(err.Error(), "unknown command") || strings.Contains(err.Error(), "flag") {
		return exitUsage
	}
	return exitInternal
}
