package transport

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gridsub/gridsub/backends"
)

// startPrivateSSHD runs a throw-away OpenSSH sshd on a free loopback port
// with the given extra config lines, accepting the returned client key for
// the current user (root). It skips unless this runs as root with
// /usr/sbin/sshd installed (the testbed's install step provides it).
func startPrivateSSHD(t *testing.T, extra ...string) (Config, string) {
	t.Helper()
	const sshd = "/usr/sbin/sshd"
	if os.Geteuid() != 0 {
		t.Skip("private sshd needs root")
	}
	if _, err := os.Stat(sshd); err != nil {
		t.Skip("no /usr/sbin/sshd (apt-get install openssh-server; bash scripts/slurm-testbed.sh start installs it)")
	}
	if _, err := os.Stat("/run/sshd"); err != nil {
		t.Skip("sshd privilege separation directory /run/sshd is missing (bash scripts/slurm-testbed.sh start creates it)")
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	host := newEd25519Signer(t)
	hostBlk, err := ssh.MarshalPrivateKey(hostEd25519(t, host), "")
	if err != nil {
		t.Fatal(err)
	}
	hostKey := filepath.Join(dir, "host_ed25519")
	if err := os.WriteFile(hostKey, pem.EncodeToMemory(hostBlk), 0o600); err != nil {
		t.Fatal(err)
	}
	ck := newClientKey(t, "")
	authz := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authz, ssh.MarshalAuthorizedKey(ck.Pub), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	conf := filepath.Join(dir, "sshd_config")
	lines := append([]string{
		"ListenAddress 127.0.0.1",
		fmt.Sprintf("Port %d", port),
		"HostKey " + hostKey,
		"PidFile " + filepath.Join(dir, "sshd.pid"),
		"AuthorizedKeysFile " + authz,
		"StrictModes no", // the test dir lives under /tmp
		"UsePAM no",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PermitRootLogin prohibit-password",
		"AllowUsers " + me.Username,
		"Subsystem sftp internal-sftp",
		"LogLevel VERBOSE",
	}, extra...)
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "sshd.log")
	cmd := exec.Command(sshd, "-D", "-f", conf, "-E", logFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() || os.Getenv("DEBUG_SSHD") != "" {
			b, _ := os.ReadFile(logFile)
			t.Logf("sshd log:\n%s", b)
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logFile)
			t.Fatalf("sshd did not listen on %d: %v\n%s", port, err, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	kh := writeKnownHosts(t, knownHostsLineFor(fmt.Sprintf("[127.0.0.1]:%d", port), host.PublicKey()))
	return Config{Host: "127.0.0.1", Port: port, User: me.Username,
		KeyFiles: []string{ck.Path}, KnownHosts: []string{kh},
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}, logFile
}

// hostEd25519 digs the private key back out of a test signer.
func hostEd25519(t *testing.T, s ssh.Signer) any {
	t.Helper()
	k, ok := signerKeys.Load(s)
	if !ok {
		t.Fatal("signer not made by newEd25519Signer")
	}
	return k
}

// TestPrivateSSHDSessionLimit checks the refusal handling against OpenSSH
// itself: with "MaxSessions 2", sshd refuses the third session (OpenSSH
// 9.2 says "connect failed: open failed"); Run must back off and get
// through, and fail with ErrSessionLimit when nothing frees up.
func TestPrivateSSHDSessionLimit(t *testing.T) {
	cfg, _ := startPrivateSSHD(t, "MaxSessions 2")
	var logs syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.KeepAlive = 100 * time.Millisecond // and keepalives against the real thing
	ctx := ctxTimeout(t, 60*time.Second)
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Run(ctx, []string{"sh", "-c", fmt.Sprintf("sleep 0.3; echo %d", i)}, nil)
			if err != nil || string(res.Stdout) != fmt.Sprintf("%d\n", i) {
				t.Errorf("caller %d: %q %v", i, res.Stdout, err)
			}
		}()
	}
	wg.Wait()
	if !strings.Contains(logs.String(), "refused a session") {
		t.Errorf("sshd never refused a session; the backoff was not exercised. Log:\n%s", logs.String())
	}

	// Hold both sessions (a long command and the SFTP client), then ask
	// for a third until a deadline.
	st := c.Stager(t.TempDir())
	if _, err := st.Put(ctx, strings.NewReader("x"), "x", 0); err != nil {
		t.Fatal(err)
	}
	long, cancel := context.WithCancel(ctx)
	defer cancel()
	// (sshd refuses signal requests for root logins, "session signalling
	// requires privilege separation", so cancelling cannot end this sleep
	// early: it holds its session until it ends by itself.)
	go c.Run(long, []string{"sleep", "2"}, nil)
	time.Sleep(300 * time.Millisecond)
	_, err = c.Run(ctxTimeout(t, 800*time.Millisecond), []string{"true"}, nil)
	if !errors.Is(err, ErrSessionLimit) || !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("got %v, want ErrSessionLimit", err)
	}
	cancel()
	// Run waits through the refusals until the sleep has ended, on the same
	// connection, keepalives and all.
	if _, err := c.Run(ctxTimeout(t, 10*time.Second), []string{"true"}, nil); err != nil {
		t.Errorf("after the long command ended: %v", err)
	}
	if n := strings.Count(logs.String(), "ssh connected"); n != 1 {
		t.Errorf("%d connects, want 1", n)
	}
}

