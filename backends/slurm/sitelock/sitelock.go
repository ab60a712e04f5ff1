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
	"syscall"
	"testing"
)

// Hold blocks until t holds the lock of the testbed's site (flock on a
// file in the testbed's directory, or in the temp directory) and releases
// it when t ends.
func Hold(t testing.TB, site string) {
	t.Helper()
	dir := os.Getenv("GRIDSUB_TESTBED_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.OpenFile(filepath.Join(dir, "gridsub-tests-"+filepath.Base(site)+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatalf("the test lock of %s: %v", site, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("the test lock of %s: %v", site, err)
	}
	t.Cleanup(func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}
