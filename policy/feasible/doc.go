// Package feasible is the built-in policy.Feasibility ("capacity"): can a
// request ever run on the sites, and why not. The checks, in order:
//
//   - node shape: the sites whose nodes lack the cores, memory or GPUs the
//     request asks per node are out (policy.NodeShape.Lacks);
//   - capacity: the width fits the sites left (on one site with no_split,
//     else in sum; an advance reservation's size is left to its admission
//     test, which answers at once and keeps the refusal);
//   - deadline (the one deadline rule, at submission and while a job
//     waits): the fastest placement ends after the deadline even started
//     at once. A best-effort request that misses is feasible, with a warning.
//
// Pure: a Snapshot and a Demand in, a Verdict out.
package feasible
