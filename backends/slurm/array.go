package slurm

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

var _ sshbatch.Arrayer = (*dialect)(nil)

// MaxArraySize reads MaxArraySize from `scontrol show config` once (SLURM's
// default is 1001: indices 0..1000). A site whose configuration does not
// say is taken to have the default.
func (d *dialect) MaxArraySize(ctx context.Context, x *sshbatch.Exec) (int, error) {
	d.mu.Lock()
	n := d.maxArray
	d.mu.Unlock()
	if n > 0 {
		return n, nil
	}
	r, err := x.Output(ctx, ConfigArgv())
	if err != nil {
		return 0, err
	}
	n = ParseMaxArraySize(r.Stdout)
	d.mu.Lock()
	d.maxArray = n
	d.mu.Unlock()
	return n, nil
}

// DefaultMaxArraySize is SLURM's MaxArraySize when slurm.conf sets none.
const DefaultMaxArraySize = 1001

// ParseMaxArraySize reads MaxArraySize from `scontrol show config` output
// (DefaultMaxArraySize when absent or unreadable; 0 when the site set it
// to 0 or 1, which allows no array of two elements).
func ParseMaxArraySize(out []byte) int {
	v, ok := configValue(out, "MaxArraySize")
	if !ok {
		return DefaultMaxArraySize
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return DefaultMaxArraySize
	}
	if n < 2 {
		return 0
	}
	return n
}

// ArrayList is sbatch's --array value for indices (ascending, distinct):
// runs of consecutive indices as ranges ("0-99,150,200-210").
func ArrayList(indices []int) string {
	var sb strings.Builder
	for i := 0; i < len(indices); {
		j := i
		for j+1 < len(indices) && indices[j+1] == indices[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(indices[i]))
		if j > i {
			sb.WriteString("-" + strconv.Itoa(indices[j]))
		}
		i = j + 1
	}
	return sb.String()
}

// ArraySbatchArgv is the one sbatch of a native array: spec's options
// (SbatchArgs) tagged with the array's tag instead of an element's, at
// most spec.ArrayLimit elements running at once (`--array=...%K`), run
// from base (the directory holding the job directories), the driver read
// from stdin; each element's output goes to its own job directory (the
// driver redirects it), so the array's own is discarded.
func ArraySbatchArgv(spec *backends.JobSpec, partition, parent string, attempt int, indices []int, base string) []string {
	sp := *spec
	if sp.Name == "" {
		sp.Name = parent
	}
	list := ArrayList(indices)
	if spec.ArrayLimit > 0 {
		list += "%" + strconv.Itoa(spec.ArrayLimit)
	}
	a := []string{"sbatch", "--chdir=" + base, "--array=" + list}
	for _, w := range SbatchArgs(&sp, partition) {
		switch {
		case strings.HasPrefix(w, "--comment="):
			w = "--comment=" + sshbatch.ArrayTag(parent, attempt)
		case strings.HasPrefix(w, "--output="):
			w = "--output=/dev/null"
		case strings.HasPrefix(w, "--error="):
			w = "--error=/dev/null"
		}
		a = append(a, w)
	}
	return a
}

// ArrayCommand is ArraySbatchArgv with the driver on stdin.
func (d *dialect) ArrayCommand(_ context.Context, _ *sshbatch.Exec, spec *backends.JobSpec, parent string, attempt int, indices []int, base string) (sshbatch.Command, error) {
	if len(indices) == 0 {
		return sshbatch.Command{}, fmt.Errorf("%w: an array of no elements", backends.ErrInvalidSpec)
	}
	sp := *spec
	if sp.Account == "" {
		sp.Account = d.cfg.Account
	}
	return sshbatch.Command{Argv: ArraySbatchArgv(&sp, d.cfg.Partition, parent, attempt, indices, base),
		Stdin: sshbatch.ArrayDriver(parent, attempt, "SLURM_ARRAY_TASK_ID", "", elementAfter)}, nil
}

// ParseArraySubmitted reads sbatch --parsable's answer: the array's job id.
func (d *dialect) ParseArraySubmitted(stdout []byte) (string, error) {
	id, _, err := ParseSbatch(stdout)
	if err == nil && strings.Contains(string(id), "_") {
		err = fmt.Errorf("%w: sbatch answered %q for an array", backends.ErrBadOutput, id)
	}
	return string(id), err
}

// ArrayRuns: sbatch --array takes any index list (ArrayList), so all
// indices go as one array.
func (d *dialect) ArrayRuns(indices []int) [][]int { return [][]int{indices} }

// ElementID is SLURM's name of an array element: "<array>_<index>".
func (d *dialect) ElementID(array string, index int) backends.JobID {
	return backends.JobID(array + "_" + strconv.Itoa(index))
}

// Wrapper is the element's job script: the shared wrapper, as for a job.
func (d *dialect) Wrapper(spec *backends.JobSpec) string { return Wrapper(spec) }

// elementTag is the grid tag of the element a queue record names: its
// array's tag (the comment) and its index (the id's "_<index>").
func elementTag(id, comment string) string {
	parent, attempt, ok := sshbatch.FromArrayTag(comment)
	if !ok {
		return ""
	}
	_, ix, found := strings.Cut(id, "_")
	n, err := strconv.Atoi(ix)
	if !found || err != nil {
		return ""
	}
	return backends.ElementTag(parent, n, attempt)
}

var elementIDRe = regexp.MustCompile(`^([0-9]+)_([0-9]+)$`)

// jobCompPattern is the grep -E pattern of the jobcomp lines of ids: a
// job's by its JobId, an array element's by its ArrayJobId and
// ArrayTaskId (its JobId is a raw id of its own).
func jobCompPattern(ids []backends.JobID) string {
	var plain, elems []string
	for _, id := range ids {
		if m := elementIDRe.FindStringSubmatch(string(id)); m != nil {
			elems = append(elems, m[1]+" ArrayTaskId="+m[2])
			continue
		}
		plain = append(plain, regexp.QuoteMeta(string(id)))
	}
	var alt []string
	if len(plain) > 0 {
		alt = append(alt, "^JobId=("+strings.Join(plain, "|")+") ")
	}
	if len(elems) > 0 {
		alt = append(alt, " ArrayJobId=("+strings.Join(elems, "|")+") ")
	}
	return strings.Join(alt, "|")
}
