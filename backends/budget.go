package backends

import (
	"context"
	"errors"
	"time"
)

// ErrDeferred: a routine call (a status poll or a capacity report, see
// Routine) was not sent to the site this time — its command budget, its
// poll schedule or its back-off after an overload answer says not yet.
// Nothing was asked and nothing changed; the caller asks again on its next
// cycle. It is not a failure of the site and never wraps ErrUnavailable.
var ErrDeferred = errors.New("not asked: deferred by the site's command budget")

type routineKey struct{}

// Routine marks ctx as the broker's routine traffic — the poll stage's
// Status and the snapshot's and health probe's Info — which a backend
// with a command budget may answer from what it already knows (Info) or
// defer (Status, ErrDeferred). Calls on an unmarked context (recovery,
// lookups, a user's command) are always sent, and counted.
func Routine(ctx context.Context) context.Context { return context.WithValue(ctx, routineKey{}, true) }

// OnDemand clears Routine's mark: what a call makes on ctx is needed now
// (a withdrawal reading the state it just changed), never deferred.
func OnDemand(ctx context.Context) context.Context {
	return context.WithValue(ctx, routineKey{}, false)
}

// IsRoutine reports whether ctx was marked by Routine.
func IsRoutine(ctx context.Context) bool { v, _ := ctx.Value(routineKey{}).(bool); return v }

// CommandStats is one site's account of the commands gridsub sent to its
// batch system (backends/sshbatch.Budget).
type CommandStats struct {
	Total     uint64  // scheduler commands since the backend started (a batched submission counts each job's command)
	PerMinute float64 // scheduler commands in the last minute
	Budget    float64 // the steady-state budget, commands per minute
	Deferred  uint64  // routine calls not sent (ErrDeferred) since the start
	// BackoffUntil is when routine calls resume after the site answered
	// with an overload or rate-limit message (zero: not backing off);
	// BackoffReason is that message.
	BackoffUntil  time.Time
	BackoffReason string
}

// CommandCounter is a backend that counts its site's scheduler commands.
type CommandCounter interface {
	CommandStats() CommandStats
}

// AsCommandCounter returns b as a CommandCounter when it counts.
func AsCommandCounter(b Backend) (CommandCounter, bool) {
	c, ok := b.(CommandCounter)
	return c, ok
}

// Rememberer is a backend that keeps what it knows of a remote job (its
// job directory, where its exit-code file is) only in memory: after a
// restart the broker hands back, for every live remote job, the tag and
// the component it was submitted with (JobSpec.GridID, Component,
// Components), so that the last rung of the ending ladder still finds the
// job's exit-code file.
type Rememberer interface {
	Remember(id JobID, gridID string, component, components int)
}

// AsRememberer returns b as a Rememberer when it is one.
func AsRememberer(b Backend) (Rememberer, bool) {
	r, ok := b.(Rememberer)
	return r, ok
}
