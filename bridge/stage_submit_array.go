package bridge

import (
	"context"

	"github.com/gridsub/gridsub/backends"
)

// siteSubmitBatch is how submitAll hands one site's specs over in one call:
// as native arrays where the site opted in (backends.ArraySubmitter; the
// elements of a grid array become one sbatch --array), else as one batch
// (backends.BatchSubmitter). Both keep SubmitBatch's contract, so
// submitAll settles the results the same way. ok is false when the site
// has neither capability.
func siteSubmitBatch(b backends.Backend) (func(context.Context, []*backends.JobSpec) []backends.SubmitResult, bool) {
	if as, ok := backends.AsArraySubmitter(b); ok {
		return as.SubmitArrays, true
	}
	if bs, ok := backends.AsBatchSubmitter(b); ok {
		return bs.SubmitBatch, true
	}
	return nil, false
}
