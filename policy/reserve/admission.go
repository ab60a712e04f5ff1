package reserve

import (
	"fmt"
	"strings"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Names of the built-in admission mechanisms (policy.Admission).
const (
	DRRMName       = "drrm"        // the resource–reservation graph: admit now, bind at the start
	SRRMName       = "srrm"        // static, m_schedule: bound at admission to the least predicted preemption cost
	SRRMRandomName = "srrm-random" // static, r_schedule: bound at admission to a random candidate with room
)

// Names lists the built-in admission mechanisms.
func Names() []string { return []string{DRRMName, SRRMName, SRRMRandomName} }

// ByName returns the built-in admission mechanism of that name; the error
// names the valid ones.
func ByName(name string) (policy.Admission, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case DRRMName:
		return DRRM{}, nil
	case SRRMName:
		return SRRM{Mode: StaticMinCost}, nil
	case SRRMRandomName:
		return SRRM{Mode: StaticRandom}, nil
	}
	return nil, fmt.Errorf("unknown admission %q: valid are %s", name, strings.Join(Names(), ", "))
}

// DRRM is paper 001's dynamic mechanism as a policy.Admission: its books are
// Graphs (the seed is unused: DRRM makes no random choice).
type DRRM struct{}

var _ policy.Admission = DRRM{}

// Name is DRRMName.
func (DRRM) Name() string { return DRRMName }

// NewBook returns an empty resource–reservation graph over res.
func (DRRM) NewBook(res []policy.ResvResource, _ uint64) policy.ReservationBook {
	return GraphBook{New(res)}
}

// GraphBook is a Graph as a policy.ReservationBook.
type GraphBook struct{ *Graph }

var _ policy.ReservationBook = GraphBook{}

// Admit runs the graph's admission test (addQNode); the graph needs
// neither now nor the running jobs to decide.
func (b GraphBook) Admit(q policy.ResvRequest, _ time.Time, _ []policy.ResvRunning) policy.Status {
	ok, why := b.Graph.Admit(q)
	return status(DRRMName, ok, why)
}

var _ policy.BookedStart = GraphBook{}

// Booked is the start reservation id is to be bound at: its ET while it
// is unbound (the graph decides the start at the binding), its bound start
// after; ok false for an id the graph does not hold.
func (b GraphBook) Booked(id string) (time.Time, bool) {
	n, ok := b.Graph.byID[id]
	switch {
	case !ok:
		return time.Time{}, false
	case n.bound:
		return n.start, true
	}
	return n.q.ET, true
}

// SRRM is paper 001's static baseline as a policy.Admission.
type SRRM struct{ Mode StaticMode }

var _ policy.Admission = SRRM{}

// Name is SRRMName (m_schedule) or SRRMRandomName (r_schedule).
func (s SRRM) Name() string {
	if s.Mode == StaticRandom {
		return SRRMRandomName
	}
	return SRRMName
}

// NewBook returns an empty static book over res; seed drives r_schedule.
func (s SRRM) NewBook(res []policy.ResvResource, seed uint64) policy.ReservationBook {
	return StaticBook{NewStatic(res, s.Mode, seed)}
}

// StaticBook is a Static as a policy.ReservationBook.
type StaticBook struct{ *Static }

var _ policy.ReservationBook = StaticBook{}

// Admit runs SRRM's admission, which books q at once.
func (b StaticBook) Admit(q policy.ResvRequest, now time.Time, running []policy.ResvRunning) policy.Status {
	_, ok, why := b.Static.Admit(q, now, running)
	name := SRRMName
	if b.Static.mode == StaticRandom {
		name = SRRMRandomName
	}
	return status(name, ok, why)
}

var _ policy.BookedStart = StaticBook{}

// Booked is the start reservation id was booked at on admission, or the
// start Bind decided once bound; ok false for an id the book does not hold.
func (b StaticBook) Booked(id string) (time.Time, bool) {
	x, ok := b.Static.byID[id]
	if !ok {
		return time.Time{}, false
	}
	return x.start, true
}

func status(plugin string, ok bool, why string) policy.Status {
	if ok {
		return policy.NewStatus(policy.Success, plugin, why)
	}
	return policy.NewStatus(policy.Unresolvable, plugin, why)
}
