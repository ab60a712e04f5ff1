package backends

import (
	"context"
	"errors"
)

// SubmitResult is the outcome of one submission of a batch: ID when the
// site accepted the job, else Err (never both).
type SubmitResult struct {
	ID  JobID
	Err error
}

// BatchSubmitter is an optional capability: submit many jobs to the site in
// one remote command instead of one per job.
//
// Contract: SubmitBatch returns exactly one result per spec, in the order of
// specs. Each result has the meaning Backend.Submit's return would have had
// for that spec alone: an ID (exactly one remote job tagged with its GridID
// was created), or an error for that spec only — job k's refusal
// (ErrRejected, ErrInvalidSpec, a staging error) says nothing about jobs ≠ k.
// A job whose request may have reached the batch system but whose answer
// was lost (the session was cut) has an error wrapping both ErrUnavailable
// and ErrOutcomeUnknown: the caller must look its tag up (Finder) before
// submitting it again. Inputs are staged before each job is submitted, as
// Submit does. When ctx ends, the jobs not yet sent fail with ctx's error.
type BatchSubmitter interface {
	SubmitBatch(ctx context.Context, specs []*JobSpec) []SubmitResult
}

// AsBatchSubmitter returns b as a BatchSubmitter when it has that capability.
func AsBatchSubmitter(b Backend) (BatchSubmitter, bool) {
	s, ok := b.(BatchSubmitter)
	return s, ok && CapabilitiesOf(b).Batch
}

// OutcomeUnknown reports whether err says a submission may have reached
// the site (ErrOutcomeUnknown): its tag must be looked up before the job is
// submitted again.
func OutcomeUnknown(err error) bool { return errors.Is(err, ErrOutcomeUnknown) }
