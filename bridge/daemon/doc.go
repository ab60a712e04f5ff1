// Package daemon runs the broker as a long-lived service: the engine behind
// `gridsub serve`.
//
//	             ┌──────────── Daemon.Run ─────────────────────────────────┐
//	CLI/clients ─┤ unix socket (0600) ──┐                                  │
//	             │ TCP + bearer token ──┼─► api.Server ──► service ──► *bridge.Broker
//	             │ /metrics (Prometheus)┘                   │               │  ▲
//	             │                                          ▼               │  │ Cycle, health,
//	             │                          bridge/store (SQLite, WAL)◄─────┘  │ history cleanup
//	             │ robfig/cron schedules ──► trigger ──► worker goroutine ─────┘
//	             │                                     (also advances the simulated
//	             │                                      sites' engine in scaled wall time)
//	             └──────────────────────────────────────────────────────────┘
//
// Run first takes the state directory's lock (LockStateDir: an flock on
// the directory itself, which no cleaner can unlink, with the pid in
// <state_dir>/gridsub.lock; a second daemon on the same directory fails
// with ErrLocked naming it, before touching anything there; a daemon whose
// directory is moved or made again stops dispatching, ErrLockLost), then opens the SQLite store in the state directory, assembles the sites
// (bridge/assemble) on it, calls Broker.Recover and logs its report,
// listens on the socket, and runs the periodic tasks until its context is
// cancelled (SIGTERM, SIGINT). Every task runs on the one worker goroutine,
// so a cycle, a health probe and the simulated engine never overlap; the
// cron entries only post triggers to it (a trigger that finds the worker
// busy is dropped, not queued: a late cycle is not followed by a burst).
//
// Tasks (configuration broker.cron, by name):
//
//	cycle            poll the sites, plan, dispatch (Broker.Cycle); default "@every <broker.interval>"
//	health           ask every site for its Info and store the probe (store.RecordProbe: a failure keeps the
//	                 last good numbers beside its error) with the link measured so far; failures count in
//	                 gridsub_site_errors_total; default "@every 1m"
//	reservation_binding  Broker.BindReservations: bind the admitted advance reservations whose window
//	                 opens within assemble.BindLead, create them at their site and submit their jobs
//	                 into them (SPEC.md §2, DRRM); default "@every 10s"
//	trust            recompute every site's trust (policy/trust, SPEC.md §3) from what the store
//	                 counted — jobs completed and failed there, outages the health probes found —
//	                 store it (SetTrust, gridsub_site_trust) and hand it to the policy
//	                 (Broker.SetTrust); default "@every 5m"; the stored scores are loaded at start
//	history_cleanup  delete ended jobs older than Options.Retention (store Prune); default "@daily"
//
// GET /v1/sites is answered from the store (service.SiteStatus): the
// configured sites with the health task's records, the outcome counts the
// store keeps, and trust when a trust policy has computed it. After a
// restart the previous run's records are served until the first probe,
// which comes on the health schedule (not at start).
//
// With simulated sites every schedule is evaluated on the simulated clock,
// Schedule.Next(virtualNow) (simcron.go): the worker checks after each
// advance of the engine (every Options.SimTick of wall time, so no task
// runs more often) which tasks are due in virtual time. "@every 10s" of
// reservation binding is then ten simulated seconds, the time the
// reservations' windows are written in; without simulated sites
// robfig/cron runs the schedules on the wall clock.
//
// A spec "@every D" with D under a second is honoured as written (robfig's
// own parser rounds it up to one second); other specs go to
// cron.ParseStandard. A name that is not a task is logged and ignored.
//
// Shutdown (context cancelled): the cron stops, the HTTP servers stop
// accepting and finish the requests in flight (closing the unix listener
// removes the socket file if it is still the one this daemon made), the
// worker finishes the task it is running, the simulated clock is saved, the
// store is closed and, last, the lock released.
//
// The unix socket also serves BackupRoute (POST /v1/store/backup: the
// store copied with VACUUM INTO into a path the caller names), never the
// TCP listener.
//
// Simulated sites live in the daemon's memory: their queues do not survive
// a restart. The store does, so after a restart every job is listed again;
// jobs that were dispatched to a simulated site are found lost by the first
// cycle and queued again (up to the broker's attempt limit). The virtual
// clock is saved in <state_dir>/sim-clock so it never goes back across
// restarts.
package daemon
