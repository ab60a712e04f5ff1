package dependable

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// QoS is a job's tier.
type QoS string

// Tiers. Auto is what a job file asks for to have Tier derive the tier from
// its deadline; High, Low and None are the tiers a job gets.
const (
	Auto QoS = "auto"
	High QoS = "high" // replication
	Low  QoS = "low"  // primary–backup
	None QoS = "none" // retry
)

// Rank orders tiers for the three priority queues: High 0, Low 1, None 2
// (and anything else after them).
func (q QoS) Rank() int {
	switch q {
	case High:
		return 0
	case Low:
		return 1
	case None:
		return 2
	}
	return 3
}

// ParseQoS reads a tier name ("" means auto). Case and surrounding space do
// not matter; any other name wraps ErrBadQoS and lists the valid ones.
func ParseQoS(s string) (QoS, error) {
	switch q := QoS(strings.ToLower(strings.TrimSpace(s))); q {
	case "", Auto:
		return Auto, nil
	case High, Low, None:
		return q, nil
	}
	return "", fmt.Errorf("%w: %q (want auto, high, low or none)", ErrBadQoS, s)
}

// DefaultLambda is the paper's λ (Section 4: λ = 1.5).
const DefaultLambda = 1.5

// ValidLambda reports whether λ can be used: finite and >= 0. The paper
// writes "λ < 1" beside its inequalities but uses 1.5; any λ >= 0 is
// accepted here.
func ValidLambda(lambda float64) error {
	if math.IsNaN(lambda) || math.IsInf(lambda, 0) || lambda < 0 {
		return fmt.Errorf("%w: λ must be a finite number >= 0, got %v", ErrBadQoS, lambda)
	}
	return nil
}

// Tier derives a job's tier from its deadline, as SPEC.md §5 decides:
//
//	deadline zero                              → None
//	deadline ≤ arrival + (1+λ)·ctMin           → High (the tighter deadline)
//	deadline > arrival + (1+λ)·ctMin           → Low
//
// ctMin is the job's least completion time over the sites (negative counts
// as 0). A λ that ValidLambda refuses is replaced by DefaultLambda, and the
// reason says so. The reason states the rule with the numbers, e.g.
// "deadline 25m0s after arrival ≤ (1+1.5)·CT_min = 2.5×10m0s = 25m0s: a
// tight deadline, tier high". Tier is pure: equal arguments give equal
// results.
func Tier(arrival, deadline time.Time, ctMin time.Duration, lambda float64) (QoS, string) {
	if deadline.IsZero() {
		return None, "no deadline: tier none (retry on failure)"
	}
	note := ""
	if ValidLambda(lambda) != nil {
		note = fmt.Sprintf(" (λ %v is not usable; the default %v applies)", lambda, DefaultLambda)
		lambda = DefaultLambda
	}
	if ctMin < 0 {
		ctMin = 0
	}
	q, slack, limit := tierOf(arrival, deadline, ctMin, lambda)
	rule := fmt.Sprintf("(1+%v)·CT_min = %v×%v = %v", lambda, 1+lambda, ctMin, limit)
	if q == High {
		return High, fmt.Sprintf("deadline %v after arrival ≤ %s: a tight deadline, tier high (replication)%s", slack, rule, note)
	}
	return Low, fmt.Sprintf("deadline %v after arrival > %s: a loose deadline, tier low (primary–backup)%s", slack, rule, note)
}

// tierOf is Tier's rule without the words, for a deadline that is set, a
// usable λ and ctMin >= 0.
func tierOf(arrival, deadline time.Time, ctMin time.Duration, lambda float64) (q QoS, slack, limit time.Duration) {
	f := (1 + lambda) * float64(ctMin)
	limit = time.Duration(math.MaxInt64)
	if f < float64(math.MaxInt64) {
		limit = time.Duration(f)
	}
	slack = deadline.Sub(arrival)
	if slack <= limit {
		return High, slack, limit
	}
	return Low, slack, limit
}
