package policy

import "time"

// Order is the queue-order kind: in which order the placement policy
// considers the waiting jobs. The broker asks it once per cycle, before
// planning, and hands the Planner the queue in the order it returns.
//
// Contract: Order returns a permutation of 0..len(in.Queue)-1, the
// position of each queued job, first considered first; the same input
// gives the same order (no wall clock: the time is in.Now; no global
// randomness); jobs it does not tell apart keep their order in in.Queue
// (the broker's: QoS tier, then submission). An error means it broke:
// the broker then keeps its own order for the cycle and logs the error.
type Order interface {
	Name() string
	Order(in *OrderInput) ([]int, error)
}

// OrderInput is what an Order sees: the queue, the recent use of the
// sites by user, and each user's shares.
type OrderInput struct {
	Now   time.Time
	Queue []QueuedJob
	// Usage are the jobs that ran or run, for the users' recent use:
	// each from Start to End (zero End: still running, until Now).
	Usage []UsageRecord
	// Accounted is the use already summed up per user (the broker's
	// durable account of the jobs that ended), each as node-seconds
	// decayed to its At; a job is in Usage or in Accounted, never both.
	Accounted []AccountedUse
	// Shares are each user's shares of the machine (a user not listed
	// has DefaultShares, or 1 when that is 0).
	Shares        map[string]float64
	DefaultShares float64
	// HalfLife is how fast past use is forgotten: use HalfLife ago
	// weighs half as much as use now (0: DefaultHalfLife).
	HalfLife time.Duration
}

// DefaultHalfLife is the half-life of past use when none is configured
// (Slurm's PriorityDecayHalfLife default).
const DefaultHalfLife = 7 * 24 * time.Hour

// QueuedJob is one waiting job as an Order sees it.
type QueuedJob struct {
	ID     string
	User   string
	Submit time.Time
	Nodes  int
}

// UsageRecord is one job's use of the machine: Nodes nodes from Start to
// End (zero: still running).
type UsageRecord struct {
	User       string
	Nodes      int
	Start, End time.Time
}

// AccountedUse is a user's use summed up: NodeSeconds of decayed use as
// of At (it weighs NodeSeconds · 2^(-(Now - At)/HalfLife) at Now).
type AccountedUse struct {
	User        string
	NodeSeconds float64
	At          time.Time
}
