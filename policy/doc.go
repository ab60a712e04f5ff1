// Package policy holds what every scheduling policy shares: the Snapshot a
// policy reads, the Plan it returns, the Status that explains a decision,
// the extension points' interfaces, and the run-time model of SPEC.md §1
// (equations 1–3).
//
// Policies are pure: no I/O, no wall clock, no global randomness. A Snapshot
// goes in, a Plan comes out, and the same Snapshot always gives the same Plan.
// That is what lets one policy drive a live broker and a 77,000-job trace
// replay alike.
//
// # Extension points
//
// One small interface per decision the broker delegates (Kinds lists them),
// each with Name(), its contract in its doc comment, plain policy types in
// and out, and a refusal given as a Status with reasons rather than an
// error (an error means something broke):
//
//	kind         interface                       built-ins (policy/registry)
//	planner      Planner, Incremental + Session  policy/coalloc, policy/benefit, policy/trust (trust-min-min)
//	feasibility  Feasibility                     capacity (policy/feasible)
//	admission    Admission → ReservationBook     drrm, srrm, srrm-random (policy/reserve)
//	trust        Trust                           paper002 (policy/trust)
//	tiering      Tiering                         dgjs (policy/dependable)
//	remap        Remap                           gain, benefit (policy/remap)
//
// Planner places the queued jobs each cycle. Feasibility says whether a
// request could ever run on the sites, at submission and while it waits
// (the deadline rule). Admission builds the book of advance reservations:
// admission when asked, binding when the window opens, the failure rule
// when a site fails or shrinks. Trust turns counted outcomes into per-site
// scores (Snapshot.Site.Trust), in the daemon and in replays that learn
// trust. Tiering gives a job its dependability tier and places its copies
// and backups. Remap picks the jobs waiting in a site's queue worth moving.
//
// The broker takes one implementation of each (bridge.Options.Planner and
// bridge.Options.Policies; nil = the built-in default), the configuration
// names them (broker.policy, feasibility, admission, trust, tiering,
// remap.policy), and policy/policytest checks any implementation against
// its contract.
package policy
