package api_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/api"
)

// TestTLSFilesAreBounded: a certificate, key or CA file that is a FIFO or
// a device is refused at once (ErrTLS), never read: a FIFO would hang the
// daemon's start, /dev/zero would exhaust its memory.
func TestTLSFilesAreBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "key.pem")
	os.WriteFile(key, []byte("not a key"), 0o600)
	cert := filepath.Join(dir, "cert.pem")
	os.WriteFile(cert, []byte("not a cert"), 0o600)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"cert FIFO", func() error { _, err := api.ServerTLS(fifo, key); return err }},
		{"cert /dev/zero", func() error { _, err := api.ServerTLS("/dev/zero", key); return err }},
		{"CA FIFO", func() error { _, err := api.ClientTLS(fifo); return err }},
		{"CA /dev/zero", func() error { _, err := api.ClientTLS("/dev/zero"); return err }},
	} {
		done := make(chan error, 1)
		go func() { done <- tc.call() }()
		select {
		case err := <-done:
			if !errors.Is(err, api.ErrTLS) {
				t.Errorf("%s: %v, want ErrTLS", tc.name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: hangs", tc.name)
		}
	}
}
