// Package simbackend is gridsub's simulated testbed: a discrete-event engine
// on a virtual clock, simulated batch-system sites that implement the same
// backends.Backend interface as the SLURM and PBS dialects, the single-site
// EASY backfilling scheduler those sites run, a trace replay checked against
// a reference schedule, and pure scheduling metrics. See README.md.
package simbackend
