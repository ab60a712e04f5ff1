// Package gelock serialises the tests that run jobs on the one Grid Engine
// testbed (scripts/sge-testbed.sh): `go test ./...` runs the packages that
// use it (examples/plugins/gridengine, cmd/gridsub) at the same time, and
// a whole-site job or a reservation of one would starve the other's.
//
// It is test support, imported only by _test files.
package gelock

import (
	"os"
	"testing"

	"github.com/gridsub/gridsub/backends/testlock"
)

// Hold blocks until t holds the testbed's lock (flock on a file in the
// testbed's directory, or in the temp directory) and releases it when t
// ends.
func Hold(t testing.TB) {
	t.Helper()
	testlock.Hold(t, os.Getenv("GRIDSUB_GE_DIR"), "gridsub-tests.lock", "the Grid Engine testbed")
}
