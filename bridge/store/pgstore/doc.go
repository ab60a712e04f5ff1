// Package pgstore is the broker's durable state in a PostgreSQL database:
// a store.Store (the same contract and the same conformance suite,
// storetest.Durable, as the SQLite store) through github.com/jackc/pgx/v5,
// which several brokers may share.
//
//	s, err := pgstore.Open(ctx, pgstore.Config{DSN: "host=db user=gridsub dbname=gridsub", PasswordFile: "/etc/gridsub/pgpass"}, pgstore.Options{})
//
// The password is never in the DSN (Open refuses one there,
// ErrPasswordInConfig) and never in an error or a log: messages name the
// database as postgres://user@host:port/db (Where).
//
// Schema: the tables of store schema 5 (store.DumpTables), then the
// leadership tables, versioned in gridsub_migrations and applied at Open
// in one transaction under an advisory lock; a database of a newer
// gridsub is refused (store.ErrNewerSchema) and left as it is (schema.go).
//
// Writes: one transaction each, committed before they return; a new job
// is one statement. Reads: one statement, or a repeatable-read snapshot
// when a list needs the events too. Dump and LoadDump are the portable
// dump (store.WriteDump); Verify is gridsub store check.
//
// Several brokers (lease.go): a lease row with a fencing epoch that every
// write of the leader checks in its own transaction (ErrFenced), the
// brokers' heartbeats, and the handoff of a follower's submissions to the
// leader. bridge/daemon's shared mode drives them.
//
// pgtest runs a real PostgreSQL for the tests.
package pgstore
