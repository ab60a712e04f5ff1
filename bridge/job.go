package bridge

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// JobState is a grid job's state in the broker.
type JobState string

// Grid job states. Completed, Failed, Timeout, Cancelled and Rejected are final.
const (
	Queued     JobState = "queued"     // in the global queue, waiting for the policy
	Submitting JobState = "submitting" // write-ahead intent: submission to the sites under way; Recover reconciles it after a crash
	Dispatched JobState = "dispatched" // submitted to its site(s), not yet running everywhere
	Running    JobState = "running"    // every component runs
	Completed  JobState = "completed"  // every component ended with exit code 0
	Failed     JobState = "failed"     // a component failed or was lost, and no retry is left
	Timeout    JobState = "timeout"    // a component was killed at its walltime (never retried: the same limit would kill it again)
	Cancelled  JobState = "cancelled"  // cancelled by the user
	Rejected   JobState = "rejected"   // the policy found it can never run
	// Reserved: an advance reservation was admitted for the job (Job.Resv);
	// it waits outside the queue until its window opens and the broker
	// binds it to a site (BindReservations).
	Reserved JobState = "reserved"
	// Held: the broker keeps the job out of the queue until its
	// dependencies (Request.After, AfterOK, AfterAny) are met (group.go).
	Held JobState = "held"
)

// Final reports whether the state can no longer change.
func (s JobState) Final() bool {
	return s == Completed || s == Failed || s == Timeout || s == Cancelled || s == Rejected
}

// Request is what a user asks the broker to run: a job file, resolved.
type Request struct {
	Name         string
	Command      []string
	Script       string
	Env          map[string]string
	WorkDir      string
	Nodes        int
	CoresPerNode int
	MemPerNode   int64         `json:",omitempty"` // bytes per node; 0 = the site's default
	GPUsPerNode  int           `json:",omitempty"` // GPUs per node; 0 = none
	Setup        string        `json:",omitempty"` // bash run before the command (module load ...)
	Estimate     time.Duration // the user's walltime estimate on the reference machine
	Inputs       []backends.StageFile
	SiteInputs   []backends.SiteFile `json:",omitempty"` // inputs that lie at a site (sitedata.go); Origin and DataSize follow from them
	Outputs      []string
	Origin       string   // submit site; "" = none
	DataSize     int64    // bytes
	Sites        []string // allowed sites; nil = all
	Prefer       []string
	NoSplit      bool
	Deadline     time.Time
	QoS          string
	// DeadlinePolicy is DeadlineStrict ("" means it too) or
	// DeadlineBestEffort: what happens when no site can meet Deadline
	// (bridge/deadline.go).
	DeadlinePolicy string `json:",omitempty"`
	// Worth is the benefit function (SPEC.md §4); nil: none. Needs Deadline.
	Worth *policy.Worth `json:",omitempty"`
	// Sim describes the job's real behaviour on simulated sites: run time on
	// the reference machine and exit code. Runtime 0 means "runs its estimate".
	Sim       backends.SimHints
	OutputDir string // local directory for fetched outputs ("" = none fetched); IDPlaceholder is replaced by the job id
	// Window asks for an advance reservation (SPEC.md §2): the job runs for
	// its estimate, on one site, somewhere inside the window. nil: an
	// ordinary job for the global queue.
	Window *Window `json:",omitempty"`

	// A group: the request is the parent of elements, each a grid job of
	// its own (group.go). At most one of Array, Sweep and Steps is set.
	// Array is an array spec ("1-100%10", jobrules.ParseArray): one
	// element per index, GRIDSUB_ARRAY_INDEX in its environment.
	Array string `json:",omitempty"`
	// Sweep: one element per combination of the parameters' values.
	Sweep *Sweep `json:",omitempty"`
	// Steps: a pipeline, one element per step; a step's After, AfterOK
	// and AfterAny may name earlier steps by their Name.
	Steps []Request `json:",omitempty"`

	// Dependencies, held by the broker (deps.go): the job stays Held until
	// every job of After has started (or ended), every job of AfterOK has
	// completed, and every job of AfterAny has ended. A dependency of
	// AfterOK that ends otherwise, or one of After that ends without
	// starting, cancels the job with the reason.
	After    []string `json:",omitempty"`
	AfterOK  []string `json:",omitempty"`
	AfterAny []string `json:",omitempty"`
	// SiteOptions are batch options by site name (partition or queue,
	// account); a site not listed uses its configured ones.
	SiteOptions map[string]SiteOptions `json:",omitempty"`
	// IdempotencyKey names this submission (the API's Idempotency-Key
	// header; the CLI sends one per submission and retries with it): the
	// daemon answers a second submission with the same key, within
	// MaxIdempotencyAge of the first, with the first's job instead of a new
	// one — across restarts, as the key is stored with the job. At most
	// MaxIdempotencyKey printable ASCII characters. Group elements and
	// pipeline steps are made by the broker and have none of their own.
	IdempotencyKey string `json:",omitempty"`
	// NoRetry: a failure of the job's own command is final even when the
	// broker's tiers would retry it. Workflow engines (Snakemake, Toil)
	// submitting through the sbatch and qsub front-ends set it: the engine
	// owns retries. A site's fault (a lost job) is still requeued.
	NoRetry bool `json:",omitempty"`
	// Owner is the user the job belongs to: the API sets it from who asks
	// (the socket's peer credentials, or the user of a bearer token) and
	// a client cannot choose it unless it is an administrator. "" is the
	// daemon's own user (jobs stored before owners existed read so).
	// Group elements and pipeline steps have their parent's.
	Owner string `json:",omitempty"`
}

