// Package bridge is the broker: the global queue, the scheduling cycle, the
// dispatch of plans through one backends.Backend per site, and the tracking of
// every grid job to a final state with an event history.
//
// # State
//
// Two types hold the broker's state, and only the broker's stages and
// features write it:
//
//	ledger     (ledger.go, ledger_writes.go) the jobs, the queue and the
//	           policy's view of it, the live list, the indices (remote job →
//	           grid job, held, group parents, reserved, to reconcile), the
//	           events for Options.OnEvent and the writes to the Store, behind
//	           its own lock, with the transitions (enqueue, queueLast,
//	           requeueAs, endAs, adopt, compactLive…) that keep them in step
//	site table (sitetable.go) the sites' configuration and capabilities,
//	           the links, and what was last seen of each site: size and node
//	           shape, node count, trust, outages, pushed changes
//
// Both are types of this package rather than packages of their own: their
// transitions read and write the job's in-memory state (the outcome held
// back while outputs are fetched, the track stage's marks), which is not
// part of the stored Job.
//
// # The cycle
//
// One cycle, Cycle(ctx, now), runs a pipeline of stages (cycle.go), each a
// small type in its own file whose run method reads and writes one
// cycleState, passed explicitly:
//
//	poll      (stage_poll.go) one batched Status call per polled site for
//	          every live component there, and the pushed changes → the jobs
//	          whose components changed; a site silent for
//	          TierOptions.DownAfter has lost its components (outage.go)
//	track     (stage_track.go) fold component states into job states: run,
//	          complete, fail, retry, the first replica to start or the first
//	          copy to succeed wins → the remote cancels that follow
//	cancel    (stage_cancel.go) send the cancels, each recorded in the
//	          duties record first (duties.go)
//	fetch     (stage_fetch.go) bring the outputs of ended jobs back; a job
//	          ends once they are here
//
// then the features' own steps, so that they see every job that ended in
// this cycle and what they queue is planned in it: release native
// reservations (reserve.go), watch abandoned tags (duties.go), release held
// jobs (deps.go), make group elements (group.go), expire deadlines
// (deadline.go), submit due backups and copies (copies.go); and, when a job
// is queued or a move is wanted:
//
//	snapshot  (stage_snapshot.go) Info from every site + the queue →
//	          policy.Snapshot
//	plan      (stage_plan.go) hold the jobs no eligible site can reach
//	          (unreachable.go), then policy.Planner.Plan (pure,
//	          deterministic)
//	dispatch  (stage_dispatch.go) record each decision on its job: Reject
//	          fails it, Reserve notes the predicted start, Start and
//	          Replicate write the dispatch intent → the jobs to submit
//	submit    (stage_submit.go) submit them, batched per site where a site
//	          can, and settle each job from its own components' outcomes
//
// and last the repetitive mapping of waiting jobs into the nodes the plan
// left free (remap.go).
//
// The submit stage (submitAll) is the only caller of Backend.Submit and the
// cancel stage (sendCancel) the only caller of Backend.Cancel: reservations,
// copies, moves and recovery hand them requests.
//
// # Features
//
// Each feature is a type over the ledger and the site table that names the
// other parts it uses: intake (validate.go: what Submit checks, feasible.go
// for whether any site can ever run a job), reservations (reserve.go:
// admission and late binding of advance reservations), copies (copies.go,
// tiers.go, recover_copies.go: the dependability tiers of SPEC.md §5 with
// Options.Tiers), remapper (remap.go, recover_remap.go: moves of waiting
// jobs with Options.Remap), groups (group.go, deps.go: arrays, sweeps,
// pipelines and dependencies), duties (duties.go, outage.go: cancels owed
// to sites and tags watched after the grace) and reconciler (recover.go:
// dispatch intents settled by their tags).
//
// Inputs that lie at a site (Request.SiteInputs, sitedata.go) set the
// job's data origin and size for the planner; just before a component is
// submitted they are linked into its job directory at their own site, or
// relayed through the broker to any other.
//
// After a restart, Recover reconciles every dispatch intent by its tag, with
// one SubmitGrace rule for single jobs and copies. Whether a job can ever
// run, its deadline included, is one rule (Feasible), the same for
// validate, the CLI and the daemon.
//
// The broker never reads the wall clock: now is an argument, so the same code
// runs live and inside a trace replay on virtual time. Every state change is
// written to a Store before it is acted on (MemStore in memory,
// bridge/store on disk).
package bridge
