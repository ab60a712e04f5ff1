package policy

import "time"

// Demand is a request as the feasibility check reads it: what it asks,
// where it may run, and by when. Sites are named, not indexed, because a
// request is checked before it is queued.
type Demand struct {
	Width    int           // nodes, possibly split across sites
	Estimate time.Duration // the user's estimate on the reference machine
	DataSize int64         // bytes to move from the origin to the executing sites
	// Origin is the name of the submit site; "" means outside every site.
	Origin string
	// Sites restricts the sites (by name) the request may use; nil means all.
	Sites []string
	// PerNode is what the request asks of each node (zero fields: nothing).
	PerNode NodeShape
	NoSplit bool
	// Deadline is the latest acceptable end; zero means none.
	Deadline time.Time
	// BestEffort: a deadline that cannot be met is a warning, not a refusal.
	BestEffort bool
	// Window marks an advance reservation: its size and its deadline (the
	// window) are the admission test's to judge (Admission), not this one's.
	Window bool
}

// Cause says which rule refused a request.
type Cause int

// Causes of a refusal (Verdict.Cause).
const (
	CauseNone     Cause = iota // not refused
	CauseSites                 // no allowed site, or none whose nodes have what is asked per node
	CauseCapacity              // the width does not fit the eligible sites
	CauseDeadline              // the fastest placement ends after the deadline
)

var causeNames = [...]string{"none", "sites", "capacity", "deadline"}

func (c Cause) String() string {
	if int(c) < len(causeNames) && c >= 0 {
		return causeNames[c]
	}
	return "cause(?)"
}

// Verdict is a feasibility answer. Status.Code is Success (feasible) or
// Unresolvable (it can never run: Status.Reasons say why, Cause says which
// rule). Warning, on a feasible request, says what it will not get (a
// best-effort deadline it will miss).
type Verdict struct {
	Status  Status
	Cause   Cause
	Warning string
}

// Feasible reports whether the verdict accepts the request.
func (v Verdict) Feasible() bool { return v.Status.Code == Success }

// Feasibility decides whether a request could ever run on the sites, before
// it is queued and again while it waits.
//
// Contract: both methods are pure and deterministic (equal inputs give equal
// answers), must not modify their inputs, and read of s only Now, Sites
// (Name, Nodes, H, Shape; Nodes <= 0 = a site not known yet, which neither
// its size nor its node shape rules out), Links and MultiSite.
// A request that can never run is an Unresolvable Verdict with its reasons,
// never an error; the error is for something broken.
type Feasibility interface {
	Name() string
	// Feasible checks a request at submission (s.Now is the submission time).
	Feasible(d *Demand, s *Snapshot) (Verdict, error)
	// Late checks a waiting request against its deadline at s.Now: "" when
	// it can still meet it (or has none), else why it cannot.
	Late(d *Demand, s *Snapshot) (string, error)
}
