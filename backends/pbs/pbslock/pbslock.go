// Package pbslock serialises the tests that run jobs on the one OpenPBS
// testbed (scripts/pbs-testbed.sh): it has a single execution vnode, and
// `go test ./...` runs the packages that use it (backends/pbs,
// bridge/plugins, cmd/gridsub) at the same time, so their exclusive jobs,
// reservations and timing checks starved each other under load.
//
// It is test support, imported only by _test files.
package pbslock

import (
	"os"
	"testing"

	"github.com/gridsub/gridsub/backends/testlock"
)

// Hold blocks until t holds the testbed's lock (flock on a file beside
// the testbed, or in the temp directory) and releases it when t ends.
func Hold(t testing.TB) {
	t.Helper()
	testlock.Hold(t, os.Getenv("GRIDSUB_PBS_DIR"), "gridsub-tests.lock", "the OpenPBS testbed")
}
