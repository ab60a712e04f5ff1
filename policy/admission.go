package policy

import (
	"errors"
	"time"
)

// Sentinel errors of ReservationBook.Bind. Callers test them with errors.Is;
// the wrapping error carries the reason in words.
var (
	// ErrResvUnknown: no admitted reservation has that id.
	ErrResvUnknown = errors.New("reserve: unknown reservation")
	// ErrResvBound: the reservation is already bound to a resource.
	ErrResvBound = errors.New("reserve: reservation already bound")
	// ErrResvTooLate: now is past the reservation's latest start (LT - Dur).
	ErrResvTooLate = errors.New("reserve: reservation window already over")
	// ErrResvNoResource: no candidate resource can take the reservation
	// within its window, not even by preempting non-reserved jobs.
	ErrResvNoResource = errors.New("reserve: no candidate resource can take the reservation")
)

// ResvResource is one resource reservations can be bound to (a site).
type ResvResource struct {
	Name     string
	Capacity int     // nodes it has; 0 or less means 1
	Level    int     // capability level; a reservation is a candidate iff Level >= its Demand
	Cost     float64 // unit preemption cost w_j; 0 (or less) means 1
}

// ResvRequest is one advance-reservation request q (SPEC.md §2).
type ResvRequest struct {
	ID      string
	ET, LT  time.Time     // window [earliest start, latest end]
	Dur     time.Duration // run time to hold, 0 < Dur <= LT-ET
	Width   int           // nodes, all on one resource; 0 means 1
	Demand  int           // capability level needed
	Allowed []string      // resource names it may use; nil (or empty) = every resource
}

// ResvRunning is a non-reserved job occupying nodes of a resource.
type ResvRunning struct {
	Resource string
	Job      string
	Nodes    int           // 0 means 1
	Expected time.Duration // its expected run time et_kj
	Elapsed  time.Duration // elapsed pt_kj
}

// ResvBinding is where and when a reservation holds its nodes.
type ResvBinding struct {
	Resource string
	Start    time.Time // et, or later when delaying within the slack avoids preemption
	Preempt  []string  // jobs to preempt (restart, not resume); empty when delayed or free
	Cost     float64   // w_j * sum of preempted jobs' elapsed seconds; 0 when none
	Reason   string    // human words: why this resource, why delayed / who is preempted
}

// Admission is a reservation mechanism (SPEC.md §2): DRRM admits at request
// time and binds at the start, SRRM binds at admission.
//
// Contract: NewBook returns an empty book over res; seed drives every
// random choice the mechanism makes, so equal resources, seeds and calls
// give equal answers.
type Admission interface {
	Name() string
	NewBook(res []ResvResource, seed uint64) ReservationBook
}

// BookedStart is an optional capability of a ReservationBook: the start a
// reservation is to be bound at, known right after Admit. A caller that
// drives the book in virtual time (the paper 001 simulator) calls Bind
// then. Booked answers:
//
//   - SRRM (srrm, srrm-random): the start Admit booked, or, once bound, the
//     start Bind decided;
//   - DRRM (drrm): the request's ET while the reservation is not bound yet
//     (DRRM decides the start at the binding), the bound start after;
//
// and ok false for an id the book does not hold. A caller whose book lacks
// the capability binds at the request's ET.
type BookedStart interface {
	Booked(id string) (start time.Time, ok bool)
}

// ReservationBook holds the admitted reservations over a set of resources.
//
// Contract: deterministic (equal call sequences give equal answers), no
// I/O, no wall clock (now is an argument), not safe for concurrent use.
// Admit answers Success (admitted) or Unresolvable (refused, the book
// unchanged), with the reason in words either way. Bind's errors wrap
// ErrResvUnknown, ErrResvBound, ErrResvTooLate or ErrResvNoResource.
// Remove of an unknown id is a no-op. The dropped ids of SetCapacity and
// FailResource are reservations the book no longer holds (in the order
// they went).
type ReservationBook interface {
	// Admit runs the admission test for q at now; running are the
	// non-reserved jobs at each resource now.
	Admit(q ResvRequest, now time.Time, running []ResvRunning) Status
	// Bind decides an admitted reservation's resource and start at now.
	Bind(id string, now time.Time, running []ResvRunning) (ResvBinding, error)
	// Remove deletes a reservation (finished or cancelled).
	Remove(id string)
	// Reservations lists the admitted ids in earliest-start order.
	Reservations() []string
	// AddResource adds a resource, or revives a failed one.
	AddResource(r ResvResource)
	// SetCapacity changes a resource's node count and drops what no longer fits.
	SetCapacity(name string, capacity int) (dropped []string)
	// FailResource applies the mechanism's failure rule to a failed resource.
	FailResource(name string) (dropped []string)
}
