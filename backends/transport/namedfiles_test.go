package transport

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends/regularfile"
)

// TestNamedFilesBounded: a known_hosts file or a key file that is a FIFO
// or a device is refused at once, naming it — never read until it ends (a
// file swapped after the configuration was checked meets the same rule).
func TestNamedFilesBounded(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{fifo, "/dev/zero"} {
		done := make(chan error, 2)
		go func() {
			_, err := newHostKeys(Config{KnownHosts: []string{f}})
			done <- err
		}()
		go func() {
			_, err := readKey(context.Background(), &endpoint{label: "test"}, f, &keyring{}, nil)
			done <- err
		}()
		for range 2 {
			select {
			case err := <-done:
				if !errors.Is(err, regularfile.ErrNotRegular) || !strings.Contains(err.Error(), f) {
					t.Errorf("%s: %v, want a refusal naming it", f, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: blocked", f)
			}
		}
	}
}
