package backends

import (
	"context"
	"regexp"
	"strconv"
)

// ArraySubmitter is an optional capability: submit the elements of grid
// arrays bound for one site as native job arrays of its batch system
// (`sbatch --array`, `qsub -J`) instead of one batch job each.
//
// Contract: SubmitArrays has BatchSubmitter.SubmitBatch's contract (one
// result per spec, in order; each result means what Submit's would for
// that spec alone; ErrOutcomeUnknown when the request may have reached the
// site). Specs that can share a native array (ArrayElement tags with one
// parent and attempt, and the same resources) go as one array per group,
// within the site's largest array; the rest are submitted as SubmitBatch
// would. Each element keeps its own job directory and exit-code file, its
// remote id names the element (SLURM `12_5`), Status and Cancel take it
// like any job id, and FindByGridID finds an element by its own tag.
type ArraySubmitter interface {
	SubmitArrays(ctx context.Context, specs []*JobSpec) []SubmitResult
	// NativeArrays reports whether the site is configured to submit
	// arrays natively (a per-site opt-in); false: SubmitArrays is not used.
	NativeArrays() bool
}

// AsArraySubmitter returns b as an ArraySubmitter when it has that
// capability and its site opted in.
func AsArraySubmitter(b Backend) (ArraySubmitter, bool) {
	s, ok := b.(ArraySubmitter)
	return s, ok && s.NativeArrays()
}

var elementTagRe = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*)_([0-9]{1,7})-a([0-9]{1,9})$`)

// ArrayElement reads the tag of a grid array element's attempt
// (`<parent>_<index>-a<attempt>`, the broker's RemoteTag of an element):
// its parent, index and attempt. ok is false for any other tag.
func ArrayElement(tag string) (parent string, index, attempt int, ok bool) {
	m := elementTagRe.FindStringSubmatch(tag)
	if m == nil {
		return "", 0, 0, false
	}
	index, _ = strconv.Atoi(m[2])
	attempt, _ = strconv.Atoi(m[3])
	return m[1], index, attempt, true
}

// ElementTag is the tag ArrayElement reads.
func ElementTag(parent string, index, attempt int) string {
	return parent + "_" + strconv.Itoa(index) + "-a" + strconv.Itoa(attempt)
}
