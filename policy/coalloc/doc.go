// Package coalloc is the multi-site co-allocation scheduler of paper 000
// (Zhang et al., SPEC.md §1) and its baselines, as pure, deterministic
// policy.Planners.
//
// One Plan call is one pass of Algorithm 1 over the global FCFS queue:
//
//	for each job in queue order:
//	    admit      reject a job no allowed sites could ever hold (with the
//	               width and the capacity in the reason); leave one waiting
//	               while the sites it needs are down
//	    select     a Selector (Greedy = Algorithm 3, Optimal = Algorithm 2,
//	               SingleSite, NonAdaptive) evaluates placements on the
//	               availability profiles: immediate on nodes free for the
//	               whole hold, reserved at the earliest common start
//	    decide     best is immediate       -> Start (taken from the profiles)
//	               no job waits yet        -> Reserve: it becomes the head
//	               Backfill "none"         -> later jobs wait (strict FCFS)
//	               Backfill "easy"         -> a later job starts only if its best
//	                                          placement is immediate; it cannot
//	                                          touch the head's reserved nodes
//	               Backfill "conservative" -> every later job is started or
//	                                          reserved in order, around all the
//	                                          reservations made before it
//
// The availability profile of a site is a step function of free nodes over
// time built from Site.Free and Site.Busy; starts and reservations of the
// pass are taken out of it, so every later question sees them (the Start
// parts of a site never exceed its free nodes). Predicted run and transfer
// times are the model of equations 1–3 (policy.Snapshot.Runtime, Transfer);
// a placement holds its nodes for transfer + run.
//
// A multi-site placement fills the width fastest site first (by h, index on
// ties; by h/trust when sites have trust scores below 1), each site up to
// the nodes it has free over the whole hold, every site at least one node; a site left with nothing drops out and the model
// is recomputed for the sites actually used. A reserved placement on several
// sites starts at the first time the sites together keep the width free for
// the hold (for one site that is the paper's T_available).
//
// Candidates are ranked by predicted end divided by their trust (the
// product of their sites' Site.Trust, SPEC §3; exactly the end when no
// site has a score below 1), then predicted end, then immediate before
// reserved, then fewer sites, then a preferred site, then lower site
// indices. The
// search prunes placements that cannot beat the best found so far, so
// Decision.Beaten holds the runner-ups met on the way (a few), not a full
// ranking. Jobs left waiting without a decision are listed in Plan.Pending
// with their reason. No wall clock and no randomness: equal snapshots give
// equal plans.
//
// Errors: Plan fails only on a snapshot the model cannot use
// (ErrBadSnapshot), on Optimal over too many sites (ErrTooManySites) and on
// a cancelled context; New and ByName fail with ErrBadOption.
//
// The baselines (Options.Mode): "single-site" (Yahyapour: one site per job,
// earliest completion, same backfilling), "non-adaptive" (Yahyapour
// multi-site under a homogeneity assumption: local > remote single site >
// multi-site, blind to h and p) and "sabin" (Sabin's multi-queue: a Replicate
// decision copying every job to every site able to run it alone).
//
// A Planner is also a policy.Incremental: NewSession gives a Session that
// makes the very passes Plan makes (the same code, Quiet) on a snapshot it
// keeps up to date from the changes its caller reports (submissions, holds
// taken and released), for a trace replay that runs the sites itself. What
// Plan's memo must verify by comparing the queue and every hold with the
// last pass's, a session knows; it also keeps each site's profile while the
// site's holds are unchanged. TestPropertySessionMatchesPlan holds a Session
// to Plan through random sequences of changes.
//
// Build planners with New(Options{...}) or ByName("greedy-easy"); Names
// lists the names. See README.md for the diagram and docs/policy.md for the
// measured costs.
package coalloc
