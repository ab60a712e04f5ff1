package sshbatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// Dialect is one batch system as a Backend drives it: which commands do
// what, and how their outputs read. Everything a dialect runs goes
// through the Exec it is handed (one site's Runner, its error words); the
// Backend keeps the rest — the job directories and their exit-code files,
// staging, outputs, logs, batches, the connection.
//
// The contract:
//   - Traits is constant.
//   - ValidJobID and CheckSpec are pure; the Backend calls no other method
//     with an id ValidJobID refuses or a spec CheckSpec (after
//     sshbatch.CheckSpec) refuses.
//   - Info reports the site's size, queues and load (SiteInfo.Kind is
//     Traits.Kind).
//   - SubmitCommand returns the command that submits spec from the job
//     directory dir (as the login shell sees it) with the wrapper on its
//     stdin, and may ask the site whether it can ever run the job (an
//     error then fails the submission: nothing was staged or run). With
//     batched set the directory exists when the command runs if
//     Traits.MkdirBatch is set; else the command makes it. The command
//     prints what ParseSubmitted reads: the new job's id.
//   - Query adds to found the status of every job of ids (valid, distinct,
//     at most Traits.MaxIDs) the batch system still has a record of; a job
//     it leaves out is looked up in its exit-code file.
//   - Ended reports whether the words of a failed CancelArgv command say
//     the job had already ended or is unknown (not an error).
//   - Find lists the login user's jobs tagged with gridID (valid per
//     ValidGridID), those the batch system knows and those it forgot but
//     whose job directory names them (Found.Gone).
//   - Live maps the grid ids in the tags of the login user's live jobs to
//     the jobs' ids (the jobs of a batch whose output was cut are found by
//     their tags).
//   - Command names the batch-system command an argv runs, for messages;
//     Failure reads a failed command's result: its words on one line, and
//     whether they say the batch system could not be reached
//     (backends.ErrUnavailable rather than ErrRejected).
//
// A dialect that can reserve nodes also implements Reserver.
type Dialect interface {
	Traits() Traits
	ValidJobID(id string) bool
	CheckSpec(spec *backends.JobSpec) error
	Info(ctx context.Context, x *Exec) (*backends.SiteInfo, error)
	SubmitCommand(ctx context.Context, x *Exec, spec *backends.JobSpec, dir string, batched bool) (Command, error)
	ParseSubmitted(stdout []byte) (backends.JobID, error)
	Query(ctx context.Context, x *Exec, ids []backends.JobID, found map[backends.JobID]backends.JobStatus) error
	CancelArgv(id backends.JobID) []string
	Ended(msg string) bool
	Find(ctx context.Context, x *Exec, gridID string) ([]Found, error)
	Live(ctx context.Context, x *Exec) (map[string]backends.JobID, error)
	Command(argv []string) string
	Failure(r backends.Result) (msg string, unavailable bool)
}

// Reserver is the dialect of a batch system with advance reservations.
// Reserve gets a spec the Backend has checked (>= 1 node, a duration > 0,
// at least one user) and returns the reservation once the batch system has
// decided, with the nodes it granted (the Backend withdraws a reservation
// granted fewer nodes than asked; a Reservation returned with an error
// names one that was made but not read back); Show reads one back (an
// unknown one is an error wrapping backends.ErrRejected), Delete removes
// one (an unknown one is not an error).
type Reserver interface {
	Reserve(ctx context.Context, x *Exec, rs *backends.ReservationSpec) (*backends.Reservation, error)
	Show(ctx context.Context, x *Exec, id backends.ResvID) (*backends.Reservation, error)
	Delete(ctx context.Context, x *Exec, id backends.ResvID) error
}

// Traits are the constants of a dialect.
type Traits struct {
	Kind   string // the backend's kind: SiteInfo.Kind, the log's "backend" attribute ("slurm", "pbs")
	System string // the batch system in messages ("SLURM", "PBS")
	// MaxIDs bounds the job ids (and exit-code files) put into one command.
	MaxIDs int
	// Records names what Query consults, for a lost job's reason.
	Records string
	// MkdirBatch: a batch's submission commands expect their job
	// directories to exist; the Backend makes them all in one command first.
	MkdirBatch bool
}

// Found is one job FindByGridID reports: its status and job directory (as
// the login shell sees it; "" when not known). Gone: the batch system has
// no record of it (its directory named it), and its status is read from
// its exit-code file.
type Found struct {
	Status backends.JobStatus
	Dir    string
	Gone   bool
}

// Exec runs a dialect's commands at one site: the Runner's errors and a
// command's failure become errors naming the site and the command.
type Exec struct {
	Site string       // the site's name
	User string       // the login user ("" when not configured)
	Log  *slog.Logger // the site's logger
	run  backends.Runner
	d    Dialect
	bud  *Budget // the site's command budget (nil: none, as in a bare Exec)
	// timeout bounds each command (0: DefaultCommandTimeout).
	timeout time.Duration
}

// DefaultCommandTimeout bounds one remote command of a site (Config
// CommandTimeout): a batch command that has not answered by then (a hung
// sbatch, a controller that accepts connections and never replies) is cut,
// its outcome unknown, and the site is backed off from. A batched
// submission gets this plus BatchCommandTime a job.
const DefaultCommandTimeout = 30 * time.Second

