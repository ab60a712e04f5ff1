package sshbatch

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// Arrayer is the dialect of a batch system with native job arrays.
//
// The contract:
//   - MaxArraySize is the site's bound on array indices (every index is
//     below it; 0: the site takes no native arrays); it may run a command
//     and cache the answer.
//   - ArrayCommand returns the one command that submits a native array
//     with the given indices (ascending, distinct, each below
//     MaxArraySize) whose elements are like spec except for their tags: it
//     is tagged ArrayTag(parent, attempt), runs from base (the directory
//     holding the job directories, as the login shell sees it) and takes
//     the driver (ArrayDriver) on its stdin. It prints what
//     ParseArraySubmitted reads.
//   - ElementID names element index of array (what Status, Cancel and
//     Find use); the dialect's Find and Live report an element of an array
//     tagged ArrayTag(parent, attempt) under its own tag
//     backends.ElementTag(parent, index, attempt).
//   - Wrapper is the job script the Backend writes into each element's
//     job directory (ScriptFile) before the array is submitted.
//   - ArrayRuns splits ascending indices into the index sets one
//     submission can take (each of two or more; an index left out goes as
//     a single job).
type Arrayer interface {
	MaxArraySize(ctx context.Context, x *Exec) (int, error)
	ArrayCommand(ctx context.Context, x *Exec, spec *backends.JobSpec, parent string, attempt int, indices []int, base string) (Command, error)
	ParseArraySubmitted(stdout []byte) (string, error)
	ElementID(array string, index int) backends.JobID
	Wrapper(spec *backends.JobSpec) string
	ArrayRuns(indices []int) [][]int
}

// ArrayTag is the tag of a native array holding attempt attempt of
// elements of the grid array parent: "gridsub-array:<parent>-a<attempt>".
// Each element's own tag (backends.ElementTag) follows from it and the
// element's index.
func ArrayTag(parent string, attempt int) string {
	return fmt.Sprintf("gridsub-array:%s-a%d", parent, attempt)
}

var arrayTagRe = regexp.MustCompile(`^gridsub-array:([A-Za-z0-9][A-Za-z0-9._-]*)-a([0-9]{1,9})$`)

// FromArrayTag inverts ArrayTag (ok false when tag is not an array's).
func FromArrayTag(tag string) (parent string, attempt int, ok bool) {
	m := arrayTagRe.FindStringSubmatch(tag)
	if m == nil {
		return "", 0, false
	}
	attempt, _ = strconv.Atoi(m[2])
	return m[1], attempt, true
}

// StartedDir is the directory an element's driver makes in its job
// directory before running it: a batch system that starts the element
// again (a requeue after a node failure) finds it and does not run the
// element a second time.
const StartedDir = ".gridsub-started"

// ArrayDriver is the script every element of a native array runs: enter
// (the batch system's lines to reach the directory the array was submitted
// from; "" when it starts there), then it enters the element's own job
// directory (<parent>_<index>-a<attempt> there; indexVar names the batch
// system's variable holding the element's index), runs after (lines the
// batch system needs in the element's directory), and runs the element's
// wrapper there once (StartedDir) with its output in the job's own files,
// so each element has its directory, output and exit-code file as a
// single job has.
func ArrayDriver(parent string, attempt int, indexVar, enter, after string) string {
	return "#!/bin/bash\n" +
		"# gridsub native array driver: elements of " + parent + ", attempt " + strconv.Itoa(attempt) + "\n" +
		enter +
		"cd -- " + ShellQuote(parent+"_") + "\"${" + indexVar + "}\"" + ShellQuote(fmt.Sprintf("-a%d", attempt)) +
		" || { echo \"gridsub: no job directory for element ${" + indexVar + "}\" >&2; exit 125; }\n" +
		"mkdir " + StartedDir + " 2>/dev/null || { echo 'gridsub: this element was started before; it is not run twice' >&2; exit 125; }\n" +
		after +
		"exec /bin/bash ./" + ScriptFile + " >" + StdoutFile + " 2>" + StderrFile + " </dev/null\n"
}

// arrayKey is what elements sharing one native array have in common: the
// parent and attempt of their tags and every field the submission options
// are built from.
type arrayKey struct {
	parent, attempt                string
	name, partition, account, resv string
	nodes, cores, gpus, comps      int
	limit                          int
	mem                            int64
	walltime                       time.Duration
}

