package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/frontend"
)

// frontEnds are the SLURM and PBS tools gridsub stands in for: as
// subcommands (gridsub sbatch) and as a multi-call binary (a link named
// sbatch to gridsub runs `gridsub sbatch`).
var frontEnds = frontend.Tools

// newFrontEndCmds are the front-ends' commands and `gridsub shims`.
func newFrontEndCmds(g *globals) []*cobra.Command {
	return []*cobra.Command{newSbatchCmd(g), newSqueueCmd(g), newSacctCmd(g), newScancelCmd(g), newScontrolCmd(g),
		newQsubCmd(g), newQstatCmd(g), newQdelCmd(g), newShimsCmd(g)}
}

// multiCall turns argv into gridsub's own: a program named after a
// front-end (a link made by `gridsub shims install`) runs it.
func multiCall(argv0 string, args []string) []string {
	name := filepath.Base(argv0)
	for _, fe := range frontEnds {
		if name == fe {
			return append([]string{fe}, args...)
		}
	}
	return args
}

func newShimsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "shims",
		Short: "Put sbatch, squeue, sacct, scancel, scontrol, qsub, qstat and qdel on a PATH",
	}
	force := false
	install := &cobra.Command{
		Use:   "install DIR",
		Short: "Make DIR/sbatch, DIR/squeue... links to gridsub-fe (or this gridsub)",
		Long: `Install makes in DIR a symbolic link for each of sbatch, squeue, sacct,
scancel, scontrol, qsub, qstat and qdel: run under such a name, gridsub is that
front-end (gridsub sbatch ...). The links go to gridsub-fe when it lies beside
this gridsub (go install ./cmd/... puts it there): the same front-ends in a
binary that starts several times faster, for the process a workflow engine
starts per poll and per submission; else to this gridsub. Put DIR first on the
PATH of a workflow engine (Snakemake, Toil, Nextflow, dask-jobqueue) and it
submits to the running daemon as if to SLURM or PBS. An existing file of one
of those names is left alone unless --force.`,
		Example: "  gridsub shims install ~/gridsub-shims && export PATH=~/gridsub-shims:$PATH",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			exe, err := os.Executable()
			if err != nil {
				return &exitError{exitInternal, fmt.Errorf("finding this executable: %w", err)}
			}
			if exe, err = filepath.EvalSymlinks(exe); err != nil {
				return &exitError{exitInternal, err}
			}
			if fe := filepath.Join(filepath.Dir(exe), "gridsub-fe"); isExecutable(fe) {
				exe = fe // the front-ends' small binary starts several times faster
			}
			dir := args[0]
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return usageErr(err)
			}
			for _, fe := range frontEnds {
				p := filepath.Join(dir, fe)
				if fi, err := os.Lstat(p); err == nil {
					if t, err := os.Readlink(p); err == nil && t == exe {
						continue
					}
					if !force {
						return usageErr(fmt.Errorf("%s exists (a %s); --force replaces it", p, fi.Mode().Type()))
					}
					if err := os.Remove(p); err != nil {
						return usageErr(err)
					}
				}
				if err := os.Symlink(exe, p); err != nil {
					return usageErr(err)
				}
			}
			msg := fmt.Sprintf("%s: %d front-ends linked to %s; put it first on PATH", dir, len(frontEnds), exe)
			if filepath.Base(exe) == "gridsub-fe" && os.Getenv(envSocket) == "" {
				// gridsub-fe reads no configuration: without the socket,
				// each call starts gridsub to find the daemon.
				if cfg, err := loadConfig(g); err == nil {
					if _, sock, err := daemonPaths(cfg); err == nil {
						msg += fmt.Sprintf(" and export %s=%s (without it every call starts gridsub itself to read the configuration)", envSocket, sock)
					}
				}
			}
			fmt.Fprintln(g.stdout, msg)
			return nil
		},
	}
	install.Flags().BoolVar(&force, "force", false, "replace existing files of the front-ends' names")
	c.AddCommand(install)
	return c
}

// fastPath runs a front-end call or `status --snakemake ID` without
// building gridsub's whole command tree (frontend.Match says which calls):
// the same function the command would run (no front-end parses gridsub's
// own flags, and `status --snakemake ID` has none besides).
func fastPath(ctx context.Context, args []string, stdout, stderr io.Writer) (err error, ok bool) {
	run, ok := frontend.Match(args)
	if !ok {
		return nil, false
	}
	g := &globals{config: os.Getenv("GRIDSUB_CONFIG"), output: "table", logLevel: "warn", stdout: stdout, stderr: stderr}
	return run(ctx, feEnv(g)), true
}

// feEnv is the front-ends' environment in gridsub: the daemon found as
// every gridsub command finds it (GRIDSUB_URL, or the configuration's
// socket) when GRIDSUB_SOCKET is not set.
func feEnv(g *globals) *frontend.Env {
	return &frontend.Env{Stdout: g.stdout, Stderr: g.stderr, Connect: func(ctx context.Context, prog string) (*api.Client, string, error) {
		c, err := connect(ctx, g)
		if err != nil {
			var ee *exitError
			if errors.As(err, &ee) {
				return nil, "", ee.err
			}
			return nil, "", fmt.Errorf("%w (the %s front-end needs a running `gridsub serve`)", err, prog)
		}
		return c.Client, c.where, nil
	}}
}

// isExecutable: path is a regular file someone may execute.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
