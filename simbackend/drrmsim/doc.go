// Package drrmsim runs paper 001's experiments (SPEC.md §2): a stream of
// advance-reservation requests over resources that run non-reserved jobs,
// admitted and bound by the dynamic mechanism (DRRM) or by one of the static
// baselines (SRRM_r and SRRM_m), optionally
// with one resource failing part way, and the paper's metrics: admission
// percentage AP, preemption percentage PP, total preemption cost TPC and the
// reservation failure rate η.
//
//	Synthetic / OSC ──► World (resources, requests with arrival times,
//	                    non-reserved jobs per resource, back to back)
//	                 ──► Run(world, mechanism, failure) ──► Result
//
// A World is built once per seed and driven by every mechanism, so the
// mechanisms meet exactly the same requests and the same non-reserved jobs
// (common random numbers). Run is an event loop in virtual time: at one
// instant, reservations that end go first, then the failure, then
// reservations due to start (bound in the order they were admitted), then
// arrivals. Everything is deterministic: seeded PCG sources, no clock, no map
// iteration in results.
//
// Run opens each mechanism through the admission extension point the broker
// uses (policy.Admission from policy/registry: DRRM is drrm, SRRM_r
// srrm-random, SRRM_m srrm) and drives the policy.ReservationBook it
// returns: Admit at each arrival, Bind at the start the book reports through
// the optional policy.BookedStart, Remove at the end, FailResource at the
// failure.
//
// The choices the paper leaves open, and the two places where the OSC
// trace contradicts it, are named in docs/results/paper001.md.
package drrmsim