// ArithmeticRuns splits ascending indices into arithmetic runs, longest
// first from the left (0,1,2,3 is one run; 0,1,2,7,9 is 0-2 and 7-9:2):
// the ArrayRuns of a batch system whose array ranges are first-last:step
// (PBS's qsub -J, Grid Engine's qsub -t).
func ArithmeticRuns(indices []int) [][]int {
	var runs [][]int
	for i := 0; i < len(indices); {
		if i+1 == len(indices) {
			runs = append(runs, indices[i:])
			break
		}
		step := indices[i+1] - indices[i]
		j := i + 1
		for j+1 < len(indices) && indices[j+1]-indices[j] == step {
			j++
		}
		runs = append(runs, indices[i:j+1])
		i = j + 1
	}
	return runs
}

// NativeArrays reports whether the site submits grid arrays as native
// arrays (Config.NativeArrays, and a dialect that has them).
func (b *Backend) NativeArrays() bool {
	_, ok := b.d.(Arrayer)
	return ok && b.cfg.NativeArrays
}

// SubmitArrays submits specs as backends.ArraySubmitter says: the elements
// of one grid array and attempt with the same options go as one native
// array (one submission command; their wrappers are written into their own
// job directories first, in as few remote commands as fit), within the
// site's MaxArraySize; everything else goes through SubmitBatch.
func (b *Backend) SubmitArrays(ctx context.Context, specs []*backends.JobSpec) []backends.SubmitResult {
	res := make([]backends.SubmitResult, len(specs))
	ar, ok := b.d.(Arrayer)
	if !ok || !b.cfg.NativeArrays {
		return b.SubmitBatch(ctx, specs)
	}
	limit, err := ar.MaxArraySize(ctx, b.x)
	if err != nil {
		b.log.Warn("cannot read the site's largest array; submitting elements one by one", "err", err)
		limit = 0
	}
	groups := map[arrayKey][]int{}
	var keys []arrayKey
	var rest []int
	for i, s := range specs {
		parent, idx, att, isElem := backends.ArrayElement(s.GridID)
		if !isElem || idx >= limit || s.Components > 1 {
			rest = append(rest, i)
			continue
		}
		k := arrayKey{parent: parent, attempt: fmt.Sprint(att), name: s.Name, partition: s.Partition, account: s.Account,
			resv: s.Reservation, nodes: s.Nodes, cores: s.CoresPerNode, gpus: s.GPUsPerNode, comps: s.Components,
			mem: s.MemPerNode, walltime: s.Walltime, limit: s.ArrayLimit}
		if _, seen := groups[k]; !seen {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], i)
	}
	for _, k := range keys {
		g := groups[k]
		byIndex := map[int]int{}
		var indices []int
		for _, i := range g {
			_, ix, _, _ := backends.ArrayElement(specs[i].GridID)
			if _, dup := byIndex[ix]; dup {
				rest = append(rest, i)
				continue
			}
			byIndex[ix] = i
			indices = append(indices, ix)
		}
		sort.Ints(indices)
		used := map[int]bool{}
		for _, run := range ar.ArrayRuns(indices) {
			if len(run) < 2 {
				continue
			}
			var idx []int
			for _, ix := range run {
				if i, ok := byIndex[ix]; ok && !used[ix] {
					used[ix] = true
					idx = append(idx, i)
				}
			}
			b.submitArray(ctx, ar, specs, idx, res)
		}
		for _, ix := range indices {
			if !used[ix] {
				rest = append(rest, byIndex[ix])
			}
		}
	}
	if len(rest) > 0 {
		sort.Ints(rest)
		sub := make([]*backends.JobSpec, len(rest))
		for n, i := range rest {
			sub[n] = specs[i]
		}
		for n, r := range b.SubmitBatch(ctx, sub) {
			res[rest[n]] = r
		}
	}
	return res
}

// PutFileArgv stores its stdin in file, readable by the owner only (the
// wrapper carries the job's environment), with one small process per file
// (a batch writes many wrappers quickly). The directory's StartedDir and
// ElementIDFile, left by an earlier job of the same tag (a reused remote
// directory), go: the element about to be submitted has not started.
func PutFileArgv(file string) []string {
	return []string{"/bin/sh", "-c", `rmdir -- "${1%/*}/` + StartedDir + `" 2>/dev/null; rm -f -- "${1%/*}/` + ElementIDFile + `"; umask 077 && exec dd of="$1" bs=64k status=none`, "gridsub-put", file}
}

// ElementIDFile is the file in a job directory that names the batch job
// that ran there, written by a native array element's driver when it
// starts (SLURM, PBS) and by a PBS submission: a job its batch system has
// forgotten is found by it.
const ElementIDFile = ".gridsub-jobid"

