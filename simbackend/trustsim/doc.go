// Package trustsim runs paper 002's experiment (SPEC.md §3): meta-tasks on
// a grid of clusters grouped in local areas, some clusters failing in every
// run, the unfinished tasks of a failed cluster migrated, and trust learned
// from run to run. Trust-Min-min (policy/trust.MinMin with trust) is compared
// with plain Min-min (no trust, no QoS classes) on the same draws.
//
//	Config ──► world (cluster powers, areas, which clusters are flaky)
//	       ──► for run 1..Runs: draw tasks and failures (the same for every
//	           policy of one seed) ──► plan ──► fail clusters at a share of
//	           the planned makespan ──► migrate (bundle | one by one)
//	           ──► record outcomes ──► learn trust (Trust-Min-min only)
//	       ──► []RunResult: makespan, migrations, per run
//
// Trust is the paper's cluster-to-cluster trust of the submitting cluster in
// the target. Trust-Min-min (the default) divides by the paper's formula as
// written, α·Direct + β·Indirect with Direct = (Σ ω_k·p_k)(1 − ρ) and
// p_k ∈ {0, 1, 3} (trust.Model.Trust): it rises toward clusters stronger
// than the submitter and falls with the failures of the work moved there.
// trust-min-min-score divides by gridsub's normalised score in (0, 1]
// (trust.Model.Score, or Config.Trust), a pooled success rate. Both use, at
// the local-area level, the same model between areas over the outcomes
// pooled by area. Everything is deterministic for a seed.
package trustsim
