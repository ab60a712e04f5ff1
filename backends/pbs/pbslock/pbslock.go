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
	"path/filepath"
	"syscall"
	"testing"
)

// Hold blocks until t holds the testbed's lock (flock on a file beside
// the testbed, or in the temp directory) and releases it when t ends.
func Hold(t testing.TB) {
	t.Helper()
	dir := os.Getenv("GRIDSUB_PBS_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.OpenFile(filepath.Join(dir, "gridsub-tests.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatalf("the OpenPBS testbed's test lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("the OpenPBS testbed's test lock: %v", err)
	}
	t.Cleanup(func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}