// submitArray submits specs[idx] (one group of SubmitArrays) as one native
// array and settles their results.
func (b *Backend) submitArray(ctx context.Context, ar Arrayer, specs []*backends.JobSpec, idx []int, res []backends.SubmitResult) {
	parent, _, attempt, _ := backends.ArrayElement(specs[idx[0]].GridID)
	// Check and stage each element; write each wrapper into its directory.
	var live []int
	var cmds []Command
	dirs := map[int]string{}
	for _, i := range idx {
		dir, _, err := b.prepare(ctx, specs[i], true)
		if err != nil {
			res[i].Err = err
			continue
		}
		dirs[i] = dir
		live = append(live, i)
		cmds = append(cmds, Command{Argv: PutFileArgv(path.Join(dir, ScriptFile)), Stdin: ar.Wrapper(specs[i])})
	}
	if len(live) == 0 {
		return
	}
	var mk []string
	for _, i := range live {
		mk = append(mk, dirs[i])
	}
	err := b.mkdirs(ctx, mk)
	var batches []Batch
	var alone []int
	if err == nil {
		batches, alone, err = Build(cmds, 0, 0)
	}
	if err == nil && len(alone) > 0 {
		err = fmt.Errorf("%d wrapper(s) too large to share a batch", len(alone))
	}
	written := make([]bool, len(cmds))
	if err == nil {
		for bi := range batches {
			outs, _, runErr := Run(ctx, b.x.run, &batches[bi])
			for n, j := range batches[bi].Index {
				if outs[n].Fate(runErr) == Ran && outs[n].ExitCode == 0 {
					written[j] = true
				}
			}
		}
	}
	var ok []int
	for n, i := range live {
		if !written[n] {
			why := "its wrapper could not be written"
			if err != nil {
				why = err.Error()
			}
			res[i].Err = fmt.Errorf("%w: %s: element %s not submitted: %s", backends.ErrUnavailable, b.cfg.Name, specs[i].GridID, why)
			continue
		}
		ok = append(ok, i)
	}
	if len(ok) == 0 {
		return
	}
	indices := make([]int, len(ok))
	byIndex := map[int]int{}
	for n, i := range ok {
		_, indices[n], _, _ = backends.ArrayElement(specs[i].GridID)
		byIndex[indices[n]] = i
	}
	sort.Ints(indices)
	base := path.Join(b.RemoteDir(), "gridsub")
	cmd, err := ar.ArrayCommand(ctx, b.x, specs[ok[0]], parent, attempt, indices, base)
	if err != nil {
		for _, i := range ok {
			res[i].Err = err
		}
		return
	}
	t0 := time.Now()
	r, err := b.x.Run(ctx, cmd.Argv, strings.NewReader(cmd.Stdin))
	var array string
	if err == nil {
		if r.ExitCode != 0 {
			err = b.x.Fail(cmd.Argv, r)
			for _, i := range ok {
				res[i].Err = err
			}
			return
		}
		array, err = ar.ParseArraySubmitted(r.Stdout)
	} else {
		err = SentErr(err)
	}
	if err != nil {
		// The array may exist: look its elements up by their tags.
		b.resolveElements(ctx, specs, ok, dirs, res, err)
		return
	}
	for _, ix := range indices {
		i := byIndex[ix]
		id := ar.ElementID(array, ix)
		b.setDir(id, dirs[i])
		res[i].ID = id
	}
	b.log.Info("native array submitted", "array", array, "parent", parent, "attempt", attempt, "elements", len(ok),
		"took", time.Since(t0).Round(time.Millisecond))
}

// resolveElements settles the elements of an array whose submission's
// outcome is unknown: each found among the live jobs by its own tag has
// its id; the others are ErrOutcomeUnknown (looked up again before any
// resubmission).
func (b *Backend) resolveElements(ctx context.Context, specs []*backends.JobSpec, ok []int, dirs map[int]string, res []backends.SubmitResult, cause error) {
	var byTag map[string]backends.JobID
	var lerr error
	if lerr = ctx.Err(); lerr == nil {
		byTag, lerr = b.d.Live(ctx, b.x)
	}
	for _, i := range ok {
		if id, found := byTag[specs[i].GridID]; found && lerr == nil {
			b.setDir(id, dirs[i])
			res[i] = backends.SubmitResult{ID: id}
			continue
		}
		why := "not found right after its submission was cut (it may still arrive)"
		if lerr != nil {
			why = fmt.Sprintf("cannot look it up (%v)", lerr)
		}
		e := fmt.Errorf("%w: %w: %s: array element %s may have been submitted: %s: %w",
			backends.ErrUnavailable, backends.ErrOutcomeUnknown, b.cfg.Name, specs[i].GridID, why, cause)
		res[i] = backends.SubmitResult{Err: e}
	}
}
