package api_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/gridsub/gridsub/bridge/api"
)

// TestCloseRemovesOnlyItsOwnSocket: a listener whose socket file was
// replaced by another server's (its own deleted meanwhile) leaves the
// other's file alone when it closes; the other still removes its own.
func TestCloseRemovesOnlyItsOwnSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "gsl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "gridsub.sock")
	first, err := api.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	second, err := api.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	secondFile, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	fi, err := os.Lstat(sock)
	if err != nil || !os.SameFile(fi, secondFile) {
		t.Fatalf("closing the first listener removed or replaced the second's socket: %v", err)
	}
	second.Close()
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the second listener's own socket is still there after Close: %v", err)
	}
}