// MaxIdempotencyKey bounds Request.IdempotencyKey.
const MaxIdempotencyKey = 128

// MaxIdempotencyAge is how long a submission's IdempotencyKey keeps
// answering with its job.
const MaxIdempotencyAge = 24 * time.Hour

// Sweep is a parameter sweep: the cartesian product of the parameters'
// values, the last parameter varying fastest; each element has every
// parameter in its environment. Limit bounds the elements unfinished at
// once (0: no limit).
type Sweep struct {
	Params []SweepParam
	Limit  int `json:",omitempty"`
}

// SweepParam is one parameter of a sweep: an environment variable and
// its values.
type SweepParam struct {
	Name   string
	Values []string
}

// SiteOptions are a request's batch options at one site.
type SiteOptions struct {
	Partition string `json:",omitempty"` // SLURM partition or PBS queue
	Account   string `json:",omitempty"`
}

// Window is an advance-reservation window: earliest start, latest end.
type Window struct {
	Earliest, Latest time.Time
}

// ResvState is where a job's advance reservation stands.
type ResvState string

// Reservation states. Released and Failed are final.
const (
	ResvAdmitted ResvState = "admitted" // passed the admission test; no site chosen yet (DRRM binds late)
	ResvBinding  ResvState = "binding"  // write-ahead intent: the native reservation is being created at Site
	ResvBound    ResvState = "bound"    // the native reservation exists at Site; the job runs inside it
	ResvReleased ResvState = "released" // the job ended; the native reservation was deleted
	ResvFailed   ResvState = "failed"   // refused, dropped after a site failure, or could not be bound
)

// Reservation is a job's advance reservation as the broker tracks it.
type Reservation struct {
	Earliest, Latest time.Time
	State            ResvState
	Site             string          // the bound site ("" until binding)
	Start            time.Time       // the bound start: Earliest, or later within the slack
	Name             string          // the native reservation's name, tagged with the grid id
	Native           backends.ResvID // the site's id for it ("" until created)
	Preempted        []string        // grid jobs restarted to make room at binding
	Cost             float64         // preemption cost: seconds of work the preempted jobs lose
	Reason           string          // why it was placed where it is, or why it failed
	// Waiting: bound (State Binding), the native reservation not created
	// yet: the binding preempted jobs and waits until the site shows their
	// nodes free, or the site refused the creation and is asked again
	// while the window allows (reserve_wait.go).
	Waiting bool `json:",omitempty"`
}

// ResvName is the native reservation name of a job: tagged with the grid id,
// so that after a crash the broker finds the reservation it may have made.
func ResvName(id string) string { return id + "-r" }

