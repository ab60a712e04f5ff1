package sshsite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// TestIdleConnectionsBounded: clients that connect and never speak are
// cut off after HandshakeTimeout and cannot hold more than their share:
// with twice MaxConns of them open, an authorized client still logs in,
// and the server is still accepting afterwards.
func TestIdleConnectionsBounded(t *testing.T) {
	s := startSiteCfg(t, Config{Dialect: SLURM, Nodes: 1, Cores: 1, Scale: 1, MaxConns: 8, HandshakeTimeout: time.Second})
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 16 {
		c, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	// Every idle connection is closed by the server: at once (over the
	// share) or after the handshake deadline.
	for i, c := range idle {
		c.SetReadDeadline(time.Now().Add(15 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("idle connection %d not closed by the server: %v", i, err)
		}
	}
	// An authorized client logs in while a new wave of idle ones is open.
	for range 16 {
		c, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	var err error
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		var c *ssh.Client
		if c, err = sshClient(t, s, s.cfg.User, keySigner(t, s.key)); err == nil {
			c.Close()
			break
		}
	}
	if err != nil {
		t.Fatalf("an authorized client could not log in past idle connections: %v", err)
	}
	if s.stats.refused.Load() == 0 {
		t.Error("no connection was refused over the limits")
	}
}

// TestAcceptSurvivesErrors: running out of file descriptors makes Accept
// fail; the server waits it out and serves again once descriptors are
// free, instead of stopping for good.
func TestAcceptSurvivesErrors(t *testing.T) {
	s := startSite(t, SLURM, 1, 1, 1)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// Use up the descriptors of this process (the server's too).
	var held []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		held = append(held, f)
		if len(held) > 1<<20 {
			t.Skip("no descriptor limit to run into")
		}
	}
	// One descriptor for the client's socket: the kernel queues the
	// connection, and the server's Accept, with none left, fails (EMFILE).
	held[len(held)-1].Close()
	held = held[:len(held)-1]
	raw, derr := net.DialTimeout("tcp", s.Addr(), 2*time.Second)
	if derr != nil {
		t.Fatalf("dialing with one descriptor free: %v", derr)
	}
	time.Sleep(300 * time.Millisecond)
	for _, f := range held {
		f.Close()
	}
	raw.Close()
	var err error
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		var c *ssh.Client
		if c, err = sshClient(t, s, s.cfg.User, keySigner(t, s.key)); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("the server does not serve after Accept failed (descriptor limit %d): %v", lim.Cur, err)
}

// TestSqueueWidthBounded: a format width no real answer needs is refused
// (it would make a line of 2 GiB per job), and an answer over maxOutput
// fails saying so instead of growing the site without bound.
func TestSqueueWidthBounded(t *testing.T) {
	s := startSite(t, SLURM, 2, 1, 1)
	if _, stderr, code := run(t, s, `mkdir -p j && cd j && printf '#!/bin/bash\nsleep 60\n' > a.sh && sbatch --parsable --time=10 a.sh`); code != 0 {
		t.Fatalf("sbatch: %d %s", code, stderr)
	}
	out, stderr, code := run(t, s, "squeue -h -O JobID:2147483647")
	if code == 0 || len(out) > maxFieldWidth || !strings.Contains(stderr, "Invalid job format") {
		t.Fatalf("squeue with a width of 2^31-1: exit %d, %d bytes out, stderr %q", code, len(out), stderr)
	}
	// Many wide fields: under the width bound each, over the output bound
	// together.
	f := strings.TrimSuffix(strings.Repeat("JobID:"+strconv.Itoa(maxFieldWidth)+",", maxOutput/maxFieldWidth+10), ",")
	out, stderr, code = run(t, s, "squeue -h -O "+f)
	if code == 0 || len(out) > 0 || !strings.Contains(stderr, "longer than") {
		t.Fatalf("squeue over the output bound: exit %d, %d bytes out, stderr %q", code, len(out), stderr)
	}
}

// TestCommandEndsWithItsSession: a command whose client disconnects is
// killed (its process group), not left running for nobody.
func TestCommandEndsWithItsSession(t *testing.T) {
	s := startSite(t, SLURM, 1, 1, 1)
	c, err := sshClient(t, s, s.cfg.User, keySigner(t, s.key))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(s.Home(), "pid")
	if err := ss.Start(fmt.Sprintf("echo $$ > %s; exec sleep 600", pidFile)); err != nil {
		t.Fatal(err)
	}
	var pid int
	for end := time.Now().Add(10 * time.Second); pid == 0 && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if pid == 0 {
		t.Fatal("the command did not start")
	}
	c.Close() // the client goes away
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		// A zombie until the server reaps it: ask /proc.
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(b), ") Z ") {
			return
		}
	}
	syscall.Kill(pid, syscall.SIGKILL)
	t.Fatal("the command of a disconnected client is still running 15 s later")
}

// TestCommandSocketOwned: a site stopping while another one runs in the
// same Dir leaves the other's command socket alone; a second site cannot
// start on a Dir a live one serves.
func TestCommandSocketOwned(t *testing.T) {
	a := startSite(t, SLURM, 1, 1, 1)
	cfg := a.cfg
	cfg.Listen = ""
	if _, err := Start(context.Background(), cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("a second site on a live site's dir: %v, want ErrConfig", err)
	}
	// The first one's socket still answers.
	if out, stderr, code := run(t, a, "squeue -h"); code != 0 {
		t.Fatalf("the first site after a refused second one: %d %q %q", code, out, stderr)
	}
	// A site that stops after a new one took the dir over leaves the
	// new one's socket: replace the socket file as a new site would.
	fi, _ := os.Lstat(a.sock)
	os.Remove(a.sock)
	other, err := net.Listen("unix", a.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	a.Close()
	if _, err := os.Lstat(a.sock); err != nil {
		t.Fatalf("the stopping site removed the socket another one made (it had made %v): %v", fi.Name(), err)
	}
}

// TestAuthorizedKeysBounded: --authorized-keys at a FIFO or /dev/zero is
// refused at once, never read.
func TestAuthorizedKeysBounded(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero"} {
		done := make(chan error, 1)
		go func() { _, err := ReadAuthorizedKeys(p); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("ReadAuthorizedKeys(%s) = %v", p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("ReadAuthorizedKeys(%s) hangs", p)
		}
	}
}
