// Package sitelock serialises the tests that need one SLURM testbed site
// to themselves (scripts/slurm-testbed.sh): siteC is the site of the tests
// that count slurmctld's RPCs (backends/slurm TestBudgetHeldAtSlurmctld)
// and that stop its controller (bridge TestControllerOutageReal), and
// `go test ./...` runs those packages at the same time; each would see the
// other's jobs and RPCs.
//
// It is test support, imported only by _test files.
package sitelock

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gridsub/gridsub/backends/testlock"
)

// Hold blocks until t holds the lock of the testbed's site (flock on a
// file in the testbed's directory, or in the temp directory) and releases
// it when t ends.
func Hold(t testing.TB, site string) {
	t.Helper()
	testlock.Hold(t, os.Getenv("GRIDSUB_TESTBED_DIR"), "gridsub-tests-"+filepath.Base(site)+".lock", site)
}
