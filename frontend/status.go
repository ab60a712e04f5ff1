package frontend

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/gridsub/gridsub/bridge"
)

// SnakemakeStatus prints Snakemake's status of a job: running, success or
// failed — exactly one word, exit status 0. Snakemake ends the whole
// workflow on a non-zero exit of --cluster-status, so a transient problem
// (the daemon restarting, a slow answer) prints "running" and says why on
// stderr: the next poll will know.
func SnakemakeStatus(ctx context.Context, g *Env, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	word := "running"
	c, err := feConnect(ctx, g, "gridsub status")
	if err == nil && queued(ctx, c, gridID(c.prefix, id)) {
		fmt.Fprintln(g.Stdout, word)
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
			fmt.Fprintf(g.Stderr, "gridsub status: job %s: %v\n", id, err)
			err = nil
		}
	}
	if err != nil {
		fmt.Fprintf(g.Stderr, "gridsub status: job %s: %v (reported as running; the next poll asks again)\n", id, err)
	}
	fmt.Fprintln(g.Stdout, word)
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

// Tools are the SLURM and PBS tools the front-ends stand in for: the
// names of gridsub's front-end commands and of the links `gridsub shims
// install` makes.
var Tools = []string{"sbatch", "squeue", "sacct", "scancel", "scontrol", "qsub", "qstat", "qdel"}

// frontEndRuns are the front-ends' bodies by name.
var frontEndRuns = map[string]func(ctx context.Context, g *Env, args []string) error{
	"sbatch": runSbatch, "squeue": runSqueue, "sacct": runSacct, "scancel": runScancel, "scontrol": runScontrol,
	"qsub": runQsub, "qstat": runQstat, "qdel": runQdel,
}

// Run runs the tool (one of Tools) with its arguments, the tool's own.
func Run(ctx context.Context, g *Env, tool string, args []string) error {
	run := frontEndRuns[tool]
	if run == nil {
		return &Error{tool, 1, "not a gridsub front-end (they are " + strings.Join(Tools, ", ") + ")"}
	}
	return run(ctx, g, args)
}

// Match says whether args, gridsub's arguments, are a call the front-ends
// answer by themselves, without gridsub's command tree (a workflow engine
// starts one process per poll and per submission): a tool of Tools and its
// arguments, or exactly `status --snakemake ID` (or `status ID
// --snakemake`). It declines (ok false) whatever it is not sure of —
// --help before a "--", gridsub's own flags before the verb, a first word
// that names an existing file (a job file) — and gridsub's command tree
// handles it.
func Match(args []string) (run func(ctx context.Context, g *Env) error, ok bool) {
	if len(args) == 0 {
		return nil, false
	}
	if _, err := os.Stat(args[0]); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if args[0] == "status" {
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
		return func(ctx context.Context, g *Env) error { return SnakemakeStatus(ctx, g, id) }, true
	}
	tool := frontEndRuns[args[0]]
	if tool == nil {
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
	return func(ctx context.Context, g *Env) error { return tool(ctx, g, args[1:]) }, true
}
