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

// Grid job states. Completed, Failed, Cancelled and Rejected are final.
const (
	Queued     JobState = "queued"     // in the global queue, waiting for the policy
	Submitting JobState = "submitting" // write-ahead intent: submission to the sites under way; Recover reconciles it after a crash
	Dispatched JobState = "dispatched" // submitted to its site(s), not yet running everywhere
	Running    JobState = "running"    // every component runs
	Completed  JobState = "completed"  // every component ended with exit code 0
	Failed     JobState = "failed"     // a component failed, timed out or was lost, and no retry is left
	Cancelled  JobState = "cancelled"  // cancelled by the user
	Rejected   JobState = "rejected"   // the policy found it can never run
	// Reserved: an advance reservation was admitted for the job (Job.Resv);
	// it waits outside the queue until its window opens and the broker
	// binds it to a site (BindReservations).
	Reserved JobState = "reserved"
)

// Final reports whether the state can no longer change.
func (s JobState) Final() bool {
	return s == Completed || s == Failed || s == Cancelled || s == Rejected
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
	Estimate     time.Duration // the user's walltime estimate on the reference machine
	Inputs       []backends.StageFile
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
	ID        string
	Req       Request
	State     JobState
	Submit    time.Time
	Start     time.Time // when every component ran
	End       time.Time
	Attempts  int
	Comps     []Component
	Predicted policy.Option   // the chosen placement as predicted at dispatch (or the current reservation)
	Beaten    []policy.Option // alternatives it beat
	SiteNames []string        // site names indexing Predicted/Beaten parts
	Reason    string          // why it failed or was rejected
	ExitCode  int
	Outputs   []string // local paths of fetched outputs
	// FetchErrors says what could not be brought back (the job's own state
	// is not changed by it).
	FetchErrors []string
	Events      []Event
	// Resv is the job's advance reservation; nil for an ordinary job.
	Resv *Reservation `json:",omitempty"`
	// DeadlineMissed: the job was reported as unable to meet its deadline
	// (bridge/deadline.go), so it is reported once.
	DeadlineMissed bool `json:",omitempty"`

	touched bool     // changed in the cycle being processed
	final   *outcome // how it ends, once its outputs are fetched
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
	if j.Resv != nil {
		r := *j.Resv
		r.Preempted = slices.Clone(r.Preempted)
		c.Resv = &r
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
	r.Outputs = slices.Clone(r.Outputs)
	r.Sites = slices.Clone(r.Sites)
	r.Prefer = slices.Clone(r.Prefer)
	if r.Window != nil {
		w := *r.Window
		r.Window = &w
	}
	if r.Worth != nil {
		w := *r.Worth
		r.Worth = &w
	}
	return r
}
