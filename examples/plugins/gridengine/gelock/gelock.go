// Package gelock serialises the tests that run jobs on the one Grid Engine
// testbed (scripts/sge-testbed.sh): `go test ./...` runs the packages that
// use it (examples/plugins/gridengine, cmd/gridsub) at the same time, and
// a whole-site job or a reservation of one would starve the other's.
//
// It is test support, imported only by _test files.
package gelock

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Hold blocks until t holds the testbed's lock (flock on a file in the
// testbed's directory, or in the temp directory) and releases it when t
// ends.
func Hold(t testing.TB) {
	t.Helper()
	dir := os.Getenv("GRIDSUB_GE_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.OpenFile(filepath.Join(dir, "gridsub-tests.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatalf("the Grid Engine testbed's test lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("the Grid Engine testbed's test lock: %v", err)
	}
	t.Cleanup(func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}
