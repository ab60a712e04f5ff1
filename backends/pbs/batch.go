package pbs

import (
	"context"
	"fmt"
	"strings"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

var _ backends.BatchSubmitter = (*Backend)(nil)

// SubmitBatch submits specs in as few remote commands as fit (one for a
// cycle's jobs in practice; see backends/sshbatch): each job is checked
// against the site and its inputs staged first, then one `/bin/sh -c
// <script> gridsub-batch` runs, per job, the very command Submit runs
// (mkdir, the wrapper from a here-document, qsub, the id file), and every
// job's id is read back from its own section of the output. A job qsub
// refused has its own error (ErrRejected with PBS's words); the jobs of a
// cut batch are looked up by their tags in one listing of the server's
// live jobs, and a job not found is ErrOutcomeUnknown.
func (b *Backend) SubmitBatch(ctx context.Context, specs []*backends.JobSpec) []backends.SubmitResult {
	res := make([]backends.SubmitResult, len(specs))
	var subs []sshbatch.Submission
	var at []int
	var dirs []string
	for i, spec := range specs {
		full, cpn, err := b.prepare(ctx, spec)
		if err != nil {
			res[i].Err = err
			continue
		}
		subs = append(subs, sshbatch.Submission{Tag: GridTag(spec.GridID), Cmd: sshbatch.Command{
			Argv: b.cmds.SubmitArgv(full, b.qsubArgs(spec, cpn)), Stdin: Wrapper(spec)}})
		at = append(at, i)
		dirs = append(dirs, full)
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

// lookupTags finds the jobs of subs[ks] by their tags among the live jobs
// of the server (one qstat without ids: a job submitted a moment ago is
// still queued, and the full history that FindByGridID reads takes minutes
// on a server with a long one). A job that already ended is not found and
// stays outcome-unknown: the broker's reconciliation (FindByGridID) finds
// it later.
func (b *Backend) lookupTags(ctx context.Context, ks []int, subs []sshbatch.Submission, dirs []string) (map[int]backends.JobID, error) {
	if b.cfg.User == "" {
		return nil, fmt.Errorf("%w: %s: looking jobs up by tag needs the login user (Config.User)", backends.ErrInvalidSpec, b.cfg.Name)
	}
	argv := b.cmds.LiveDSVArgv()
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		return nil, b.commandErr(argv, r)
	}
	recs, err := ParseDSV(r.Stdout)
	if err != nil {
		return nil, err
	}
	byTag := map[string]backends.JobID{}
	for _, rec := range recs {
		tag := rec.Vars[TagVar]
		if _, dup := byTag[tag]; !dup && strings.HasPrefix(rec.Attrs["Job_Owner"], b.cfg.User+"@") {
			byTag[tag] = rec.ID
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
