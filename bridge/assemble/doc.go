// Package assemble builds a running broker from a Spec: one backend per
// site, the planner, the network model, and a Clock that drives cycles —
// scaled virtual time for simulated sites, the wall clock for real ones. The
// CLI and the daemon both start from here, so a job behaves the same
// whichever front end submitted it.
//
// Backends and planners come from the plugin catalog (bridge/plugins): a
// SiteSpec's Backend describes the site once and plugins.Build makes it in
// its mode — in process (simulated sites on the broker's shared engine),
// isolated, or an external plugin behind a supervisor; a SiteSpec without
// one is the built-in of its Kind in process; Open stands in for the catalog
// with a backend the caller made (fakesite's test sites). The planner is
// plugins.Policy of kind planner; a planner plugin runs behind a
// plannerrpc.Fallback whose restarts and switch this package reports
// (PluginEvent) and lists (Env.PlannerPlugin).
package assemble