// RemoteTag is the tag a job's remote jobs carry for an attempt: the grid job
// id and the attempt number ("g000042-a2"). Reconciliation looks it up at the
// sites, so a submission whose outcome a crash hid is found, not repeated.
func RemoteTag(id string, attempt int) string { return id + "-a" + strconv.Itoa(attempt) }

// Component is the share of a job placed on one site.
type Component struct {
	Site     string
	Nodes    int
	RemoteID backends.JobID // "" while the submission is only intended
	State    backends.State
	ExitCode int
	Reason   string
	Start    time.Time
	End      time.Time
	Replica  bool // one copy of a replicated job (Sabin multi-queue); not a co-allocated share
	// QoS-tier copies (copies.go): which copy of the job this share
	// belongs to (0 = the primary), its role, the remote tag it carries
	// when it is not RemoteTag(job, attempt), and whether it is a passive
	// backup (planned, submitted only if the primary fails).
	Copy    int    `json:",omitempty"`
	Role    string `json:",omitempty"`
	Tag     string `json:",omitempty"`
	Passive bool   `json:",omitempty"`
	// Due: an active backup held (Passive) until this time, its latest
	// start; zero for any other component.
	Due time.Time `json:",omitzero"`
}

// Event is one entry of a job's history.
type Event struct {
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	Site string    `json:"site,omitempty"`
	Msg  string    `json:"msg"`
}

// Job is a grid job as the broker tracks it.
type Job struct {
	ID       string
	Req      Request
	State    JobState
	Submit   time.Time
	Start    time.Time // when every component ran
	End      time.Time
	Attempts int
	// Intent is when the current attempt's dispatch intent was recorded
	// (State Submitting); reconciliation gives a submission in flight
	// until Intent + Options.SubmitGrace to appear at its site.
	Intent    time.Time `json:",omitzero"`
	Comps     []Component
	Predicted policy.Option   // the chosen placement as predicted at dispatch (or the current reservation)
	Beaten    []policy.Option // alternatives it beat
	SiteNames []string        // site names indexing Predicted/Beaten parts
	Reason    string          // why it failed or was rejected
	ExitCode  int
	// SiteFault says a Failed job failed because of its site (a node
	// failure, a launch failure, a job the site lost), not because its own
	// command failed or ran out of time; only such a failure counts
	// against the site's trust (store.SiteHealth's Failed).
	SiteFault bool     `json:",omitempty"`
	Outputs   []string // local paths of fetched outputs
	// FetchErrors says what could not be brought back (the job's own state
	// is not changed by it).
	FetchErrors []string
	Events      []Event
	// Resv is the job's advance reservation; nil for an ordinary job.
	Resv *Reservation `json:",omitempty"`
	// Parent is the group this job is an element of ("" for none), and
	// Index its array index, sweep position or step number.
	Parent string `json:",omitempty"`
	Index  int    `json:",omitempty"`
	// Group is set on the parent of an array, sweep or pipeline.
	Group *Group `json:",omitempty"`
	// Waiting says what a Held job waits for.
	Waiting string `json:",omitempty"`
	// UserHold: the user held the job (Broker.Hold); it stays Held,
	// whatever its dependencies, until Broker.Release.
	UserHold bool `json:",omitempty"`
	// Refused are the sites that refused one of the job's submissions
	// for good (the batch system said no: resources, partition, limits),
	// with why; the job is never placed there again (refused.go).
	Refused []Refusal `json:",omitempty"`
	// Tier is the dependability tier the job got at submission (TierHigh,
	// TierLow, TierNone; "" when the broker runs without tiers) and
	// TierWhy says why. Neither changes afterwards (tiers.go).
	Tier    string `json:",omitempty"`
	TierWhy string `json:",omitempty"`
	// Withdrawn are the copies of a QoS-tiered job that lost (or were
	// lost): kept for the record; only the winner's outputs are fetched.
	Withdrawn []Component `json:",omitempty"`
	// Avoid are sites where an attempt of a retried job failed: the next
	// placement avoids them while another site can take the job.
	Avoid []string `json:",omitempty"`
	// DeadlineMissed: the job was reported as unable to meet its deadline
	// (bridge/deadline.go), so it is reported once.
	DeadlineMissed bool `json:",omitempty"`
	// Moves counts the times the job was moved while it waited at a site
	// (remap.go), and Moving is a move under way: the write-ahead intent
	// Recover resolves after a crash. Nil when no move is under way.
	Moves  int   `json:",omitempty"`
	Moving *Move `json:",omitempty"`
	// Abandoned are the tags ("TAG@SITE") of intended submissions not
	// found at their site after a restart once Options.SubmitGrace was
	// over: a remote job that still appears under one is cancelled
	// (duties.go).
	Abandoned []string `json:",omitempty"`

	touched bool     // changed in the cycle being processed
	won     bool     // a copy won; the copy-won event is recorded (copies.go)
	final   *outcome // how it ends, once its outputs are fetched
	charged bool     // its run is in its owner's accounted use (ledger.chargeOf)
}

