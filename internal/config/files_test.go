package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// parseWithin parses src and fails the test if that takes more than 10 s
// (a FIFO opened for reading blocks until a writer comes).
func parseWithin(t *testing.T, src string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := Parse("s.yaml", []byte(src), env(map[string]string{"HOME": t.TempDir()}))
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("parsing the configuration hangs")
		return nil
	}
}

// TestNamedFilesAreBounded: a file the configuration names (ssh.key_file,
// ssh.known_hosts, broker.tls_cert, broker.tls_key) that is a FIFO, a
// device or too large is refused when the configuration loads, with the
// key — not read later by the daemon, where a FIFO hangs it and /dev/zero
// exhausts its memory. A missing file is left to its reader.
func TestNamedFilesAreBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, MaxKeyFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	site := "sites:\n  - {name: R, kind: slurm, remote_dir: /scratch, ssh: {host: h, user: u, key_file: %s, known_hosts: %s}}\n"
	for _, tc := range []struct {
		name, src, key, text string
	}{
		{"key FIFO", fmt.Sprintf(site, fifo, good), "sites[0].ssh.key_file", "named pipe"},
		{"known_hosts FIFO", fmt.Sprintf(site, good, fifo), "sites[0].ssh.known_hosts", "named pipe"},
		{"key /dev/zero", fmt.Sprintf(site, "/dev/zero", good), "sites[0].ssh.key_file", "character device"},
		{"known_hosts /dev/zero", fmt.Sprintf(site, good, "/dev/zero"), "sites[0].ssh.known_hosts", "character device"},
		{"key too large", fmt.Sprintf(site, big, good), "sites[0].ssh.key_file", "at most"},
		{"key a directory", fmt.Sprintf(site, dir, good), "sites[0].ssh.key_file", "directory"},
		{"tls_cert FIFO", "sites: [{name: A, kind: sim, nodes: 1}]\nbroker: {tls_cert: " + fifo + ", tls_key: " + good + "}\n", "broker.tls_cert", "named pipe"},
		{"tls_key /dev/zero", "sites: [{name: A, kind: sim, nodes: 1}]\nbroker: {tls_cert: " + good + ", tls_key: /dev/zero}\n", "broker.tls_key", "character device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parseWithin(t, tc.src)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.key+": ") || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Parse = %v, want ErrInvalid at %s saying %q", err, tc.key, tc.text)
			}
		})
	}
	if err := parseWithin(t, fmt.Sprintf(site, good, filepath.Join(dir, "missing"))); err != nil {
		t.Fatalf("a regular key file and a missing known_hosts: %v (the transport reports a missing file)", err)
	}
}

// TestReadRegular: what a flag names (--token-file) is read as a regular
// file of bounded size, never blocking on a FIFO.
func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero", dir} {
		if _, err := ReadRegular("--token-file", p, MaxTokenFile); err == nil || !strings.HasPrefix(err.Error(), "--token-file: ") {
			t.Fatalf("ReadRegular(%s) = %v, want an error naming the flag", p, err)
		}
	}
	ok := filepath.Join(dir, "tok")
	os.WriteFile(ok, []byte("secret\n"), 0o600)
	if b, err := ReadRegular("--token-file", ok, MaxTokenFile); err != nil || string(b) != "secret\n" {
		t.Fatalf("ReadRegular of a regular file = %q, %v", b, err)
	}
}
