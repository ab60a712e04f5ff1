// Package backends defines what gridsub needs from a site's batch system: the
// Backend interface, the optional Reserver capability, the Runner and Stager
// seams that remote backends use, and the shared types (JobSpec, SiteInfo,
// JobStatus) with their documented sentinel errors.
//
// A backend is one site. The broker holds one Backend per site and calls it
// from its cycle; a backend never decides where a job goes, it only does what
// it is told and reports what happened. Implementations live in
// backends/slurm, the simulated sites in simbackend, and every one of them
// must pass the conformance suite in backends/backendtest.
package backends
