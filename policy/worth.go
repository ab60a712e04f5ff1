package policy

import "time"

// Shape is the form of a job's benefit function (SPEC.md §4).
type Shape int

// Benefit function shapes.
const (
	// NoWorth: the job has no benefit function (the zero value). A job
	// with a deadline and no function is worth 1 if it ends by the
	// deadline and 0 after it (a hard step at D).
	NoWorth Shape = iota
	// Linear is paper 003's equation (1): A while t < B·D, then A − C·(t − B·D).
	Linear
	// Step is the "urgent" shape: A while t < B·D, then A − C (C = A: nothing).
	Step
)

// Worth is a job's benefit function β over its completion time t, both t and
// the deadline D measured from the job's submission (SPEC.md §4).
type Worth struct {
	Shape   Shape
	A, B, C float64
}

// Value is β at elapsed after submission for a deadline that long after
// submission (0 or less: no deadline). A job without a deadline is worth 0
// whenever it ends: nothing to gain by hurrying it, which is what makes the
// benefit heuristic equal to Min-min when no job is under deadline pressure.
func (w Worth) Value(elapsed, deadline time.Duration) float64 {
	if deadline <= 0 {
		return 0
	}
	d, t := deadline.Seconds(), elapsed.Seconds()
	switch w.Shape {
	case Linear:
		if lim := w.B * d; t >= lim {
			return w.A - w.C*(t-lim)
		}
		return w.A
	case Step:
		if t >= w.B*d {
			return w.A - w.C
		}
		return w.A
	default:
		if elapsed > deadline {
			return 0
		}
		return 1
	}
}
