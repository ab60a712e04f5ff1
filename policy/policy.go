package policy

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Site is one site as a policy sees it. Sites are addressed by their index in
// Snapshot.Sites.
type Site struct {
	Name  string
	Nodes int     // total schedulable nodes
	Free  int     // nodes free now
	H     float64 // heterogeneity factor: run-time multiplier, 1 = reference machine, smaller = faster
	// Busy holds, for each running job (or reservation) at the site, the nodes
	// it holds and the time its estimate runs out. Free + sum(Busy.Nodes) = Nodes.
	Busy []Hold
	// Trust in (0,1]; 0 means unset (treated as 1).
	Trust float64
	// Down marks a site that cannot take work now (unreachable, paused).
	Down bool
	// Shape is what one node of the site has (shape.go); the zero value
	// means "not known" for cores and memory and "no GPUs".
	Shape NodeShape
}

// Hold is a block of nodes held until an estimated time.
type Hold struct {
	Nodes int
	Until time.Time
}

// Job is one queued grid job.
type Job struct {
	ID       string
	Width    int           // nodes, possibly split across sites
	Estimate time.Duration // the user's estimate on the reference machine (T_origin)
	Submit   time.Time
	Origin   int   // index of the submit site; -1 when the job comes from outside every site
	DataSize int64 // bytes to move from the origin to the executing sites
	// Allowed restricts the sites (indices) the job may use; nil means all.
	Allowed []int
	// Preferred sites (indices) win ties.
	Preferred []int
	// Deadline is the latest acceptable end; zero means none.
	Deadline time.Time
	// NoSplit forbids co-allocation across sites.
	NoSplit bool
	// PerNode is what the job asks of each node (zero fields: nothing
	// asked); a site whose Shape lacks it is never chosen (shape.go).
	PerNode NodeShape
	// Worth is the benefit function (SPEC.md §4, policy/benefit); the zero
	// value is none.
	Worth Worth
	// BestEffort: a deadline that cannot be met is a warning, not a
	// reason to drop the job (scheduling.deadline_policy: best-effort).
	BestEffort bool
}

// Link is the network path from one site to another.
type Link struct {
	SecPerByte float64       // inverse bandwidth b_ij
	Latency    time.Duration // l_ij
}

// Snapshot is everything a policy may read in one cycle.
type Snapshot struct {
	Now   time.Time
	Sites []Site
	// Queue is the global queue in FCFS order (by submit time, then arrival).
	Queue []Job
	// Links[i][j] is the path from site i to site j; nil means free transfer.
	Links [][]Link
	// Uplinks[j] is the path from the submitting machine to site j, for jobs
	// that come from no site (Job.Origin = -1), as measured by the transfers
	// made to that site; nil or a zero Link means free (not measured yet).
	Uplinks []Link
	// MultiSite is the multi-site factor p >= 1 applied to every job that spans
	// more than one site (SPEC.md §1 equation 3).
	MultiSite float64
	// Quiet tells the policy that nobody reads the explanations and
	// predictions of a plan (a trace replay): it may leave Plan.Pending
	// empty instead of explaining every waiting job on every cycle, may
	// leave out Reserve decisions (a prediction, not an action), and may
	// give Start decisions without their reasons and Beaten options. The
	// decisions that act (Start, Replicate, Reject) are exactly those of
	// the same snapshot without Quiet: the same jobs, actions, chosen
	// options and Backfilled flags, in the same order, and a Reject keeps
	// its reasons (a rejected job's only account of why).
	Quiet bool
}

// Code says what kind of answer a Status is.
type Code int

// Status codes, after the Kubernetes scheduler framework.
const (
	Success       Code = iota // the job gets what it asked for
	Unschedulable             // not now: wait and try again
	Unresolvable              // never: reject the job
	Wait                      // a reservation is held for the job
	Error                     // something broke inside the policy
)

var codeNames = [...]string{"success", "unschedulable", "unresolvable", "wait", "error"}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", int(c))
}

// Status explains one decision: its code, the reasons, and which stage said so.
type Status struct {
	Code    Code
	Reasons []string
	Plugin  string
}

