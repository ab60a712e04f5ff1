// Package leastloaded is a small placement policy, and the example of an
// external planner plugin (examples/plugins/README.md): its main is one
// call, plannerrpc.ServePlanner(leastloaded.New()).
//
// The rule, one pass over the queue in FCFS order:
//
//   - A job no single allowed site can ever hold (its width is more than
//     the largest allowed site's nodes, up or down), or whose request is
//     malformed (width < 1, an origin or allowed site that does not exist,
//     an empty allowed list), is rejected with the reason.
//   - Otherwise the job starts on the single up site with the most free
//     nodes now (what the snapshot says, minus what this plan already
//     started there), if that is at least its width. Ties go to the lower
//     load ratio (busy/nodes), then to the lower site index.
//   - A job that fits nowhere now waits, with a reason; so does every job
//     behind it (first come, first served: no job overtakes an earlier
//     one, so a wide job is never starved by narrow ones). Rejections are
//     still made behind a waiting job. A job whose every possible site is
//     down waits with that reason and does not hold up the jobs behind it.
//
// Jobs never span sites, so the planner ignores Snapshot.MultiSite beyond
// the run time it predicts; it ignores Preferred, Deadline and Trust (the
// point is to be small). Chosen.Runtime and Chosen.Transfer are the
// snapshot's own predictions (policy.Snapshot.Runtime/Transfer), which the
// broker turns into the job's walltime.
//
// The planner is also a policy.Incremental: a Session keeps the grid from
// the changes it is told (Submit, Hold, Release) and each pass equals Plan
// on the snapshot they describe, so a trace replay, in process or through
// the plugin boundary, sends a few changes per pass instead of the queue.
//
// Plan is pure and deterministic: no clock, no randomness, no maps; equal
// snapshots give equal plans, and a Quiet snapshot gives the same Start and
// Reject decisions without the Pending explanations and the Beaten options.
// It never starts more nodes on a site than the site has free.
package leastloaded
