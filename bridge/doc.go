// Package bridge is the broker: the global queue, the scheduling cycle, the
// dispatch of plans through one backends.Backend per site, and the tracking of
// every grid job to a final state with an event history.
//
// One cycle, Cycle(ctx, now), does, in order:
//
//	poll      one batched Status call per site for every live component there
//	track     fold component states into job states; cancel the siblings of a
//	          failed component; withdraw the losing copies of a replicated job;
//	          fetch outputs of ended jobs
//	watch     look abandoned tags up and cancel submissions that landed after
//	          the restart's grace (duties.go)
//	release   queue the held jobs whose dependencies are met, cancel those
//	          whose dependencies failed (deps.go)
//	groups    make the elements of arrays, sweeps and pipelines their limit
//	          has room for; end the groups whose elements all ended (group.go)
//	snapshot  Info from every site + the queue → policy.Snapshot
//	plan      policy.Planner.Plan (pure, deterministic)
//	dispatch  Start → submit every component; Replicate → submit a copy per
//	          site; Reject → fail the job with the policy's reasons;
//	          Reserve → note the predicted start
//
// Inputs that lie at a site (Request.SiteInputs, sitedata.go) set the
// job's data origin and size for the planner; just before a component is
// submitted they are linked into its job directory at their own site, or
// relayed through the broker (read at their site into a private spool
// file, staged at the executing site) to any other.
//
// With Options.Tiers the broker runs the dependability tiers of SPEC.md §5
// (tiers.go, copies.go, recover_copies.go): each job gets a tier at
// submission (high, low, none), the queue is served high → low → none, a
// high job runs two copies at once (the first to succeed wins), a low job a
// primary and a backup, a none job is retried elsewhere after a failure; a
// site that keeps failing its status calls for TierOptions.DownAfter has
// lost the components it runs. A TierOptions.Reliability model hears of
// every outage, recovery and site loss (outage.go, losses.go: IsSiteLoss
// says what a loss is).
//
// After a restart, Recover reconciles every dispatch intent by its tag
// (recover.go, recover_copies.go: one SubmitGrace rule for single jobs and
// copies). What the broker owes the sites beyond its live jobs — cancels
// not yet taken, tags given up after the grace — is durable too (duties.go).
// Whether a job can ever run, its deadline included, is one rule
// (feasible.go: Feasible), the same for validate, the CLI and the daemon.
//
// The broker never reads the wall clock: now is an argument, so the same code
// runs live and inside a trace replay on virtual time. Every state change is
// written to a Store before it is acted on; the in-memory store here is the
// default until the durable store lands (bridge/store).
package bridge
