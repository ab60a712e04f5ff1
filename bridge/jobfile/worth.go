package jobfile

import "github.com/gridsub/gridsub/policy"

// Worth is the benefit function as the planners take it (policy.Worth);
// nil for a job without one.
func (b *Benefit) Worth() *policy.Worth {
	if b == nil {
		return nil
	}
	w := &policy.Worth{Shape: policy.Linear, A: b.A, B: b.B, C: b.C}
	if b.Shape == BenefitStep {
		w.Shape = policy.Step
	}
	return w
}
