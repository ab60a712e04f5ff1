// Package assemble builds a running broker from a site configuration: one
// backend per site (simulated sites on a shared discrete-event engine, real
// sites over SSH), the named planner, the network model, and a Clock that
// drives cycles — scaled virtual time for simulated sites, the wall clock for
// real ones. The CLI and the daemon both start from here, so a job behaves the
// same whichever front end submitted it.
package assemble
