// Package testlock serialises tests of different packages that need one
// shared testbed (or one site of it) to themselves: `go test ./...` runs
// packages at the same time, and their jobs, reservations and counts would
// disturb each other. pbslock, sitelock and the Grid Engine plugin's gelock
// are its users, each naming its testbed.
//
// It is test support, imported only by _test files and test-support
// packages.
package testlock

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Hold blocks until t holds the lock file name in dir (the temp directory
// when dir is "") and releases it when t ends; what names the resource in
// failure messages ("the OpenPBS testbed").
func Hold(t testing.TB, dir, name, what string) {
	t.Helper()
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatalf("the test lock of %s: %v", what, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("the test lock of %s: %v", what, err)
	}
	t.Cleanup(func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}
