package gridengine

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// Native arrays (qsub -t). Grid Engine numbers an array job's tasks from
// 1, a grid array's elements from 0: element i is task i+1, and its
// remote id is "<job number>.<task>" (what qstat, qacct and qdel -t call
// it). The array job carries the array's tag (sshbatch.ArrayTag) in
// TagVar; each element's own tag follows from it and the task number.

var _ sshbatch.Arrayer = (*dialect)(nil)

// MaxTasks bounds a site whose max_aj_tasks is 0 (Grid Engine: no limit):
// gridsub submits no array of higher task numbers.
const MaxTasks = 1_000_000

// ArrayLimits are the global configuration's array parameters (qconf
// -sconf): MaxTasks is max_aj_tasks (the most tasks of one array job; 0:
// no limit), MaxInstances is max_aj_instances (the most tasks of one array
// running at once; 0: no limit).
type ArrayLimits struct {
	MaxTasks, MaxInstances int
}

// ParseArrayLimits reads max_aj_tasks and max_aj_instances from `qconf
// -sconf`. A configuration without them, or with a value that is not a
// count, is an error: the site's limit is unknown.
func ParseArrayLimits(out []byte) (ArrayLimits, error) {
	var l ArrayLimits
	seen := 0
	for _, line := range sshbatch.Lines(out) {
		f := strings.Fields(line)
		if len(f) != 2 || (f[0] != "max_aj_tasks" && f[0] != "max_aj_instances") {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 0 {
			return ArrayLimits{}, sshbatch.BadOutput("qconf -sconf", out, fmt.Sprintf("%s %q is not a count", f[0], f[1]))
		}
		if f[0] == "max_aj_tasks" {
			l.MaxTasks = n
		} else {
			l.MaxInstances = n
		}
		seen++
	}
	if seen != 2 {
		return ArrayLimits{}, sshbatch.BadOutput("qconf -sconf", out, "want max_aj_tasks and max_aj_instances")
	}
	return l, nil
}

// SconfArgv shows the global configuration.
func (c Cmds) SconfArgv() []string { return []string{c.cmd("qconf"), "-sconf"} }

// MaxArraySize is the site's max_aj_tasks (one qconf -sconf, once): task
// i+1 of element i stays within it. A site without a limit is MaxTasks;
// one whose limit is below 2 takes no native arrays (0).
func (d *dialect) MaxArraySize(ctx context.Context, x *sshbatch.Exec) (int, error) {
	d.mu.Lock()
	l, ok := d.limits, d.haveLimits
	d.mu.Unlock()
	if !ok {
		r, err := x.Output(ctx, d.cmds.SconfArgv())
		if err != nil {
			return 0, err
		}
		if l, err = ParseArrayLimits(r.Stdout); err != nil {
			return 0, err
		}
		d.mu.Lock()
		d.limits, d.haveLimits = l, true
		d.mu.Unlock()
	}
	switch {
	case l.MaxTasks == 0:
		return MaxTasks, nil
	case l.MaxTasks < 2:
		return 0, nil
	}
	return l.MaxTasks, nil
}

// ArrayRuns splits ascending indices into arithmetic runs (qsub -t takes
// n-m:s only), longest first from the left: 0,1,2,3 is one run; 0,1,2,7,9
// is 0-2 and 7-9:2.
func (d *dialect) ArrayRuns(indices []int) [][]int { return ArrayRuns(indices) }

// ArrayRuns is the dialect's ArrayRuns (sshbatch.ArithmeticRuns).
func ArrayRuns(indices []int) [][]int { return sshbatch.ArithmeticRuns(indices) }

// TRange is qsub -t's value for an arithmetic run of element indices:
// their tasks (index+1), "first-last:step".
func TRange(run []int) string {
	step := 1
	if len(run) > 1 {
		step = run[1] - run[0]
	}
	return fmt.Sprintf("%d-%d:%d", run[0]+1, run[len(run)-1]+1, step)
}

// arraySubmitScript submits the driver (stdin) as one array job from the
// directory holding the job directories and records the array's tag under
// the index (IndexDir, by job number), removing the cancel markers of
// tasks a wrapped-around job number may have left: `bash -c
// arraySubmitScript gridsub-array <qsub> <base> <index dir> <array tag>
// <qsub options...>`. It prints qsub -terse's answer ("16.1-200:1").
const arraySubmitScript = `set -e; q=$1; b=$2; ix=$3; tag=$4; shift 4; mkdir -p -- "$ix"; ix=$(cd -- "$ix" && pwd); cd -- "$b"; ` +
	`o=$("$q" -terse -wd "$PWD" -o /dev/null -e /dev/null "$@"); id=${o%%.*}; ` +
	`case $id in ''|*[!0-9]*) printf '%s\n' "$o"; exit 0;; esac; printf '%s\n' "$tag" > "$ix/$id"; ` +
	`rm -f -- "$ix/../.cancelled/$id".*; printf '%s\n' "$o"`

// ArrayQsubArgs are spec's qsub options (QsubArgs) for the array job of
// run: tagged with the array's tag, h_rt of rt seconds, -t, and the
// reservation.
func ArrayQsubArgs(spec *backends.JobSpec, shape Shape, queue, project, parent string, attempt int, run []int, rt string) []string {
	sp := *spec
	if sp.Name == "" {
		sp.Name = parent
	}
	a := QsubArgs(&sp, shape, queue, project)
	for i := 0; i+1 < len(a); i++ {
		if a[i] == "-v" && strings.HasPrefix(a[i+1], TagVar+"=") {
			a[i+1] = TagVar + "=" + sshbatch.ArrayTag(parent, attempt)
		}
	}
	a = append(a, "-l", "h_rt="+rt, "-t", TRange(run))
	if spec.Reservation != "" {
		a = append(a, "-ar", spec.Reservation)
	}
	return a
}

// ElementVar is the driver's variable holding the element's index
// ($SGE_TASK_ID - 1).
const ElementVar = "GRIDSUB_ELEMENT"

// ArrayCommand submits the driver with qsub -t from base. The driver runs
// in base (-wd), enters the element's directory, records the element's id
// there (IDFile: "<job>.<task>") and runs its wrapper. An array in a
// reservation whose end is known gets at most the reservation's remaining
// time as h_rt (Grid Engine refuses a job that outlasts it).
func (d *dialect) ArrayCommand(_ context.Context, _ *sshbatch.Exec, spec *backends.JobSpec, parent string, attempt int, indices []int, base string) (sshbatch.Command, error) {
	runs := ArrayRuns(indices)
	if len(runs) != 1 || len(indices) < 2 {
		return sshbatch.Command{}, fmt.Errorf("%w: qsub -t takes one arithmetic run of two or more indices, got %v", backends.ErrInvalidSpec, indices)
	}
	rt := Seconds(spec.Walltime)
	if spec.Reservation != "" {
		d.mu.Lock()
		end := d.ends[backends.ResvID(spec.Reservation)]
		d.mu.Unlock()
		if !end.IsZero() {
			if left := end.Sub(d.cfg.Now()) - time.Second; left < spec.Walltime {
				rt = Seconds(max(left, time.Second))
			}
		}
	}
	argv := append([]string{"bash", "-c", arraySubmitScript, "gridsub-array", d.cmds.cmd("qsub"), base, d.indexDir(), sshbatch.ArrayTag(parent, attempt)},
		ArrayQsubArgs(spec, d.shape(), d.cfg.Queue, d.cfg.Project, parent, attempt, indices, rt)...)
	driver := sshbatch.ArrayDriver(parent, attempt, ElementVar,
		ElementVar+"=$((SGE_TASK_ID - 1))\n",
		"printf '%s\\n' \"$JOB_ID.$SGE_TASK_ID\" > "+IDFile+"\n")
	return sshbatch.Command{Argv: argv, Stdin: driver}, nil
}

var arraySubmittedRe = regexp.MustCompile(`^([1-9][0-9]{0,17})\.[0-9]+-[0-9]+:[0-9]+$`)

// ParseArraySubmitted reads qsub -terse's answer for an array job
// ("16.1-200:1"): its job number.
func (d *dialect) ParseArraySubmitted(stdout []byte) (string, error) { return ParseArrayQsub(stdout) }

// ParseArrayQsub is the dialect's ParseArraySubmitted.
func ParseArrayQsub(stdout []byte) (string, error) {
	ls := sshbatch.Lines(stdout)
	if len(ls) == 1 {
		if m := arraySubmittedRe.FindStringSubmatch(strings.TrimSpace(ls[0])); m != nil {
			return m[1], nil
		}
	}
	return "", sshbatch.BadOutput("qsub -terse -t", stdout, "want an array job such as 16.1-200:1")
}

// ElementID is Grid Engine's name of element index of array: its task
// "<job>.<index+1>".
func (d *dialect) ElementID(array string, index int) backends.JobID { return TaskID(array, index+1) }

// TaskID names task of job number job.
func TaskID(job string, task int) backends.JobID {
	return backends.JobID(job + "." + strconv.Itoa(task))
}

// SplitTaskID reads "<job>.<task>" (ok false for a plain job number or
// anything else).
func SplitTaskID(id string) (job string, task int, ok bool) {
	job, t, found := strings.Cut(id, ".")
	if !found || !validJobID(job) || !taskRe.MatchString(t) {
		return "", 0, false
	}
	task, _ = strconv.Atoi(t)
	return job, task, true
}

var taskRe = regexp.MustCompile(`^[1-9][0-9]{0,8}$`)

// Wrapper is the element's job script: the shared wrapper, as for a job.
func (d *dialect) Wrapper(spec *backends.JobSpec) string { return sshbatch.Wrapper(spec, "") }

// TaskSet is the tasks of a qstat entry or a `job-array tasks` line:
// comma-separated "n" or "n-m:s" (qstat writes "8,9,11-19:1,23-30:1").
type TaskSet []taskRange

type taskRange struct{ first, last, step int }

// ParseTaskSet reads a task list; "" is no tasks.
func ParseTaskSet(s string) (TaskSet, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var ts TaskSet
	for _, part := range strings.Split(s, ",") {
		r := taskRange{step: 1}
		lo, rest, isRange := strings.Cut(part, "-")
		var err error
		if r.first, err = strconv.Atoi(lo); err != nil || r.first < 1 {
			return nil, fmt.Errorf("task list %q: %q is not a task number", s, lo)
		}
		r.last = r.first
		if isRange {
			hi, st, hasStep := strings.Cut(rest, ":")
			if r.last, err = strconv.Atoi(hi); err != nil || r.last < r.first {
				return nil, fmt.Errorf("task list %q: range %q", s, part)
			}
			if hasStep {
				if r.step, err = strconv.Atoi(st); err != nil || r.step < 1 {
					return nil, fmt.Errorf("task list %q: step in %q", s, part)
				}
			}
		}
		ts = append(ts, r)
	}
	return ts, nil
}

// Has reports whether task is in the set.
func (ts TaskSet) Has(task int) bool {
	for _, r := range ts {
		if task >= r.first && task <= r.last && (task-r.first)%r.step == 0 {
			return true
		}
	}
	return false
}

// Count is how many jobs a qstat entry stands for: 1, or the tasks of
// an array job's pending entry ("8,9,11-19:1" is 11), counted up to
// MaxTasks.
func (j *Job) Count() int {
	ts, err := ParseTaskSet(j.Tasks)
	if err != nil || len(ts) == 0 {
		return 1
	}
	n := 0
	ts.Each(MaxTasks, func(int) { n++ })
	return n
}

// Each calls f for every task in the set, in order, stopping after limit
// tasks (the set's size is what the qmaster wrote: a bound keeps a hostile
// "1-2000000000:1" from running forever).
func (ts TaskSet) Each(limit int, f func(task int)) {
	n := 0
	for _, r := range ts {
		for t := r.first; t <= r.last; t += r.step {
			if n >= limit {
				return
			}
			f(t)
			n++
		}
	}
}