// BatchCommandTime is the time a batched submission's deadline grows by
// for each job it carries.
const BatchCommandTime = 100 * time.Millisecond

// Run runs argv, a batch-system command, with stdin (nil for none): it is
// counted in the site's Budget — and takes its tokens when it is part of a
// routine poll or capacity report (Status, Info on a backends.Routine
// context), never otherwise — and its answer (an overload or rate-limit
// message, no answer at all) feeds the Budget's back-off.
// The error is the Runner's (the command's outcome is unknown), wrapped
// with the command's name; a non-zero exit is not an error.
func (x *Exec) Run(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	if x.bud != nil && ctx.Err() == nil {
		if polling(ctx) {
			x.bud.Charge(1)
		} else {
			x.bud.ChargeDemand(1)
		}
	}
	return x.exec(ctx, argv, stdin, false)
}

// RunAside is Run for a command answered by another daemon than the
// batch system's controller (SLURM's sacctmgr asks slurmdbd): counted and
// charged as Run, but its words (an accounting database that is down or
// refuses) neither start nor end the Budget's back-off; only no answer at
// all (the connection, the command's deadline) does.
func (x *Exec) RunAside(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	if x.bud != nil && ctx.Err() == nil {
		if polling(ctx) {
			x.bud.Charge(1)
		} else {
			x.bud.ChargeDemand(1)
		}
	}
	return x.exec(ctx, argv, stdin, true)
}

type pollKey struct{}

// asPoll marks ctx as a routine poll's or capacity report's: the commands
// run on it take the budget's tokens (everything else is counted only).
func asPoll(ctx context.Context) context.Context { return context.WithValue(ctx, pollKey{}, true) }

func polling(ctx context.Context) bool { v, _ := ctx.Value(pollKey{}).(bool); return v }

// Plain runs a command that does not reach the batch system (mkdir, the
// exit-code files): not counted, but a site that does not answer still
// starts the back-off.
func (x *Exec) Plain(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	return x.exec(ctx, argv, stdin, false)
}

func (x *Exec) exec(ctx context.Context, argv []string, stdin io.Reader, aside bool) (backends.Result, error) {
	if err := ctx.Err(); err != nil {
		return backends.Result{}, fmt.Errorf("%s: %w", x.Site, err)
	}
	d := x.timeout
	if d <= 0 {
		d = DefaultCommandTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	r, err := x.run.Run(cctx, argv, stdin)
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		// Overran its own deadline: the site is hung, not the caller
		// gone; what the command did is unknown (ErrUnavailable).
		err = fmt.Errorf("%w: no answer within %s: %w", backends.ErrUnavailable, d, err)
	}
	if x.bud != nil && (!aside || err != nil) {
		msg := ""
		if err == nil && r.ExitCode != 0 {
			msg = x.Message(r)
		}
		x.bud.Observe(err, msg)
	}
	if err != nil {
		return r, fmt.Errorf("%s: running %s: %w", x.Site, x.d.Command(argv), err)
	}
	return r, nil
}

// Fail is the error of argv's non-zero exit: backends.ErrUnavailable when
// the batch system could not be reached, ErrRejected otherwise, with its
// words.
func (x *Exec) Fail(argv []string, r backends.Result) error {
	msg, down := x.d.Failure(r)
	kind := backends.ErrRejected
	if down || r.ExitCode == 255 && msg == "" {
		kind = backends.ErrUnavailable
	}
	return fmt.Errorf("%w: %s on %s exited %d: %s", kind, x.d.Command(argv), x.Site, r.ExitCode, msg)
}

// Output runs argv without stdin; a non-zero exit is Fail's error.
func (x *Exec) Output(ctx context.Context, argv []string) (backends.Result, error) {
	r, err := x.Run(ctx, argv, nil)
	if err != nil {
		return r, err
	}
	if r.ExitCode != 0 {
		return r, x.Fail(argv, r)
	}
	return r, nil
}

// Message is a failed command's words on one line (the dialect's Failure).
func (x *Exec) Message(r backends.Result) string {
	msg, _ := x.d.Failure(r)
	return msg
}

// Command names the batch-system command argv runs (the dialect's name for
// it, as in messages).
func (x *Exec) Command(argv []string) string { return x.d.Command(argv) }

func (x *Exec) commandTimeout() time.Duration {
	if x.timeout > 0 {
		return x.timeout
	}
	return DefaultCommandTimeout
}

// boundRunner runs each command of a batched submission under its own
// deadline d; a batch that overruns it is cut (its commands' fates are
// then unknown, looked up by tag) and starts the site's back-off.
type boundRunner struct {
	r   backends.Runner
	d   time.Duration
	bud *Budget
}

func (b boundRunner) Run(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	cctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	r, err := b.r.Run(cctx, argv, stdin)
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("%w: no answer within %s: %w", backends.ErrUnavailable, b.d, err)
	}
	if b.bud != nil {
		b.bud.Observe(err, "")
	}
	return r, err
}
