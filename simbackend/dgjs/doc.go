// Package dgjs is the simulation of paper 004's experiment (SPEC.md §5,
// Section 4 of the paper): independent single-processor jobs arrive at a
// grid of resources that fail and are repaired as simbackend/faults draws
// it, and one of three schedulers places them:
//
//	dgjs     tiers from deadlines (the tiering extension point, λ = 1.5) served
//	         high → low → none; Algorithm 1 (least RC among the resources
//	         whose idle gap fits and that meet the deadline); high →
//	         replication on the two least-RC resources, low → primary–backup,
//	         none → retry
//	min-min  least completion time, no reliability, no tiers; retry
//	refine   least RC (deadline-feasible resources), FCFS; primary–backup
//	         for every job
//
// DGJS's tier is the broker's: the built-in policy.Tiering "dgjs" opened
// with registry.Tiering decides it at arrival (Tier, from the deadline, the
// base run time as the estimate and the resources' run-time factors as the
// sites' H, so CT_min is the base run time on the fastest resource). The
// placement below is the simulator's own.
//
// Candidates are ranked and filtered by the very functions the live
// planner uses (dependable.Better, dependable.MeetsDeadline, dependable.Cost);
// RC comes from a policy/dependable.Predictor that learns the first
// History (48 h) of the failure log before the run starts (the paper builds
// its Markov model "from the simulated failure log") and is fed every
// failure and repair of the run as it happens; the run continues the same
// log, so it starts in the failure process's steady state.
//
// Every resource keeps a timeline of slots (the paper's idle gaps between
// the jobs already assigned to it). A job is placed when it arrives (or
// after a failure) into the earliest gap that fits its run time; its
// completion time is CT = (gap start − now) + run, the queue term SL of
// equation (7) being the wait for the gap; there is no data transfer
// (D = 0: the paper's jobs carry none that it describes). A backup goes as
// late as its deadline allows (the latest gap ending by it); it is active
// (it runs from its slot whatever the primary does) when its latest start
// is no later than the primary's expected end (equation 14), else passive
// (a reservation that runs only if the primary is lost, moved then to the
// earliest gap of its resource). A job without a deadline has no latest
// start: its backup is passive, reserved in the first gap after the
// primary's expected end. The first copy to complete wins; the others are
// cancelled at once.
//
// A failure kills the copy running on the resource and drops the slots
// planned there; the resource takes no work until repaired. A job that has
// lost every copy is re-placed (retry) while it has attempts left
// (MaxAttempts placement rounds) and its deadline can still be met; a job
// still unfinished at its deadline is abandoned (its copies cancelled) by
// every scheduler: a result after the deadline is a failure. Success ratio
// = jobs completed (by their deadline, if any) / jobs submitted; mean
// completion time = mean of completion − arrival over those jobs.
//
// A run is a pure function of its Config: the jobs, the failure log and the
// predictor's training log are drawn from the seed (one PCG stream each), so
// the three schedulers see the same jobs and the same failures (common
// random numbers) and a results table is the same byte for byte.
package dgjs
