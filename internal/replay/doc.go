// Package replay drives a workload through the real broker and a real policy
// on the simulated testbed, in virtual time, as fast as the machine allows.
//
//	trace submissions ──┐
//	                    ├─► at each instant t with something to do:
//	engine events ──────┘     engine.RunUntil(t)  (site starts and ends)
//	                          broker.Submit(...)  (jobs submitted at t)
//	                          broker.Cycle(ctx, t) (poll, plan, dispatch)
//
// There is no second scheduler here: the broker, its planner and the
// simulated sites are the very code that runs a live job, so a replay is a
// rehearsal of a policy, not a model of it. A cycle runs only at instants
// where a job arrives or a site changes, which is what a fixed interval of
// paper 000 (Δt = 1 s) would see, without the idle cycles.
package replay
