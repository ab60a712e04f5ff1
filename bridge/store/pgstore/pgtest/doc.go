// Package pgtest runs a real PostgreSQL server for tests: Debian's
// binaries (/usr/lib/postgresql/<version>/bin, or initdb and postgres on
// PATH), a cluster made with initdb in a temporary directory, listening on
// 127.0.0.1 at a free port and on a unix socket in that directory, with
// scram-sha-256 password authentication.
//
// One server per test binary: TestMain calls Main, each test asks for a
// fresh database with DB.
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestX(t *testing.T) {
//		db := pgtest.DB(t) // skips with the reason when no server could start
//		s, err := pgstore.Open(ctx, db.Config(), pgstore.Options{})
//	}
//
// Running as root (as CI does), initdb and postgres run as the "postgres"
// user and the cluster's directory belongs to it. The server is stopped
// by its pid (fast shutdown) when the tests end. Without the binaries,
// every DB call skips with a message saying what to install.
package pgtest
