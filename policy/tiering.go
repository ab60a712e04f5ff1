package policy

import "time"

// Tier is a job's dependability tier (SPEC.md §5).
type Tier string

// Tiers: high runs two copies at once (replication), low a primary and a
// backup (primary–backup), none one copy retried after a failure.
const (
	TierHigh Tier = "high"
	TierLow  Tier = "low"
	TierNone Tier = "none"
)

// TierDemand is what the tier rule reads of a request.
type TierDemand struct {
	Asked    Tier          // an explicit tier from the job file; "" = decide
	Deadline time.Time     // zero = none
	Estimate time.Duration // on the reference machine
	Sites    []string      // allowed sites by name; nil = all
	Submit   time.Time     // t_a
	Lambda   float64       // the configured λ; 0 = the policy's default
}

// CopyInput is what a copy plan reads: the cycle's snapshot, the job, the
// planner's decision for it, and the reliability costs of the sites.
type CopyInput struct {
	Snapshot *Snapshot
	Job      *Job
	Decision Decision
	// RC[i] is the reliability cost, (1 − r)·ct (lower is better), of
	// running the whole job on Snapshot.Sites[i] for ct = its predicted run
	// plus transfer there (Snapshot.Runtime + Transfer of the one part
	// {i, Job.Width}), as the availability model predicts it now; nil when
	// no model is set.
	RC []float64
}

// BackupInput is what the backup rule of a low-tier job reads.
type BackupInput struct {
	Snapshot *Snapshot
	Job      *Job // Job.Deadline zero = none
	Now      time.Time
	Primary  Option // the primary's placement as planned
	Backup   []Part
}

// Backup says when a low-tier job's backup runs.
type Backup struct {
	Passive bool      // submitted only if the primary fails
	Due     time.Time // an active backup's submission time
	Why     string
}

// Tiering is the QoS rule (SPEC.md §5): which tier a job gets, where its
// copies go, and when a backup starts.
//
// Contract: pure and deterministic; must not modify its inputs. Tier
// always answers, with why; it sees the configured sites (Name and H: at
// submission nothing else is known). Copies returns the first copy's parts
// (the planner's choice, or a better one) and the second's, nil when no
// other placement holds the job; the second copy never uses a Down site,
// a site the job may not use (Job.Allowed), or a site of the first. Backup
// is Passive or has a Due time, and says why.
type Tiering interface {
	Name() string
	Tier(d *TierDemand, sites []Site) (Tier, string)
	Copies(in *CopyInput) (first, second []Part)
	Backup(in *BackupInput) Backup
}
