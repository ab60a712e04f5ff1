// Package policytest checks an implementation of an extension point
// against its contract (policy.Feasibility, Admission, Trust, Tiering,
// Remap): determinism (equal inputs give equal outputs), inputs left
// unmodified, refusals that carry reasons, and the invariants each
// interface's doc comment states. Run it against every built-in and
// against a plugin's client alike:
//
//	func TestMyTrust(t *testing.T) { policytest.Trust(t, myTrust{}) }
package policytest