// dropProxy forwards TCP connections to target and cuts a connection once
// more than *dropAfter bytes went from client to server (then resets
// dropAfter to 0, so later connections live).
func dropProxy(t *testing.T, target string, dropAfter *atomic.Int64) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			t.Cleanup(func() { in.Close(); out.Close() })
			go func() { io.Copy(in, out); in.Close() }()
			go func() {
				defer out.Close()
				defer in.Close()
				buf := make([]byte, 32<<10)
				var sent int64
				for {
					n, err := in.Read(buf)
					if n > 0 {
						sent += int64(n)
						if k := dropAfter.Load(); k > 0 && sent > k {
							dropAfter.Store(0)
							return
						}
						if _, werr := out.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestPrivateSSHDDropMidUpload cuts the TCP connection to a real sshd in
// the middle of a Put: the Put fails as unavailable, nothing appears under
// the final name, and the retry reconnects, succeeds and removes the temp
// file the failed attempt left in OpenSSH's sftp-server.
func TestPrivateSSHDDropMidUpload(t *testing.T) {
	cfg, _ := startPrivateSSHD(t)
	var drop atomic.Int64
	port := dropProxy(t, fmt.Sprintf("127.0.0.1:%d", cfg.Port), &drop)
	hostLine, err := os.ReadFile(cfg.KnownHosts[0])
	if err != nil {
		t.Fatal(err)
	}
	cfg.KnownHosts = []string{writeKnownHosts(t, strings.Replace(strings.TrimSpace(string(hostLine)),
		fmt.Sprintf(":%d", cfg.Port), fmt.Sprintf(":%d", port), 1))}
	cfg.Port = port
	ctx := ctxTimeout(t, 60*time.Second)
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := t.TempDir()
	st := c.Stager(root)
	data := randomBytes(16<<20, 9)
	drop.Store(4 << 20)
	if _, err := st.Put(ctx, bytes.NewReader(data), "out/big.bin", 0); !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("Put over a cut connection: %v, want ErrUnavailable", err)
	}
	if _, err := os.Stat(filepath.Join(root, "out", "big.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the final name exists after a failed Put: %v", err)
	}
	if left := tempFiles(t, root); len(left) != 1 {
		t.Errorf("want the one orphaned temp file before the retry, have %v", left)
	}
	tr, err := st.Put(ctx, bytes.NewReader(data), "out/big.bin", 0)
	if err != nil || tr.SHA256 != sha(data) {
		t.Fatalf("retry: %+v %v", tr, err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "out", "big.bin")); !bytes.Equal(b, data) {
		t.Errorf("final file has %d bytes, want %d", len(b), len(data))
	}
	if left := tempFiles(t, root); len(left) > 0 {
		t.Errorf("temp files left after the retry: %v", left)
	}
}
