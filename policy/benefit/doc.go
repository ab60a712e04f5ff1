// Package benefit is paper 003's repetitive mapping (Ding, Chen, Gu;
// SPEC.md §4) as pure, deterministic policy.Planners: the benefit-sufferage
// heuristic and its baselines Min-min and Sufferage, data-aware or
// data-blind.
//
// One mapping event (Map) takes every task not yet started — new ones and
// ones mapped before but still waiting — and maps them all again on the
// current state:
//
//	COMP(t, c, s) = max(START(c), Data-START(s)) + TRAN(t, c, s) + ETC(t, c)
//
//	drop     a task whose minimum COMP is after its deadline is reported
//	         (Mapping.Dropped; the live planner rejects it with the
//	         predicted completion), not mapped — unless it is best-effort
//	order    tasks by minimum COMP: a task whose COMP on a machine is
//	         START plus a constant (no contended repository) sits in
//	         per-machine, per-width lists sorted by that constant, the
//	         others in a lazy heap (completions only grow, so an
//	         out-of-date key is a lower bound); queue.go
//	claim    each takes its best machine (and repository) for the round;
//	         a taken one goes to the higher benefit sufferage
//	         β(best COMP) − β(second COMP), the holder waits (Sufferage's
//	         displacement); the first task that can neither claim nor
//	         displace ends the zero-sufferage claims of the round, and only
//	         deadline-pressed tasks (sufferage > 0) may still claim
//	commit   the round's claims, updating START and Data-START
//
// Only the deadline tasks whose proof of "not pressed" a commit may have
// broken are looked at again after a round (press.go). The engine as it
// was before these shortcuts is kept in oracle_test.go, and the tests
// require identical mappings.
//
// With no deadline pressure every benefit sufferage is 0 and the result is
// exactly Min-min's (property-tested against an independent Min-min).
// Benefit functions (policy.Worth): the paper's linear (a, b, c), a step
// for "urgent" jobs, and, for a deadline without a function, 1 by the
// deadline and 0 after.
//
// The live Planner maps each site as one machine (a job never splits) and
// reads the job's input from its origin site or the submitting machine
// (policy.Snapshot.Transfer); the simulation of paper 003's experiment
// (simbackend/experiment, kind paper003) uses hosts and data repositories.
package benefit
