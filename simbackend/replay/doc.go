// Package replay drives a workload through a real policy on the simulated
// testbed, in virtual time, as fast as the machine allows.
//
// Two drivers give the same records (TestDirectMatchesBroker holds them to
// it, byte for byte, for every planner):
//
//   - the direct driver (the default, direct.go) calls the planner itself
//     and keeps lean simulated sites: at each instant where a job arrives or
//     ends, ends first, then arrivals, then one planning pass whose Start
//     and Reject decisions it carries out as the broker and a simbackend
//     site would;
//
//   - the broker path (Setup.Broker) pushes the same workload through
//     bridge.Broker and simbackend sites, the very code that runs a live
//     job:
//
//     trace submissions ──┐
//     ├─► at each instant t with something to do:
//     engine events ──────┘     engine.RunUntil(t)  (site starts and ends)
//     broker.Submit(...)  (jobs submitted at t)
//     broker.Cycle(ctx, t) (poll, plan, dispatch)
//
// There is no second scheduler here: both drivers ask the same
// policy.Planner the live broker asks, so a replay is a rehearsal of a
// policy, not a model of it. The direct driver only leaves out the broker's
// bookkeeping a replay never reads (remote ids, events, the store); a plan
// that replicates jobs (Sabin's multi-queue, whose copies wait in every
// site's own queue) always goes through the broker. A cycle runs only at
// instants where a job arrives or a site changes, which is what a fixed
// interval of paper 000 (Δt = 1 s) would see, without the idle cycles.
package replay