// NewStatus builds a Status.
func NewStatus(code Code, plugin string, reasons ...string) Status {
	return Status{Code: code, Reasons: reasons, Plugin: plugin}
}

func (s Status) String() string {
	if len(s.Reasons) == 0 {
		return s.Code.String()
	}
	return s.Code.String() + ": " + strings.Join(s.Reasons, "; ")
}

// Action is what a decision asks the broker to do.
type Action int

// Actions.
const (
	Start     Action = iota + 1 // dispatch now to Parts
	Reserve                     // hold Parts from PredStart on; the job waits
	Reject                      // the job can never run: fail it with Status' reasons
	Replicate                   // dispatch copies to every Part's site; first to start wins
)

var actionNames = [...]string{"", "start", "reserve", "reject", "replicate"}

func (a Action) String() string {
	if int(a) < len(actionNames) && a > 0 {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Part is the share of a job's width placed on one site.
type Part struct {
	Site  int // index into Snapshot.Sites
	Nodes int
}

// Option is one candidate placement a policy evaluated.
type Option struct {
	Parts     []Part
	Start     time.Time     // predicted start
	Runtime   time.Duration // predicted run time at these sites (equations 1–3, transfer excluded)
	Transfer  time.Duration // predicted transfer time before the start
	Immediate bool          // all parts have free nodes now
}

// End is the predicted completion time: start, transfer, run.
func (o Option) End() time.Time { return o.Start.Add(o.Transfer + o.Runtime) }

// Decision is the policy's answer for one job.
type Decision struct {
	Job        string
	Action     Action
	Chosen     Option
	Backfilled bool     // started ahead of an earlier job that waits
	Beaten     []Option // the best alternatives the chosen option beat, best first (a few at most)
	Status     Status
}

// Plan is the policy's answer for one cycle. Jobs of the queue that have no
// decision simply keep waiting.
type Plan struct {
	Decisions []Decision
	// Pending optionally explains the jobs left waiting without a decision
	// (blocked behind a reservation, or nowhere to run while sites are down).
	Pending []Pending
}

// Pending is a queued job a Plan leaves waiting, and why.
type Pending struct {
	Job    string
	Status Status
}

// Planner is a policy.
//
// Contract: Plan must not modify the Snapshot, must not block on I/O, and must
// be deterministic: equal Snapshots give equal Plans. It returns an error only
// when something broke; a job that cannot run is a Reject decision with a
// reason, never an error. The sum of the Start parts it plans for a site never
// exceeds that site's free nodes.
type Planner interface {
	Name() string
	Plan(ctx context.Context, s *Snapshot) (*Plan, error)
}

// Incremental is implemented by a Planner that can also plan one grid pass
// after pass from the changes its caller reports, instead of from a fresh
// Snapshot each time: a trace replay runs the sites itself and knows every
// change, so it need not rebuild (nor the planner re-read) the whole grid
// for every pass.
type Incremental interface {
	Planner
	// NewSession starts a session on s (its Now, queue and holds are the
	// starting point; s is copied, not kept). It fails on a snapshot Plan
	// would refuse.
	NewSession(s *Snapshot) (Session, error)
}

// Session is a sequence of Quiet passes over one grid (Snapshot.Quiet).
//
// Contract: each Plan returns exactly what the Planner's Plan returns for
// the snapshot the reported changes describe (the starting snapshot, with
// every Submit appended to the queue, every Hold and Release applied to the
// sites, the jobs earlier plans started or rejected taken out of the queue,
// and Now set), Quiet. A Session is not safe for concurrent use.
type Session interface {
	// Submit appends j to the queue: it was submitted after every job
	// queued before it. The session keeps j's slices: do not modify them.
	Submit(j Job)
	// Hold records nodes held at site until until: a job started there. A
	// plan's Start decisions are not held until the caller says so (it
	// knows until when the site holds them).
	Hold(site, nodes int, until time.Time) error
	// Release ends a hold that Hold recorded (its job ended).
	Release(site, nodes int, until time.Time) error
	// Plan makes one pass at now (never earlier than the last). The jobs it
	// starts or rejects leave the queue. The plan is the session's memory,
	// valid until the next Plan: read it, do not keep it.
	Plan(ctx context.Context, now time.Time) (*Plan, error)
}
