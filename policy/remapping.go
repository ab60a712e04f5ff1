package policy

import "time"

// Waiting is a job dispatched to a site that still waits in its queue:
// where it waits, and what the batch system predicts for it.
type Waiting struct {
	Job   Job
	Parts []Part // where it waits now
	// Estimates[k] is the batch system's own predicted start of Parts[k]
	// (zero: it gave none).
	Estimates []time.Time
}

// RemapInput is one remapping pass's view: the cycle's snapshot, the jobs
// that may be moved (oldest dispatch first), the nodes free now per site
// once the cycle's plan is dispatched, and the least gain worth a move.
type RemapInput struct {
	Now      time.Time
	Snapshot *Snapshot
	Waiting  []Waiting
	Free     []int
	MinGain  time.Duration
}

// Move is a move a remapping pass decides.
type Move struct {
	Job       string
	To        Option    // the target placement, starting now
	FromStart time.Time // the predicted start where the job waits
	Gain      time.Duration
}

// Remap decides which waiting jobs move to a better site (repetitive
// mapping, SPEC.md §4).
//
// Contract: pure and deterministic; must not modify its input. The moves'
// target parts together never exceed in.Free of any site; a job moves at
// most once per pass and whole (every part); a move gains at least MinGain.
type Remap interface {
	Name() string
	Moves(in *RemapInput) ([]Move, error)
}
