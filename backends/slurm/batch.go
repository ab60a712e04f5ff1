package slurm

import (
	"context"
	"errors"
	"fmt"
	"path"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

var _ backends.BatchSubmitter = (*Backend)(nil)

// SubmitBatch submits specs in as few remote commands as fit (one for a
// cycle's jobs in practice; see backends/sshbatch): each job's inputs are
// staged first, one `mkdir -p` makes every job directory, then one
// `/bin/sh -c <script> gridsub-batch` runs, per job, `sbatch --chdir=<job
// directory> <the options of Submit>` with the wrapper on stdin (a
// here-document: no file, no shell per job, so a job costs one sbatch),
// and every job's id is read back from its own section of the output. A job sbatch refused has its own error
// (ErrRejected with SLURM's words); the jobs of a cut batch are looked up
// by their tags in one squeue of the login user's jobs, and a job not
// found is ErrOutcomeUnknown.
func (b *Backend) SubmitBatch(ctx context.Context, specs []*backends.JobSpec) []backends.SubmitResult {
	res := make([]backends.SubmitResult, len(specs))
	var subs []sshbatch.Submission
	var at []int
	var dirs []string
	for i, spec := range specs {
		dir, err := b.prepare(ctx, spec)
		if err != nil {
			res[i].Err = err
			continue
		}
		subs = append(subs, sshbatch.Submission{Tag: GridTag(spec.GridID), Cmd: sshbatch.Command{
			Argv: BatchSbatchArgv(path.Join(b.remoteDir(), dir), b.sbatchArgs(spec)), Stdin: Wrapper(spec)}})
		at = append(at, i)
		dirs = append(dirs, dir)
	}
	if err := b.mkdirs(ctx, subs, dirs); err != nil {
		for k := range subs {
			res[at[k]].Err = err
		}
		return res
	}
	par := b.cfg.BatchSessions
	if par <= 0 {
		par = DefaultBatchSessions
	}
	site := sshbatch.Site{Name: b.cfg.Name, Run: b.run, Parallel: par,
		Accept: func(k int, r backends.Result) (backends.JobID, error) {
			return b.accepted(specs[at[k]], dirs[k], subs[k].Cmd.Argv, r)
		},
		Lookup: func(ctx context.Context, ks []int) (map[int]backends.JobID, error) {
			return b.lookupTags(ctx, ks, subs, dirs)
		}}
	for k, r := range sshbatch.Submit(ctx, site, subs) {
		res[at[k]] = r
	}
	return res
}

// lookupTags finds the jobs of subs[ks] by their tags in one squeue of
// the login user's jobs (a job just submitted is surely still there).
func (b *Backend) lookupTags(ctx context.Context, ks []int, subs []sshbatch.Submission, dirs []string) (map[int]backends.JobID, error) {
	argv := SqueueMineArgv()
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		return nil, b.commandErr(argv, r)
	}
	recs, err := ParseSqueue(r.Stdout)
	if err != nil {
		return nil, err
	}
	byTag := map[string]backends.JobID{}
	for _, rec := range recs {
		if _, dup := byTag[rec.Comment]; !dup {
			byTag[rec.Comment] = rec.Status.ID
		}
	}
	out := map[int]backends.JobID{}
	for _, k := range ks {
		if id, ok := byTag[subs[k].Tag]; ok {
			out[k] = id
			b.mu.Lock()
			b.dirs[id] = dirs[k]
			b.mu.Unlock()
			b.log.Info("job of a cut batch found by its tag", "tag", subs[k].Tag, "job", id)
		}
	}
	return out, nil
}

// mkdirs makes the job directories of subs in one command (per
// MaxIDsPerCommand of them). A failure fails every job of the batch: none
// was submitted.
func (b *Backend) mkdirs(ctx context.Context, subs []sshbatch.Submission, dirs []string) error {
	var all []string
	for _, d := range dirs {
		all = append(all, path.Join(b.remoteDir(), d))
	}
	for lo := 0; lo < len(all); lo += MaxIDsPerCommand {
		argv := MkdirArgv(all[lo:min(lo+MaxIDsPerCommand, len(all))])
		r, err := b.exec(ctx, argv, nil)
		if err != nil {
			if !errors.Is(err, backends.ErrUnavailable) && ctx.Err() == nil {
				err = fmt.Errorf("%w: %w", backends.ErrUnavailable, err)
			}
			return fmt.Errorf("making the job directories, nothing submitted: %w", err)
		}
		if r.ExitCode != 0 {
			return fmt.Errorf("%w: %s: cannot make the job directories, nothing submitted: %s", backends.ErrRejected, b.cfg.Name, Message(r))
		}
	}
	return nil
}
