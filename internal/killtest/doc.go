// Package killtest holds the daemon kill test of the broker (issue 5): a
// `gridsub serve` child process runs many tiny jobs on the two real SLURM
// sites of the local testbed (scripts/slurm-testbed.sh) while the test
// SIGKILLs it at random moments and restarts it on the same state
// directory. At the end every job must exist exactly once, be completed,
// have run successfully exactly once at its site (counted in the job
// directories and the sites' jobcomp logs), and have a consistent event
// history.
//
// Real sites are needed because simulated sites live inside the daemon and
// die with it: only a site that outlives the daemon can show whether a
// crash made a job run twice or not at all.
//
// The package has no non-test code. The test skips without the testbed's
// environment or with -short; docs/daemon-kill-test.md says how to run it,
// its knobs (GRIDSUB_KILLTEST_*) and the measured numbers.
package killtest
