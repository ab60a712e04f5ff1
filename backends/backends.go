package backends

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"sync"
	"time"
)

// Sentinel errors shared by every backend. Implementations wrap them with %w
// and add the detail; callers test with errors.Is.
var (
	// ErrUnknownJob: the site does not know the job id (never submitted, or
	// purged from every record the backend can read).
	ErrUnknownJob = errors.New("unknown job")
	// ErrInvalidSpec: the JobSpec cannot be run as given (no command, zero
	// nodes, more nodes than the site has, a path escaping the job directory).
	// Not retryable.
	ErrInvalidSpec = errors.New("invalid job spec")
	// ErrUnavailable: the site cannot be reached or refused service right now
	// (network, sshd limits, controller down). Retryable.
	ErrUnavailable = errors.New("site unavailable")
	// ErrRejected: the batch system refused the request (bad partition, limits,
	// reservation busy). Not retryable without changing the request.
	ErrRejected = errors.New("rejected by batch system")
	// ErrBadOutput: a batch command printed something the parser cannot read.
	// The raw text is in the wrapping error.
	ErrBadOutput = errors.New("unparsable batch system output")
	// ErrUnsupported: the backend lacks the capability (e.g. reservations).
	ErrUnsupported = errors.New("not supported by this backend")
	// ErrOutcomeUnknown: a submission may or may not have reached the batch
	// system (the session was cut after the request was sent). Always
	// wrapped together with ErrUnavailable. The caller must look the job's
	// tag up (Finder) before submitting it again, never resubmit blindly.
	ErrOutcomeUnknown = errors.New("submission outcome unknown")
)

