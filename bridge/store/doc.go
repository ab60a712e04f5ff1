// Package store is the broker's durable state: a bridge.Store in one SQLite
// file, through the pure-Go driver modernc.org/sqlite (no cgo).
//
//	s, err := store.Open(ctx, filepath.Join(stateDir, "gridsub.db"), store.Options{})
//	...
//	defer s.Close()
//	b, err := bridge.New(bridge.Options{Store: s, ...})
//
// # Schema
//
//	schema_version(version)                      one row: the schema this file has
//	jobs(seq PK, id UNIQUE, state, name, sites,  one row per grid job; seq is the
//	     updated, n_events, body)                submission order (first Put), body the
//	                                             bridge.Job as JSON without its events
//	job_sites(site, seq) PK(site, seq)           the distinct sites of a job's components
//	events(seq, n, time, kind, site, msg)        append-only history, PK(seq, n)
//	counters(name PK, value)                     'next_id': the end of the last block of
//	                                             job numbers NextID reserved
//	kv(key PK, value, updated)                   the broker's other state (the job id
//	                                             prefix, the learned availability model
//	                                             "reliability.predictor", ...): SetValue,
//	                                             Value, Values (bridge.ValueStore)
//	sites(name PK, probed, error, ok_at, nodes,  site health (schema 3): the last probe
//	      free_nodes, queued, running, link_at,  and its error apart from the numbers of
//	      bytes_per_s, latency_ns, completed,    the last good one, the measured link,
//	      failed, trust, trust_at)               job outcomes, trust (NULL: not computed)
//
// Open creates a missing state directory (0700) and database file (0600):
// job requests may carry environment values nobody else should read.
// Prune deletes ended jobs last written before a time (history cleanup);
// Health suits the API's health check.
//
// Indexes: jobs(state, seq) serves List(Filter{States}) in submission order,
// jobs(name, seq) Filter.Name, job_sites' primary key Filter.Site,
// jobs(updated) a future history cleanup. Filter.After is resolved to the
// cursor job's seq, so paging is a range scan. A list of the ~1,000 running
// jobs among 100,000 reads only those rows (see docs/store.md for numbers).
//
// The whole bridge.Job goes into body as JSON (every field of it is
// exported). The columns beside it are copies of what the filters need. A
// Put of a job that is already stored updates its row, rewrites its
// job_sites only when its placement changed, and inserts only the events
// beyond n_events (the Store contract: events only grow between two Puts).
//
// # Site health
//
// SiteHealthStore (RecordProbe, SetTrust, SiteHealth) is the durable record
// of the sites beside the jobs. The daemon's health task records every
// probe: a successful one replaces the site's numbers, a failed one only
// its time and error, so the last good numbers survive an outage and a
// restart (SiteHealth.LastOK says when they were true). A measured link
// replaces the stored one; a probe without one (nothing timed yet, e.g.
// after a restart) leaves it. Trust is NULL until a trust policy calls
// SetTrust; nothing in the store computes it. Put counts outcomes: the Put
// that first stores a job as completed or failed adds one at each of the
// job's sites, in the same transaction, so every outcome is counted once;
// Prune does not lower the counts.
//
// # Durability
//
// The file is in WAL mode with synchronous=FULL: a transaction is on disk
// (the WAL fsynced) before Put returns, so a committed job survives a
// process crash and a power cut alike. (synchronous=NORMAL would survive a
// process crash but could lose the last commits on power loss; gridsub acts
// on what it stored — submits to a site — so it takes FULL.)
//
// An fsync costs milliseconds, so writes go through one commit loop that
// does group commit: every Put waiting when a commit starts joins it, each
// under its own savepoint (a failing Put does not undo its neighbours), and
// one fsync makes the whole batch durable. One writer alone gets one fsync
// per Put; many concurrent writers (API requests) share them. Readers (Get,
// List) use their own connections and a read transaction each, so they see a
// consistent snapshot and never wait for the writer.
//
// NextID reserves blocks of numbers (Options.IDBlock, default 100) with one
// durable write and hands them out from memory. The block's end is
// committed before any number of it is used, so no number is handed out
// twice — not after a crash (the rest of the block is skipped) and not by
// two processes sharing the file.
//
// # Migrations
//
// Migrations are an ordered, append-only list; Open applies all pending
// ones in one write transaction and records the new version in
// schema_version. Version 1 has the jobs; version 2 adds kv; version 3
// adds sites and counts the outcomes of the jobs already ended
// (TestMigrateFromVersion1 and TestMigrateFromVersion2 open older files
// with jobs in them). A
// database whose version is newer than the binary knows
// is refused with ErrNewerSchema naming both versions ("upgrade gridsub")
// and is never migrated down or written.
//
// # Failures
//
// Open looks before it touches. Only a missing file becomes a new
// database, made under a temporary name and linked into place. An existing
// file is checked through a connection that cannot write it (immutable
// when no WAL waits to be replayed, so nothing is created beside it): its
// header (an empty file is refused), its schema version, and SQLite's
// quick_check. A file that is empty, not SQLite, truncated or damaged, or a
// SQLite file gridsub did not create gives ErrCorrupt naming the file and
// telling how to restore a backup; a newer schema gives ErrNewerSchema; a
// path that cannot be read (permissions, a directory in its place) gives
// ErrUnavailable. In each case the file is left byte for byte as it was
// (the tests check its sha256 and the directory's listing).
//
// Health probes what the store needs to go on keeping jobs — that the file
// is still the one opened and writable, the file system not read-only nor
// full, a one-row durable write succeeds — reusing its answer for a few
// seconds, and runs a background quick_check every Options.CheckEvery;
// damage seen by any read or write is reported from then on. Check,
// Backup (VACUUM INTO), BackupFile and Restore are gridsub store's check,
// backup and restore.
//
// A write on a full file system (or beyond Options.MaxPages) fails with
// ErrDiskFull; nothing of that write is committed and everything committed
// before stays readable, in this process and after reopening. A lock held
// by another process beyond Options.BusyTimeout gives ErrUnavailable.
// Every error names the database file.
package store
