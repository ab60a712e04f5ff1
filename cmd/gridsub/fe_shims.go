package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/bridge"
)

// frontEnds are the SLURM and PBS tools gridsub stands in for: as
// subcommands (gridsub sbatch) and as a multi-call binary (a link named
// sbatch to gridsub runs `gridsub sbatch`).
var frontEnds = []string{"sbatch", "squeue", "sacct", "scancel", "scontrol", "qsub", "qstat", "qdel"}

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
		Short: "Make DIR/sbatch, DIR/squeue... links to this gridsub",
		Long: `Install makes in DIR a symbolic link to this gridsub executable for each of
sbatch, squeue, sacct, scancel, scontrol, qsub, qstat and qdel: run under such
a name, gridsub is that front-end (gridsub sbatch ...). Put DIR first on the
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
			fmt.Fprintf(g.stdout, "%s: %d front-ends linked to %s; put it first on PATH\n", dir, len(frontEnds), exe)
			return nil
		},
	}
	install.Flags().BoolVar(&force, "force", false, "replace existing files of the front-ends' names")
	c.AddCommand(install)
	return c
}

// snakemakeStatus prints Snakemake's status of a job: running, success or
// failed — exactly one word, exit status 0. Snakemake ends the whole
// workflow on a non-zero exit of --cluster-status, so a transient problem
// (the daemon restarting, a slow answer) prints "running" and says why on
// stderr: the next poll will know.
func snakemakeStatus(ctx context.Context, g *globals, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	word := "running"
	c, err := feConnect(ctx, g, "gridsub status")
	if err == nil && queued(ctx, c, gridID(c.prefix, id)) {
		fmt.Fprintln(g.stdout, word)
		return nil
	}
	if err == nil {
		var j *bridge.Job
		j, err = c.Job(ctx, gridID(c.prefix, id))
		switch {
		case err == nil && j.State == bridge.Completed:
			word = "success"
		case err == nil && j.State.Final():
			word = "failed"
		case err == nil:
		case errors.Is(err, bridge.ErrNotFound) || errors.Is(err, bridge.ErrBadRequest):
			word = "failed" // the daemon answered: it has no such job
			fmt.Fprintf(g.stderr, "gridsub status: job %s: %v\n", id, err)
			err = nil
		}
	}
	if err != nil {
		fmt.Fprintf(g.stderr, "gridsub status: job %s: %v (reported as running; the next poll asks again)\n", id, err)
	}
	fmt.Fprintln(g.stdout, word)
	return nil
}

// queued says whether the daemon's queue (GET /v1/queue?id=, read
// without waiting for a cycle in progress) has the job unfinished. False
// when it has not, or on any error: then the job itself is asked for.
func queued(ctx context.Context, c *feClient, gid string) bool {
	rows, err := c.QueueOf(ctx, gid)
	if err != nil {
		return false
	}
	for _, r := range rows {
		if r.ID == gid && !r.State.Final() {
			return true
		}
	}
	return false
}

// frontEndRuns are the front-ends' bodies by name, for fastPath.
var frontEndRuns = map[string]func(ctx context.Context, g *globals, args []string) error{
	"sbatch": runSbatch, "squeue": runSqueue, "sacct": runSacct, "scancel": runScancel, "scontrol": runScontrol,
	"qsub": runQsub, "qstat": runQstat, "qdel": runQdel,
}

// fastPath runs a front-end call or `status --snakemake ID` without
// building gridsub's whole command tree (a workflow engine starts one
// process per poll and per submission): the same function the command
// would run, with the globals the command tree would give it (no
// front-end parses gridsub's own flags, and `status --snakemake ID` has
// none besides). It declines (ok false) whatever it is not sure of —
// --help, gridsub's own flags before the verb, a file of the verb's name —
// and the command tree handles it.
func fastPath(ctx context.Context, args []string, stdout, stderr io.Writer) (err error, ok bool) {
	if len(args) == 0 || isFile(args[0]) {
		return nil, false
	}
	g := &globals{config: os.Getenv("GRIDSUB_CONFIG"), output: "table", logLevel: "warn", stdout: stdout, stderr: stderr}
	if args[0] == "status" {
		// Exactly `status --snakemake ID` or `status ID --snakemake`.
		if len(args) != 3 {
			return nil, false
		}
		id := ""
		switch {
		case args[1] == "--snakemake":
			id = args[2]
		case args[2] == "--snakemake":
			id = args[1]
		}
		if id == "" || strings.HasPrefix(id, "-") {
			return nil, false
		}
		return snakemakeStatus(ctx, g, id), true
	}
	run := frontEndRuns[args[0]]
	if run == nil {
		return nil, false
	}
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		if a == "--help" {
			return nil, false
		}
	}
	return run(ctx, g, args[1:]), true
}
