package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/api"
)

// serveOnce runs `gridsub serve` expecting it to exit by itself within
// 20 s, and returns its exit code and stderr.
func serveOnce(t *testing.T, bin, state, sock string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, "GRIDSUB_")
	}), envStateDir+"="+state, envSocket+"="+sock)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("a gridsub serve that should have been refused still runs after 20s\n%s", errb.String())
	}
	return cmd.ProcessState.ExitCode(), errb.String()
}

func sockInode(t *testing.T, sock string) os.FileInfo {
	t.Helper()
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode()&fs.ModeSocket == 0 {
		t.Fatalf("no socket at %s: %v", sock, err)
	}
	return fi
}

func answers(t *testing.T, sock string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := api.NewUnixClient(sock).Health(ctx); err != nil {
		t.Fatalf("the daemon on %s does not answer: %v", sock, err)
	}
}

// TestOneDaemonPerStateDir: two real `gridsub serve` on one state
// directory. The second exits non-zero naming the first's pid and touches
// nothing: the first keeps its socket (the same inode) and still answers.
// A SIGKILL of the first frees the lock (the kernel drops the flock), and
// a new daemon starts on the same directory, replacing the stale socket.
func TestOneDaemonPerStateDir(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := buildBinary(t)
	d := t.TempDir()
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "state", "gridsub.sock")
	first := startServe(t, bin, state, sock)
	before := sockInode(t, sock)
	pid := strconv.Itoa(first.cmd.Process.Pid)

	for name, sock2 := range map[string]string{"same socket": sock, "another socket": filepath.Join(d, "other.sock")} {
		code, stderr := serveOnce(t, bin, state, sock2)
		if code != exitUsage || !strings.Contains(stderr, "pid "+pid) || !strings.Contains(stderr, "state directory is in use") ||
			!strings.Contains(stderr, "kill "+pid) {
			t.Fatalf("%s: second serve exited %d, want %d with a message naming pid %s and what to do:\n%s", name, code, exitUsage, pid, stderr)
		}
		if _, err := os.Lstat(filepath.Join(d, "other.sock")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: the refused daemon made a socket: %v", name, err)
		}
		if strings.Contains(stderr, "recovered") || strings.Contains(stderr, "store opened") {
			t.Fatalf("%s: the refused daemon got as far as the store:\n%s", name, stderr)
		}
	}
	if after := sockInode(t, sock); !os.SameFile(before, after) {
		t.Fatal("the first daemon's socket was replaced")
	}
	answers(t, sock)

	// SIGKILL: no clean-up at all, yet the lock is free at once.
	first.cmd.Process.Signal(syscall.SIGKILL)
	<-first.done
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("SIGKILL should leave the socket file behind: %v", err)
	}
	second := startServe(t, bin, state, sock) // fails the test if refused
	answers(t, sock)
	second.term(t, sock)
}

// TestStoppingLeavesAnothersSocket: a daemon whose socket path was taken
// over by another live daemon (its own socket was deleted meanwhile) does
// not remove the other's socket when it stops.
func TestStoppingLeavesAnothersSocket(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := buildBinary(t)
	d := t.TempDir()
	sock := filepath.Join(d, "shared.sock")
	a := startServe(t, bin, filepath.Join(d, "a"), sock)
	if err := os.Remove(sock); err != nil { // someone cleans up "stale" files
		t.Fatal(err)
	}
	b := startServe(t, bin, filepath.Join(d, "b"), sock)
	bSock := sockInode(t, sock)
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-a.done:
		if err != nil {
			t.Fatalf("daemon a after SIGTERM: %v\n%s", err, a.logs)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("daemon a did not stop")
	}
	if fi := sockInode(t, sock); !os.SameFile(fi, bSock) {
		t.Fatal("b's socket was replaced")
	}
	answers(t, sock)
	b.term(t, sock)
}

// TestAdviceWhenADaemonHoldsTheStateDir: no daemon answers on the socket
// the CLI looks at, but one holds the state directory (it serves another
// socket path): the CLI names it and does not advise starting another.
func TestAdviceWhenADaemonHoldsTheStateDir(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := buildBinary(t)
	d := t.TempDir()
	state := filepath.Join(d, "state")
	p := startServe(t, bin, state, filepath.Join(d, "real.sock"))
	t.Setenv(envStateDir, state)
	t.Setenv(envSocket, filepath.Join(d, "wrong.sock"))
	code, _, stderr := cli("list")
	pid := strconv.Itoa(p.cmd.Process.Pid)
	if code != exitInternal || !strings.Contains(stderr, "gridsub pid "+pid+" holds the state directory") ||
		!strings.Contains(stderr, "Do not start a second daemon") || strings.Contains(stderr, "gridsub serve &") {
		t.Fatalf("list with the daemon on another socket: exit %d\n%s", code, stderr)
	}
	p.term(t, filepath.Join(d, "real.sock"))
	// Once it stopped, starting one is the right advice again.
	code, _, stderr = cli("list")
	if code != exitInternal || !strings.Contains(stderr, "start one with `gridsub serve &`") {
		t.Fatalf("list with no daemon: exit %d\n%s", code, stderr)
	}
}