// Sites lists the sites of the job's placement ("Beijing:32+Shanghai:16").
func (j *Job) Sites() string {
	s := ""
	for i, c := range j.Comps {
		if i > 0 {
			s += "+"
		}
		s += fmt.Sprintf("%s:%d", c.Site, c.Nodes)
	}
	return s
}

// Clone returns a deep copy safe to hand out.
func (j *Job) Clone() *Job {
	c := *j
	c.Req = j.Req.clone()
	c.Comps = slices.Clone(j.Comps)
	c.Withdrawn = slices.Clone(j.Withdrawn)
	c.Avoid = slices.Clone(j.Avoid)
	c.Abandoned = slices.Clone(j.Abandoned)
	c.Events = slices.Clone(j.Events)
	c.Predicted = cloneOption(j.Predicted)
	c.Beaten = make([]policy.Option, len(j.Beaten))
	for i, o := range j.Beaten {
		c.Beaten[i] = cloneOption(o)
	}
	if j.Beaten == nil {
		c.Beaten = nil
	}
	c.SiteNames = slices.Clone(j.SiteNames)
	c.Outputs = slices.Clone(j.Outputs)
	c.FetchErrors = slices.Clone(j.FetchErrors)
	c.Refused = slices.Clone(j.Refused)
	if j.Moving != nil {
		m := *j.Moving
		m.From = slices.Clone(m.From)
		m.To = slices.Clone(m.To)
		c.Moving = &m
	}
	if j.Resv != nil {
		r := *j.Resv
		r.Preempted = slices.Clone(r.Preempted)
		c.Resv = &r
	}
	if j.Group != nil {
		g := *j.Group
		g.Counts = maps.Clone(g.Counts)
		c.Group = &g
	}
	return &c
}

func cloneOption(o policy.Option) policy.Option {
	o.Parts = slices.Clone(o.Parts)
	return o
}

// clone copies the request with its own slices and map.
func (r Request) clone() Request {
	r.Command = slices.Clone(r.Command)
	r.Env = maps.Clone(r.Env)
	r.Inputs = slices.Clone(r.Inputs)
	r.SiteInputs = slices.Clone(r.SiteInputs)
	r.Outputs = slices.Clone(r.Outputs)
	r.Sites = slices.Clone(r.Sites)
	r.Prefer = slices.Clone(r.Prefer)
	r.SiteOptions = maps.Clone(r.SiteOptions)
	if r.Window != nil {
		w := *r.Window
		r.Window = &w
	}
	if r.Sweep != nil {
		sw := Sweep{Limit: r.Sweep.Limit, Params: make([]SweepParam, len(r.Sweep.Params))}
		for i, p := range r.Sweep.Params {
			sw.Params[i] = SweepParam{p.Name, slices.Clone(p.Values)}
		}
		r.Sweep = &sw
	}
	if r.Steps != nil {
		steps := make([]Request, len(r.Steps))
		for i, st := range r.Steps {
			steps[i] = st.clone()
		}
		r.Steps = steps
	}
	r.After = slices.Clone(r.After)
	r.AfterOK = slices.Clone(r.AfterOK)
	r.AfterAny = slices.Clone(r.AfterAny)
	if r.Worth != nil {
		w := *r.Worth
		r.Worth = &w
	}
	return r
}