// batchWordRe is a partition, queue or account name: empty, or a word no
// batch system or shell reads anything into.
var batchWordRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._@-]{0,63})?$`) })

// Retryable reports whether err is worth retrying unchanged later.
func Retryable(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// JobID is a site-local batch job id ("1234" for SLURM, "12.server" for PBS).
type JobID string

// State is a job's state as gridsub sees it, mapped from the batch system's.
type State int

// Job states. Only Completed, Failed, Cancelled, Timeout and Lost are final.
const (
	StateUnknown   State = iota // not (yet) known
	StatePending                // queued at the site
	StateRunning                // running (or completing)
	StateCompleted              // ended with exit code 0
	StateFailed                 // ended with a non-zero exit code or a node failure
	StateCancelled              // cancelled by gridsub or an operator
	StateTimeout                // killed at its walltime
	StateLost                   // the site has no record of it any more and no exit-code file
)

var stateNames = [...]string{"unknown", "pending", "running", "completed", "failed", "cancelled", "timeout", "lost"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// Final reports whether the state can no longer change.
func (s State) Final() bool { return s >= StateCompleted }

// ParseState is the inverse of String.
func ParseState(v string) (State, error) {
	for i, n := range stateNames {
		if n == v {
			return State(i), nil
		}
	}
	return StateUnknown, fmt.Errorf("unknown state %q (valid: %v)", v, stateNames)
}

// StageFile is one file to copy into the job directory before the job runs.
type StageFile struct {
	Local  string      // path on the submitting machine
	Remote string      // path relative to the job directory; never absolute, never "../"
	Mode   fs.FileMode // 0 means 0644
}

// SimHints tell a simulated site how the job really behaves. Real backends
// ignore them.
type SimHints struct {
	Runtime  time.Duration // actual run time at this placement, scaled like Walltime (a job running past Walltime is killed)
	ExitCode int           // exit code the simulated job ends with
}

// JobSpec is what one site is asked to run: a whole grid job, or one component
// of a co-allocated one.
type JobSpec struct {
	GridID       string            // the grid job id; tags the remote job so reconciliation can find it
	Component    int               // index of this component in a co-allocated job (0 otherwise)
	Components   int               // number of components (1 for a single-site job)
	Name         string            // human name; stays literal text at the site
	Command      []string          // argv to run; exactly one of Command and Script is set
	Script       string            // a bash script body, run instead of Command
	Env          map[string]string // environment for the job
	WorkDir      string            // working directory relative to the job directory ("" = the job directory)
	Nodes        int               // nodes at this site (>= 1)
	CoresPerNode int               // cores per node (0 = site default)
	MemPerNode   int64             // memory per node in bytes (0 = site default); SLURM --mem, PBS mem= in the select
	GPUsPerNode  int               // GPUs per node (0 = none); SLURM --gres=gpu:N, PBS ngpus= in the select
	Partition    string            // partition (SLURM) or queue (PBS); "" = the site's configured one
	Account      string            // account to charge; "" = the site's configured one (or none)
	Setup        string            // bash run before the command in the same shell (e.g. module load); "" = none
	Walltime     time.Duration     // limit at this site, already scaled to the site's speed
	Inputs       []StageFile       // staged into the job directory before submission
	Outputs      []string          // paths relative to the job directory brought back after the end
	Reservation  string            // site reservation to run in ("" = none)
	Sim          SimHints          // for simulated sites only
	// ArrayLimit is, for an element of a grid array (an ArrayElement tag),
	// the broker's own limit of the array's elements unfinished at once
	// (0: none). A native array of such elements is submitted with it as
	// the batch system's throttle (SLURM `--array=...%K`); a batch system
	// without one (PBS) relies on the broker's limit alone.
	ArrayLimit int
}

// Validate checks what every backend requires of a spec.
func (j *JobSpec) Validate() error {
	switch {
	case j.GridID == "":
		return fmt.Errorf("%w: missing grid id", ErrInvalidSpec)
	case j.Nodes < 1:
		return fmt.Errorf("%w: nodes must be >= 1, got %d", ErrInvalidSpec, j.Nodes)
	case len(j.Command) == 0 && j.Script == "":
		return fmt.Errorf("%w: neither command nor script given", ErrInvalidSpec)
	case len(j.Command) > 0 && j.Script != "":
		return fmt.Errorf("%w: both command and script given", ErrInvalidSpec)
	case j.Walltime <= 0:
		return fmt.Errorf("%w: walltime must be > 0, got %s", ErrInvalidSpec, j.Walltime)
	case j.CoresPerNode < 0 || j.MemPerNode < 0 || j.GPUsPerNode < 0:
		return fmt.Errorf("%w: cores (%d), memory (%d bytes) and GPUs (%d) per node must be >= 0", ErrInvalidSpec, j.CoresPerNode, j.MemPerNode, j.GPUsPerNode)
	case !batchWordRe().MatchString(j.Partition) || !batchWordRe().MatchString(j.Account):
		return fmt.Errorf("%w: partition %q or account %q is not a batch-system name (letters, digits, '.', '_', '-', '@', up to 64)", ErrInvalidSpec, j.Partition, j.Account)
	}
	return nil
}

// SiteInfo is a site's state as its batch system reports it.
type SiteInfo struct {
	Name         string
	Kind         string   // "sim", "slurm", "pbs"
	Nodes        int      // schedulable nodes
	FreeNodes    int      // idle nodes now
	CoresPerNode int      // cores on one node
	MemPerNode   int64    // memory of one node in bytes (0 = not known)
	GPUsPerNode  int      // GPUs on one node (0 = none)
	Partitions   []string // partitions or queues; the first is the default
	// Accounts are the accounts the login user may charge at the site, as
	// its accounting database says (SLURM `sacctmgr show assoc`); nil: the
	// site cannot say (no accounting, or no association recorded), and no
	// account is judged by it.
	Accounts []string
	Queued   int // jobs waiting in the site's own queue
	Running  int // jobs running
	// Busy lists, for each running job, its nodes and the time its estimate
	// runs out; a policy builds the site's availability profile from it.
	Busy []Allocation
}

// Allocation is a block of nodes held until an (estimated) time.
type Allocation struct {
	Nodes int
	Until time.Time
}

// JobStatus is one job's state at its site.
type JobStatus struct {
	ID       JobID
	GridID   string
	Name     string // the job name as the site reports it ("" when the record has none)
	State    State
	Reason   string // the batch system's reason (e.g. "Resources", "NonZeroExitCode")
	ExitCode int    // valid in a final state; -1 when unknown
	Signal   int    // terminating signal, if any
	Start    time.Time
	End      time.Time
	NodeList string
}

// Backend is one site's batch system.
//
// Contract: every method honours ctx (returns promptly with ctx.Err() wrapped
// once it is done). Submit either creates exactly one remote job tagged with
// spec.GridID and returns its id, or returns an error; when it cannot tell
// (a timeout after the request was sent) it returns an error wrapping
// ErrUnavailable and the caller must look the tag up before resubmitting.
// Status answers for all ids in one batched call to the site and returns one
// JobStatus per id, in order; an id the site no longer knows is reported with
// StateLost (or its final state from a fallback record), never dropped.
// Cancel of a job that has already ended is not an error.
type Backend interface {
	Name() string
	Info(ctx context.Context) (*SiteInfo, error)
	Submit(ctx context.Context, spec *JobSpec) (JobID, error)
	Status(ctx context.Context, ids []JobID) ([]JobStatus, error)
	Cancel(ctx context.Context, id JobID) error
}

// Finder is an optional capability: look up remote jobs by grid id, for
// reconciliation after a crash. It returns every remote job that carries the
// tag, in any state.
type Finder interface {
	FindByGridID(ctx context.Context, gridID string) ([]JobStatus, error)
}

// Connectivity is an optional capability of a backend that holds a
// connection to its site: ConnErr is why it has none now (the last failed
// dial), nil while connected or before anything failed. Such a backend is
// usable while its site is down; its calls fail with ErrUnavailable until
// the site answers again.
type Connectivity interface {
	ConnErr() error
}

// Fetcher is an optional capability: bring a finished job's outputs back into
// localDir. It returns the local paths written.
type Fetcher interface {
	FetchOutputs(ctx context.Context, id JobID, spec *JobSpec, localDir string) ([]string, error)
}

// LinkEstimator is an optional capability: the site's transfer cost from
// this machine as measured on the transfers made so far, seconds =
// latency + bytes·secPerByte. ok is false until something was measured. The
// broker feeds it to the policies' transfer-cost term.
type LinkEstimator interface {
	LinkEstimate() (secPerByte float64, latency time.Duration, ok bool)
}

// ResvID is a site-local reservation id.
type ResvID string

// ReservationSpec asks a site for nodes held over a time window.
type ReservationSpec struct {
	Name     string
	Start    time.Time
	Duration time.Duration
	Nodes    int
	Users    []string
}

// Reservation is a reservation as the site reports it.
type Reservation struct {
	ID       ResvID
	Start    time.Time
	End      time.Time
	Nodes    int
	NodeList string
	State    string
}

// Reserver is an optional capability: native advance reservations.
//
// Contract: CreateReservation returns the site's id or an error wrapping
// ErrRejected with the batch system's words (e.g. nodes busy). DeleteReservation
// is idempotent: deleting a reservation that no longer exists is not an error.
type Reserver interface {
	CreateReservation(ctx context.Context, r *ReservationSpec) (ResvID, error)
	ShowReservation(ctx context.Context, id ResvID) (*Reservation, error)
	DeleteReservation(ctx context.Context, id ResvID) error
}

// Result is what a remote command produced.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
	Duration time.Duration
}

// Runner runs one command on a site's login node.
//
// Contract: argv is passed as separate words and each word reaches the remote
// program literally (no shell expansion of its content). A non-zero exit is
// not an error: it is in Result.ExitCode. An error means the command could not
// be run or its result not read (wraps ErrUnavailable when retryable).
type Runner interface {
	Run(ctx context.Context, argv []string, stdin io.Reader) (Result, error)
}

// Transfer is the account of one file transfer.
type Transfer struct {
	Bytes    int64
	Duration time.Duration
	SHA256   string // hex digest of the bytes transferred
}

// Stager moves files between this machine and a site.
//
// Contract: Put is atomic (the remote file appears complete under its name or
// not at all) and verifies the size; both report bytes and seconds, which are
// the transfer-cost account. Remote paths are confined to a root the Stager
// was given: a path escaping it is refused with ErrInvalidSpec.
type Stager interface {
	Put(ctx context.Context, src io.Reader, remote string, mode fs.FileMode) (Transfer, error)
	Get(ctx context.Context, remote string, dst io.Writer) (Transfer, error)
}

// ErrNeedsLogin: the site asks for something only a person can give (a
// one-time password, a key's passphrase) and its authenticated connection
// is gone; `gridsub login SITE` restores it. Not an outage: the jobs at
// the site keep their state and nothing is moved elsewhere because of it.
// Always wrapped together with ErrUnavailable (nothing can be sent there
// now; a call that failed so was not sent).
var ErrNeedsLogin = errors.New("needs login")
