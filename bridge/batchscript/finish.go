package batchscript

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gridsub/gridsub/bridge/jobrules"
)

// whole is the line of a problem of the whole script, not of one
// directive.
const whole = -1

// finish derives the job's shape from what the directives gave, the way
// sbatch and qsub do, and checks what only the whole can show.
func (p *parser) finish() {
	s := p.s
	if s.Dialect == SLURM && !strings.HasPrefix(s.Body, "#!") {
		p.errs = append(p.errs, &Error{File: p.file, Line: 1, Msg: "the first line must start with #! and the path of an interpreter (#!/bin/bash), as sbatch requires", Err: ErrScript})
	}
	if !p.nodesSet {
		s.Nodes = 1
		if s.NTasks > 0 && s.TasksPerNode > 0 {
			s.Nodes = (s.NTasks + s.TasksPerNode - 1) / s.TasksPerNode
		}
	}
	if s.TasksPerNode == 0 {
		s.TasksPerNode = 1
		if s.NTasks > 0 {
			s.TasksPerNode = (s.NTasks + s.Nodes - 1) / s.Nodes
		}
	}
	if s.NTasks == 0 {
		s.NTasks = s.Nodes * s.TasksPerNode
	}
	if s.NTasks < s.Nodes {
		p.fail(whole, "--ntasks", ErrValue, "%d tasks on %d nodes leaves nodes without a task; give at least one task per node", s.NTasks, s.Nodes)
	}
	s.CoresPerNode = s.TasksPerNode * s.CPUsPerTask
	if s.CoresPerNode > jobrules.MaxCoresPerNode {
		p.fail(whole, "--cpus-per-task", ErrValue, "%d cores per node is too many", s.CoresPerNode)
	}
	if p.memPerCPU > 0 {
		s.MemPerNode = p.memPerCPU * int64(s.CoresPerNode)
	}
	if p.memTotal > 0 {
		s.MemPerNode = (p.memTotal + int64(s.Nodes) - 1) / int64(s.Nodes)
	}
	if s.MemPerNode > jobrules.MaxMemPerNode {
		p.fail(whole, "--mem-per-cpu", ErrValue, "%d bytes per node is more than 1PiB", s.MemPerNode)
	}
	if p.gpusTotal > 0 {
		if p.gpusTotal%s.Nodes != 0 {
			p.fail(p.gpuLine, "--gpus", ErrUnsupported, "%d GPUs do not split evenly over %d nodes; give --gpus-per-node", p.gpusTotal, s.Nodes)
		} else {
			s.GPUsPerNode = p.gpusTotal / s.Nodes
		}
	}
	if p.gpusPerTask > 0 {
		s.GPUsPerNode = p.gpusPerTask * s.TasksPerNode
	}
	if !s.WalltimeSet {
		s.Walltime = DefaultWalltime
		p.warn(whole, "--time", fmt.Sprintf("no time limit given: gridsub plans and asks the site for %s (give --time or -l walltime= to change it)", DefaultWalltime))
	}
	if p.joined && s.Stderr != "" && s.Stdout == "" {
		s.Stdout, s.Stderr = s.Stderr, ""
	} else if p.joined {
		s.Stderr = ""
	}
	if s.Dialect == PBS && s.Stdout != "" && s.Stderr == "" && !p.joined {
		// qsub without -j writes the error stream to its own file; with
		// only -o given, gridsub keeps it in the site's job log.
		p.warn(whole, "-e", "no -e and no -j oe: the error stream stays in the site's job log (`gridsub logs`)")
	}
	if len(s.MailTypes) > 0 && s.MailUser == "" {
		p.warn(whole, "--mail-user", "no mail user: mail goes to the site account's own address")
	}
	if len(s.MailTypes) == 0 && s.MailUser != "" {
		p.warn(whole, "--mail-user", "a mail user without mail types: no mail is sent (give --mail-type or -m)")
	}
	p.exportEnv()
}

// exportEnv reads --export (and qsub's -v and -V): NAME=VALUE sets a
// variable; NAME copies it from the submitting environment; ALL and NONE
// say whether the submitting environment goes too — gridsub never copies
// a whole environment to a site (it holds this machine's paths and, often,
// secrets), so ALL is accepted with a warning.
func (p *parser) exportEnv() {
	if p.export == "" {
		return
	}
	ln := p.exportLine // 0: on the command line
	dir := "--export=" + p.export
	if p.s.Dialect == PBS {
		dir = "-v " + p.export
	}
	for _, item := range strings.Split(p.export, ",") {
		switch strings.ToUpper(item) {
		case "ALL":
			p.warn(ln, dir, "the submitting environment is not copied to the site (it holds this machine's paths and secrets); jobs start from the site's login environment plus the variables named here")
			continue
		case "NONE", "NIL":
			continue
		case "":
			p.fail(ln, dir, ErrValue, "an empty entry; give NAME or NAME=VALUE separated by ','")
			continue
		}
		k, v, hasVal := strings.Cut(item, "=")
		if !jobrules.IsEnvName(k) {
			p.fail(ln, dir, ErrValue, "%q is not a variable name", k)
			continue
		}
		if strings.HasPrefix(k, "GRIDSUB_") {
			p.fail(ln, dir, ErrValue, "%s: GRIDSUB_* variables are set by gridsub", k)
			continue
		}
		if !hasVal {
			var ok bool
			if v, ok = p.lookupEnv(k); !ok {
				p.warn(ln, dir, k+" is not set in the submitting environment: not exported")
				continue
			}
		}
		if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' && hasVal {
			// A shell-quoted value (Toil quotes each with shlex.quote).
			v = strings.ReplaceAll(v[1:len(v)-1], `'"'"'`, "'")
		}
		if p.s.Env == nil {
			p.s.Env = map[string]string{}
		}
		p.s.Env[k] = v
	}
}

// sortedKeys of an environment.
func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
