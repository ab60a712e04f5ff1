package slurm

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

var _ backends.BatchSubmitter = (*Backend)(nil)

// SubmitBatch submits specs in as few remote commands as fit (one for a
// cycle's jobs in practice; see sshbatch): each job's inputs are staged
// first, then one `/bin/sh -c <script> gridsub-batch` runs, per job, the
// very command Submit runs (mkdir, wrapper from a here-document, sbatch),
// and every job's id is read back from its own section of the output. A
// job sbatch refused has its own error (ErrRejected with SLURM's words);
// a job whose section was cut off is looked up by its tag in one squeue
// of the login user's jobs, and is ErrOutcomeUnknown when not found.
func (b *Backend) SubmitBatch(ctx context.Context, specs []*backends.JobSpec) []backends.SubmitResult {
	res := make([]backends.SubmitResult, len(specs))
	var cmds []sshbatch.Command
	var at []int
	dirs := make([]string, len(specs))
	for i, spec := range specs {
		dir, err := b.prepare(ctx, spec)
		if err != nil {
			res[i].Err = err
			continue
		}
		dirs[i] = dir
		cmds = append(cmds, sshbatch.Command{Argv: SubmitArgv(path.Join(b.remoteDir(), dir), SbatchArgs(spec, b.cfg.Partition)),
			Stdin: Wrapper(spec)})
		at = append(at, i)
	}
	// A wrapper that cannot travel in a here-document (a NUL byte in a
	// script) goes alone, with its stdin streamed, as Submit does.
	var batchable []int
	var alone []int
	for k := range cmds {
		if cmds[k].Check() != nil {
			alone = append(alone, k)
		} else {
			batchable = append(batchable, k)
		}
	}
	in := make([]sshbatch.Command, len(batchable))
	for j, k := range batchable {
		in[j] = cmds[k]
	}
	batches, big, err := sshbatch.Build(in, 0, 0)
	if err != nil { // cannot happen: every command passed Check
		for _, k := range batchable {
			res[at[k]].Err = fmt.Errorf("%s: %w", b.cfg.Name, err)
		}
		batches, big = nil, nil
	}
	for _, j := range big {
		alone = append(alone, batchable[j])
	}
	var unknown []int
	for bi := range batches {
		bt := &batches[bi]
		if err := ctx.Err(); err != nil {
			for _, j := range bt.Index {
				res[at[batchable[j]]].Err = fmt.Errorf("%s: batch not sent: %w", b.cfg.Name, err)
			}
			continue
		}
		outs, _, runErr := sshbatch.Run(ctx, b.run, bt)
		for n, j := range bt.Index {
			k := batchable[j]
			i := at[k]
			o := &outs[n]
			switch o.Fate(runErr) {
			case sshbatch.Ran:
				r := backends.Result{Stdout: o.Stdout, Stderr: o.Stderr, ExitCode: o.ExitCode}
				res[i].ID, res[i].Err = b.accepted(specs[i], dirs[i], cmds[k].Argv, r)
				if res[i].Err != nil && r.ExitCode == 0 {
					// sbatch said yes but not what: the job may exist.
					unknown = append(unknown, i)
				}
			case sshbatch.NotRun:
				why := "the batch ended before reaching it"
				if runErr != nil {
					why = runErr.Error()
				}
				res[i].Err = fmt.Errorf("%w: %s: job %s not submitted: %s", backends.ErrUnavailable, b.cfg.Name, specs[i].GridID, why)
				if ctx.Err() != nil {
					res[i].Err = fmt.Errorf("%s: job %s not submitted: %w", b.cfg.Name, specs[i].GridID, ctx.Err())
				}
			default:
				unknown = append(unknown, i)
				res[i].Err = fmt.Errorf("%s: running the batch: %w", b.cfg.Name, runErr)
			}
		}
	}
	for _, k := range alone {
		i := at[k]
		r, err := b.exec(ctx, cmds[k].Argv, strings.NewReader(cmds[k].Stdin))
		if err != nil {
			res[i].Err = sentErr(err)
			continue
		}
		res[i].ID, res[i].Err = b.accepted(specs[i], dirs[i], cmds[k].Argv, r)
	}
	if len(unknown) > 0 {
		b.resolve(ctx, specs, dirs, unknown, res)
	}
	return res
}

// resolve looks the jobs of a cut batch up by their tags, in one squeue of
// the login user's jobs: a job found is submitted (its id is taken), one
// not found — or when squeue cannot be asked — keeps an error wrapping
// ErrOutcomeUnknown, since the cut shell may still submit it: the caller
// looks again before resubmitting.
func (b *Backend) resolve(ctx context.Context, specs []*backends.JobSpec, dirs []string, unknown []int, res []backends.SubmitResult) {
	cause := func(i int) error {
		if res[i].Err != nil {
			return res[i].Err
		}
		return fmt.Errorf("%w: the output was cut", backends.ErrUnavailable)
	}
	fail := func(why string, err error) {
		for _, i := range unknown {
			res[i] = backends.SubmitResult{Err: fmt.Errorf("%w: %w: %s: job %s (tag %s) may have been submitted: %s: %w",
				backends.ErrUnavailable, backends.ErrOutcomeUnknown, b.cfg.Name, specs[i].GridID, GridTag(specs[i].GridID), why, err)}
		}
	}
	if err := ctx.Err(); err != nil {
		fail("cannot look it up", err)
		return
	}
	argv := SqueueMineArgv()
	r, err := b.exec(ctx, argv, nil)
	if err == nil && r.ExitCode != 0 {
		err = b.commandErr(argv, r)
	}
	var recs []QueueRecord
	if err == nil {
		recs, err = ParseSqueue(r.Stdout)
	}
	if err != nil {
		fail("looking it up failed", err)
		return
	}
	byTag := map[string][]backends.JobID{}
	for _, rec := range recs {
		byTag[rec.Comment] = append(byTag[rec.Comment], rec.Status.ID)
	}
	for _, i := range unknown {
		ids := byTag[GridTag(specs[i].GridID)]
		if len(ids) == 0 {
			res[i] = backends.SubmitResult{Err: fmt.Errorf("%w: %w: %s: job %s (tag %s) not found right after its batch was cut; it may still arrive: %w",
				backends.ErrUnavailable, backends.ErrOutcomeUnknown, b.cfg.Name, specs[i].GridID, GridTag(specs[i].GridID), cause(i))}
			continue
		}
		if len(ids) > 1 {
			b.log.Warn("several jobs carry one tag after a cut batch; taking the first", "grid_id", specs[i].GridID, "jobs", ids)
		}
		res[i] = backends.SubmitResult{ID: ids[0]}
		b.mu.Lock()
		b.dirs[ids[0]] = dirs[i]
		b.mu.Unlock()
		b.log.Info("job of a cut batch found by its tag", "grid_id", specs[i].GridID, "job", ids[0])
	}
}
