package pbs

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

var _ sshbatch.Arrayer = (*dialect)(nil)

// DefaultMaxArraySize is OpenPBS's max_array_size when the server sets none.
const DefaultMaxArraySize = 10000

// GridID is the grid tag of the job a record names: its own tag, or for a
// subjob of a native array (`12[5].server`) its array's tag
// (sshbatch.ArrayTag) with the subjob's index.
func (r *JobRecord) GridID() string {
	if g := GridFromTag(r.Vars[TagVar]); g != "" {
		return g
	}
	parent, attempt, ok := sshbatch.FromArrayTag(r.Vars[TagVar])
	if !ok {
		return ""
	}
	ix, ok := subjobIndex(string(r.ID))
	if !ok {
		return ""
	}
	return backends.ElementTag(parent, ix, attempt)
}

// subjobIndex reads the index of a subjob id ("12[5].server" -> 5).
func subjobIndex(id string) (int, bool) {
	i, j := strings.IndexByte(id, '['), strings.IndexByte(id, ']')
	if i < 0 || j <= i+1 {
		return 0, false
	}
	n, err := strconv.Atoi(id[i+1 : j])
	return n, err == nil && n >= 0
}

// MaxArraySize is the server's max_array_size (one qstat -B, once); an
// index must stay below it.
func (d *dialect) MaxArraySize(ctx context.Context, x *sshbatch.Exec) (int, error) {
	d.mu.Lock()
	n := d.maxArray
	d.mu.Unlock()
	if n > 0 {
		return n, nil
	}
	r, err := x.Output(ctx, d.cmds.ServerArgv())
	if err != nil {
		return 0, err
	}
	srv, err := ParseServer(r.Stdout)
	if err != nil {
		return 0, err
	}
	n = srv.MaxArraySize
	if n < 2 {
		n = 0
	}
	d.mu.Lock()
	d.maxArray = n
	d.mu.Unlock()
	return n, nil
}

// ArrayRuns splits indices into arithmetic runs (qsub -J takes X-Y[:Z]
// only), longest first from the left: 0,1,2,3 is one run; 0,1,2,7,9 is
// 0-2 and 7-9:2.
func (d *dialect) ArrayRuns(indices []int) [][]int { return ArrayRuns(indices) }

// ArrayRuns is the dialect's ArrayRuns (sshbatch.ArithmeticRuns).
func ArrayRuns(indices []int) [][]int { return sshbatch.ArithmeticRuns(indices) }

// JRange is qsub -J's value for an arithmetic run of two or more indices.
func JRange(run []int) string {
	s := strconv.Itoa(run[0]) + "-" + strconv.Itoa(run[len(run)-1])
	if step := run[1] - run[0]; step != 1 {
		s += ":" + strconv.Itoa(step)
	}
	return s
}

// arraySubmitScript submits the driver (stdin) from the directory holding
// the job directories: `bash -c arraySubmitScript gridsub-array <qsub>
// <dir> <qsub options...>`.
const arraySubmitScript = `set -e; q=$1; d=$2; shift 2; cd -- "$d"; exec "$q" "$@"`

// ArrayQsubArgs are spec's qsub options (QsubArgs) for a native array of
// the indices of run: tagged with the array's tag, -J, and rerunnable
// (OpenPBS refuses a non-rerunnable array: "cannot submit non-rerunable
// Array Job"; the driver runs each element at most once, StartedDir),
// the array's own output discarded (each element writes its own).
func ArrayQsubArgs(spec *backends.JobSpec, queue string, cpn int, parent string, attempt int, run []int) []string {
	sp := *spec
	if sp.Name == "" {
		sp.Name = parent
	}
	a := QsubArgs(&sp, queue, cpn)
	for i := 0; i < len(a); i++ {
		switch {
		case a[i] == "-v" && i+1 < len(a) && strings.HasPrefix(a[i+1], TagVar+"="):
			a[i+1] = TagVar + "=" + sshbatch.ArrayTag(parent, attempt)
		case a[i] == "-r" && i+1 < len(a):
			a[i+1] = "y"
		}
	}
	return append(a, "-J", JRange(run), "-o", "/dev/null", "-e", "/dev/null")
}

// ArrayCommand submits the driver with qsub -J from base; the driver
// enters $PBS_O_WORKDIR (PBS starts jobs in the home directory), then the
// element's directory, which becomes $PBS_O_WORKDIR for the wrapper, and
// records the subjob's id there (IDFile) as a single submission does.
func (d *dialect) ArrayCommand(ctx context.Context, x *sshbatch.Exec, spec *backends.JobSpec, parent string, attempt int, indices []int, base string) (sshbatch.Command, error) {
	runs := ArrayRuns(indices)
	if len(runs) != 1 || len(indices) < 2 {
		return sshbatch.Command{}, fmt.Errorf("%w: qsub -J takes one arithmetic run of two or more indices, got %v", backends.ErrInvalidSpec, indices)
	}
	_, cpn, err := d.shape(ctx, x)
	if err != nil {
		return sshbatch.Command{}, err
	}
	sp := *spec
	if sp.Account == "" {
		sp.Account = d.cfg.Account
	}
	argv := append([]string{"bash", "-c", arraySubmitScript, "gridsub-array", d.cmds.cmd("qsub"), base},
		ArrayQsubArgs(&sp, d.cfg.Queue, cpn, parent, attempt, indices)...)
	driver := sshbatch.ArrayDriver(parent, attempt, "PBS_ARRAY_INDEX",
		"cd -- \"$PBS_O_WORKDIR\" || exit 125\n",
		"export PBS_O_WORKDIR=\"$PWD\"\nprintf '%s\\n' \"$PBS_JOBID\" > "+IDFile+"\n")
	return sshbatch.Command{Argv: argv, Stdin: driver}, nil
}

// ParseArraySubmitted reads qsub's answer for an array: "12[].server".
func (d *dialect) ParseArraySubmitted(stdout []byte) (string, error) {
	id, err := ParseQsub(stdout)
	if err == nil && !strings.Contains(string(id), "[]") {
		err = fmt.Errorf("%w: qsub answered %q for an array", backends.ErrBadOutput, id)
	}
	return string(id), err
}

// ElementID is PBS's name of a subjob: "12[5].server".
func (d *dialect) ElementID(array string, index int) backends.JobID {
	return backends.JobID(strings.Replace(array, "[]", "["+strconv.Itoa(index)+"]", 1))
}

// Wrapper is the element's job script: the PBS wrapper, as for a job.
func (d *dialect) Wrapper(spec *backends.JobSpec) string { return Wrapper(spec) }
