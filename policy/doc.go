// Package policy holds what every scheduling policy shares: the Snapshot a
// policy reads, the Plan it returns, the Status that explains a decision, the
// Planner interface, and the run-time model of SPEC.md §1 (equations 1–3).
//
// Policies are pure: no I/O, no wall clock, no global randomness. A Snapshot
// goes in, a Plan comes out, and the same Snapshot always gives the same Plan.
// That is what lets one policy drive a live broker and a 77,000-job trace
// replay alike. Concrete policies live in sub-packages (policy/coalloc for
// paper 000's co-allocation scheduler and its baselines).
package policy
