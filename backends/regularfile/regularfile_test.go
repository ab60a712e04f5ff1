package regularfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	d := t.TempDir()
	ok := filepath.Join(d, "ok")
	os.WriteFile(ok, []byte("hello"), 0o600)
	big := filepath.Join(d, "big")
	os.WriteFile(big, make([]byte, 100), 0o600)
	fifo := filepath.Join(d, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(ok, 5); err != nil || string(b) != "hello" {
		t.Fatalf("ok: %q %v", b, err)
	}
	cases := []struct {
		path string
		want error
		says string
	}{
		{big, ErrTooLarge, "100 bytes; at most 99"},
		{fifo, ErrNotRegular, "named pipe (FIFO)"},
		{d, ErrNotRegular, "a directory"},
		{"/dev/zero", ErrNotRegular, "character device"},
		{filepath.Join(d, "missing"), fs.ErrNotExist, "missing"},
	}
	for _, c := range cases {
		done := make(chan error, 1)
		go func() { _, err := Read(c.path, 99); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), filepath.Base(c.path)) {
				t.Errorf("%s: %v, want %v saying %q", c.path, err, c.want, c.says)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Read blocked", c.path)
		}
	}
}
