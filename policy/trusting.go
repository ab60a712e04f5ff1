package policy

import "time"

// TrustNode is a site (or the broker, the observer) with the QoS parameters
// trust compares (SPEC.md §3).
type TrustNode struct {
	Name      string
	Area      string  // local area (LA) it belongs to; "" = its own
	Power     float64 // compute power, e.g. nodes / h (bigger = better); <= 0 = unknown
	Bandwidth float64 // bytes/s to the broker as measured; <= 0 = unknown
}

// Outcomes counts what happened to work moved from one node to another:
// tasks that completed, tasks that failed, and unreachable events. Counts
// may be fractional: decayed counts weigh old outcomes less.
type Outcomes struct{ Completed, Failed, Unreachable float64 }

// Add returns the sum of two counts.
func (o Outcomes) Add(p Outcomes) Outcomes {
	return Outcomes{o.Completed + p.Completed, o.Failed + p.Failed, o.Unreachable + p.Unreachable}
}

// TrustKey names the pair (From, To) an Outcomes belongs to; From = "" is
// the broker (the user's machine).
type TrustKey struct{ From, To string }

// TrustInput is what a trust computation reads: the observer (who trusts:
// the broker, Name "", or a site that asks), the sites and the outcomes
// counted between them. The observer's own outcomes are those keyed From =
// Observer.Name; outcomes from any other node are its testimony.
type TrustInput struct {
	Observer TrustNode
	Sites    []TrustNode
	Outcomes map[TrustKey]Outcomes
}

// Trust turns outcomes into per-site trust scores (SPEC.md §3), live in the
// broker's daemon and in trace replays alike.
//
// Contract: pure and deterministic. Scores gives every named site of in a
// score in (0, 1] (1 = fully trusted; Snapshot.Site.Trust); it must not
// modify in; its error is for a broken model, never for a site that failed.
// Decay ages counts by elapsed at the given half-life (<= 0: never ages).
type Trust interface {
	Name() string
	Scores(in *TrustInput) (map[string]float64, error)
	Decay(o Outcomes, elapsed, halfLife time.Duration) Outcomes
}
