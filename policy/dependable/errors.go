package dependable

import "errors"

// Errors, tested with errors.Is.
var (
	// ErrOutOfOrder: an observation is older than the site's last one. The
	// predictor's state is unchanged.
	ErrOutOfOrder = errors.New("dependable: observation older than the site's last one")
	// ErrBadEvent: Observe was given an event that is not Up, Down or Fail,
	// or an empty site name.
	ErrBadEvent = errors.New("dependable: bad observation")
	// ErrBadState: a marshalled predictor that is malformed or inconsistent
	// (UnmarshalJSON), or a bad Config.
	ErrBadState = errors.New("dependable: bad predictor state")
	// ErrBadQoS: a tier name other than auto, high, low or none.
	ErrBadQoS = errors.New("dependable: bad QoS tier")
)
