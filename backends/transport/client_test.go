package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gridsub/gridsub/backends"
)

// fixture is a test server plus a matching client configuration.
type fixture struct {
	srv  *testServer
	key  clientKey
	host ssh.Signer
	kh   string // known_hosts file listing host
	cfg  Config
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{key: newClientKey(t, ""), host: newEd25519Signer(t)}
	f.srv = startServer(t, f.key.Pub, f.host)
	f.kh = writeKnownHosts(t, f.srv.KnownHostsLine(f.host.PublicKey()))
	f.cfg = Config{
		Host: "127.0.0.1", Port: f.srv.Port, User: "griduser",
		KeyFiles: []string{f.key.Path}, KnownHosts: []string{f.kh},
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	return f
}

func (f *fixture) dial(t testing.TB) *Client {
	t.Helper()
	c, err := Dial(context.Background(), f.cfg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testWriter sends slog output to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// syncBuffer is a bytes.Buffer safe for concurrent writes (for slog).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestRunQuotingEndToEnd(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	canary := filepath.Join(f.srv.Home(), "canary")
	if err := os.WriteFile(canary, []byte("still here"), 0o644); err != nil {
		t.Fatal(err)
	}
	owned := filepath.Join(t.TempDir(), "owned")
	args := []string{
		"$(touch " + owned + "); rm -rf ~",
		"`touch " + owned + "`",
		"it's \"quoted\"",
		"two\nlines",
		"  spaces  ",
		"*",
		"~",
		"#not a comment",
		"a=b",
		"",
		"back\\slash",
		"; touch " + owned,
		"| cat",
		"$HOME",
		"tab\there",
		"!bang",
		"{a,b}",
		"ünïcödé",
	}
	res, err := c.Run(ctxTimeout(t, 10*time.Second), append([]string{"printf", `%s\n`}, args...), nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	want := strings.Join(args, "\n") + "\n"
	if string(res.Stdout) != want {
		t.Errorf("stdout\n got %q\nwant %q", res.Stdout, want)
	}
	if _, err := os.Stat(owned); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists: an argument was executed by the remote shell", owned)
	}
	if _, err := os.Stat(canary); err != nil {
		t.Errorf("canary in the sandbox HOME is gone: %v", err)
	}
}

func TestRunExitCodeStdinStderr(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	ctx := ctxTimeout(t, 10*time.Second)

	res, err := c.Run(ctx, []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, nil)
	if err != nil {
		t.Fatalf("a non-zero exit must not be an error: %v", err)
	}
	if res.ExitCode != 3 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Errorf("got exit %d stdout %q stderr %q; want 3 %q %q", res.ExitCode, res.Stdout, res.Stderr, "out\n", "err\n")
	}
	if res.Duration <= 0 {
		t.Errorf("duration %v", res.Duration)
	}

	res, err = c.Run(ctx, []string{"tr", "a-z", "A-Z"}, strings.NewReader("script body\n"))
	if err != nil || string(res.Stdout) != "SCRIPT BODY\n" {
		t.Errorf("stdin: got %q, %v", res.Stdout, err)
	}

	res, err = c.Run(ctx, []string{"no-such-program-gridsub"}, nil)
	if err != nil || res.ExitCode != 127 {
		t.Errorf("missing program: exit %d err %v, want 127 nil", res.ExitCode, err)
	}
}

func TestRunRejectsBadArgv(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	for _, argv := range [][]string{nil, {}, {"echo", "nul\x00byte"}} {
		if _, err := c.Run(context.Background(), argv, nil); !errors.Is(err, backends.ErrInvalidSpec) {
			t.Errorf("Run(%q) = %v, want ErrInvalidSpec", argv, err)
		}
	}
}

func TestHostKeyChanged(t *testing.T) {
	f := newFixture(t)
	other := newEd25519Signer(t)
	f.srv.SetHostKeys(other)
	_, err := Dial(ctxTimeout(t, 10*time.Second), f.cfg)
	if !errors.Is(err, ErrHostKeyChanged) {
		t.Fatalf("got %v, want ErrHostKeyChanged", err)
	}
	if errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("a changed host key must not look retryable: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"127.0.0.1", fmt.Sprint(f.srv.Port),
		ssh.FingerprintSHA256(other.PublicKey()),
		f.kh + ":1",
		fmt.Sprintf("ssh-keygen -R '[127.0.0.1]:%d' -f %s", f.srv.Port, f.kh),
		"admins",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
}

func TestHostKeyUnknown(t *testing.T) {
	f := newFixture(t)
	// A line for another port of the same host must not count.
	f.cfg.KnownHosts = []string{writeKnownHosts(t, knownHostsLineFor("[127.0.0.1]:1", f.host.PublicKey()))}
	_, err := Dial(ctxTimeout(t, 10*time.Second), f.cfg)
	if !errors.Is(err, ErrHostKeyUnknown) {
		t.Fatalf("got %v, want ErrHostKeyUnknown", err)
	}
	msg := err.Error()
	for _, want := range []string{
		ssh.FingerprintSHA256(f.host.PublicKey()),
		fmt.Sprintf("ssh-keyscan -p %d 127.0.0.1 >> %s", f.srv.Port, f.cfg.KnownHosts[0]),
		"Verify",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}

	// A known_hosts file that does not exist yet counts as empty.
	f.cfg.KnownHosts = []string{filepath.Join(t.TempDir(), "absent")}
	if _, err := Dial(ctxTimeout(t, 10*time.Second), f.cfg); !errors.Is(err, ErrHostKeyUnknown) {
		t.Errorf("missing file: got %v, want ErrHostKeyUnknown", err)
	}
}

func knownHostsLineFor(host string, key ssh.PublicKey) string {
	return host + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
}

func TestHostKeySeveralPerHost(t *testing.T) {
	f := newFixture(t)
	node2 := newEd25519Signer(t)
	// Round-robin login nodes: two keys for the one name, plus a comment.
	f.cfg.KnownHosts = []string{writeKnownHosts(t,
		"# login nodes",
		f.srv.KnownHostsLine(node2.PublicKey()),
		f.srv.KnownHostsLine(f.host.PublicKey()),
	)}
	for i, keys := range [][]ssh.Signer{{f.host}, {node2}} {
		f.srv.SetHostKeys(keys...)
		c, err := Dial(ctxTimeout(t, 10*time.Second), f.cfg)
		if err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
		c.Close()
	}

	// A server with two host keys of different types, of which known_hosts
	// lists only one: the client must ask for the known type, not fail as
	// "changed" because the server's other key came first.
	ec := newECDSASigner(t)
	f.srv.SetHostKeys(ec, f.host)
	for _, known := range []ssh.Signer{f.host, ec} {
		f.cfg.KnownHosts = []string{writeKnownHosts(t, f.srv.KnownHostsLine(known.PublicKey()))}
		c, err := Dial(ctxTimeout(t, 10*time.Second), f.cfg)
		if err != nil {
			t.Fatalf("server with ecdsa+ed25519, known %s: %v", known.PublicKey().Type(), err)
		}
		c.Close()
	}
}

func TestHostCertAuthority(t *testing.T) {
	f := newFixture(t)
	ca := newEd25519Signer(t)
	hostCert := func(signer ssh.Signer, principal string) ssh.Signer {
		cert := &ssh.Certificate{
			Key: f.host.PublicKey(), CertType: ssh.HostCert, KeyId: "login1",
			ValidPrincipals: []string{principal},
			ValidAfter:      uint64(time.Now().Add(-time.Hour).Unix()), ValidBefore: ssh.CertTimeInfinity,
		}
		if err := cert.SignCert(randReader(), signer); err != nil {
			t.Fatal(err)
		}
		cs, err := ssh.NewCertSigner(cert, f.host)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	caLine := "@cert-authority " + f.srv.KnownHostsLine(ca.PublicKey())
	f.cfg.KnownHosts = []string{writeKnownHosts(t, caLine)}

	f.srv.SetHostKeys(hostCert(ca, "127.0.0.1"))
	c, err := Dial(ctxTimeout(t, 10*time.Second), f.cfg)
	if err != nil {
		t.Fatalf("host certificate signed by the known CA: %v", err)
	}
	if res, err := c.Run(ctxTimeout(t, 10*time.Second), []string{"echo", "ok"}, nil); err != nil || string(res.Stdout) != "ok\n" {
		t.Errorf("Run over a CA-checked connection: %q %v", res.Stdout, err)
	}
	c.Close()

	// Signed by another CA: not trusted.
	f.srv.SetHostKeys(hostCert(newEd25519Signer(t), "127.0.0.1"))
	if _, err := Dial(ctxTimeout(t, 10*time.Second), f.cfg); err == nil {
		t.Error("a certificate from an unknown CA was accepted")
	}
	// Right CA, wrong principal: not trusted.
	f.srv.SetHostKeys(hostCert(ca, "elsewhere.example"))
	if _, err := Dial(ctxTimeout(t, 10*time.Second), f.cfg); err == nil {
		t.Error("a certificate for another host name was accepted")
	}
}

func TestHostKeyRevoked(t *testing.T) {
	f := newFixture(t)
	f.cfg.KnownHosts = []string{writeKnownHosts(t,
		f.srv.KnownHostsLine(f.host.PublicKey()),
		"@revoked * "+strings.TrimSpace(string(ssh.MarshalAuthorizedKey(f.host.PublicKey()))),
	)}
	_, err := Dial(ctxTimeout(t, 10*time.Second), f.cfg)
	if !errors.Is(err, ErrHostKeyRevoked) || !strings.Contains(err.Error(), ":2") {
		t.Fatalf("got %v, want ErrHostKeyRevoked naming line 2", err)
	}
}

func TestInsecureIgnoreHostKeyWarns(t *testing.T) {
	f := newFixture(t)
	var logs syncBuffer
	f.cfg.KnownHosts = nil
	f.cfg.InsecureIgnoreHostKey = true
	f.cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	c := f.dial(t)
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "NOT CHECKED") ||
		!strings.Contains(out, ssh.FingerprintSHA256(f.host.PublicKey())) {
		t.Errorf("no loud warning with the fingerprint in the log:\n%s", out)
	}
	// Every connect warns, reconnects included.
	f.srv.DropAll()
	waitFor(t, 5*time.Second, "the client to notice the drop", func() bool { cn, _ := c.current(); return cn == nil })
	if _, err := c.Run(ctxTimeout(t, 10*time.Second), []string{"true"}, nil); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "NOT CHECKED"); n != 2 {
		t.Errorf("%d warnings after 2 connects, want 2", n)
	}
}

func TestAuthFailure(t *testing.T) {
	f := newFixture(t)
	f.srv.RejectAuth.Store(true)
	_, err := Dial(ctxTimeout(t, 10*time.Second), f.cfg)
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("got %v, want ErrAuth", err)
	}
	if errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("an auth failure must not look retryable: %v", err)
	}
	for _, want := range []string{fmt.Sprintf("griduser@127.0.0.1:%d", f.srv.Port), "publickey", f.key.Path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q: %v", want, err)
		}
	}

	f.srv.RejectAuth.Store(false)
	f.cfg.KeyFiles = []string{newClientKey(t, "").Path} // a key the server does not know
	if _, err := Dial(ctxTimeout(t, 10*time.Second), f.cfg); !errors.Is(err, ErrAuth) {
		t.Errorf("unknown key: got %v, want ErrAuth", err)
	}

	f.cfg.KeyFiles = nil
	if _, err := Dial(ctxTimeout(t, 10*time.Second), f.cfg); !errors.Is(err, ErrAuth) {
		t.Errorf("no credentials: got %v, want ErrAuth", err)
	}
}

func TestEncryptedKeyFile(t *testing.T) {
	f := newFixture(t)
	enc := newClientKey(t, "secret passphrase")
	f.cfg.KeyFiles = []string{enc.Path}
	_, err := Dial(ctxTimeout(t, 10*time.Second), f.cfg)
	if !errors.Is(err, ErrNeedsLogin) || !strings.Contains(err.Error(), enc.Path) || !strings.Contains(err.Error(), "gridsub login") {
		t.Fatalf("got %v, want ErrNeedsLogin naming the key and gridsub login", err)
	}
	if strings.Contains(err.Error(), "secret passphrase") {
		t.Error("the passphrase leaked into the error")
	}
}

func TestAgentAuth(t *testing.T) {
	f := newFixture(t)
	// An in-process agent holding the client key.
	keyring := agent.NewKeyring()
	raw, err := os.ReadFile(f.key.Path)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ssh.ParseRawPrivateKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := keyring.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { agent.ServeAgent(keyring, conn); conn.Close() }()
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)
	f.cfg.KeyFiles = nil
	f.cfg.UseAgent = true
	c := f.dial(t)
	if res, err := c.Run(ctxTimeout(t, 10*time.Second), []string{"echo", "agent"}, nil); err != nil || string(res.Stdout) != "agent\n" {
		t.Fatalf("Run with agent auth: %q %v", res.Stdout, err)
	}

	t.Setenv("SSH_AUTH_SOCK", "")
	_, err = Dial(ctxTimeout(t, 10*time.Second), f.cfg)
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "SSH_AUTH_SOCK") {
		t.Errorf("agent without socket: got %v, want ErrAuth naming SSH_AUTH_SOCK", err)
	}
}

func TestSessionRefusalsBackOff(t *testing.T) {
	f := newFixture(t)
	f.srv.MaxSessions.Store(2)
	c := f.dial(t) // MaxSessions 8 > the server's 2: the server refuses some
	const callers = 6
	var wg sync.WaitGroup
	errs := make([]error, callers)
	ctx := ctxTimeout(t, 30*time.Second)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Run(ctx, []string{"sh", "-c", "sleep 0.3; echo " + fmt.Sprint(i)}, nil)
			if err == nil && string(res.Stdout) != fmt.Sprintf("%d\n", i) {
				err = fmt.Errorf("stdout %q", res.Stdout)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if f.srv.Refused.Load() == 0 {
		t.Error("the server never refused a session: the test did not test the backoff")
	}
	if f.srv.Conns.Load() != 1 {
		t.Errorf("%d connections, want 1 (sessions share the connection)", f.srv.Conns.Load())
	}
}

func TestSessionLimitNeverFrees(t *testing.T) {
	f := newFixture(t)
	f.srv.MaxSessions.Store(1)
	c := f.dial(t)
	longCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	go func() {
		close(started)
		c.Run(longCtx, []string{"sleep", "30"}, nil)
	}()
	<-started
	waitFor(t, 5*time.Second, "the long command to hold the only session", func() bool { return f.srv.MaxActive.Load() == 1 })
	t0 := time.Now()
	_, err := c.Run(ctxTimeout(t, 700*time.Millisecond), []string{"true"}, nil)
	if !errors.Is(err, ErrSessionLimit) || !errors.Is(err, backends.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ErrSessionLimit (and ErrUnavailable, DeadlineExceeded)", err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("took %v past a 700ms deadline", d)
	}
	if f.srv.Refused.Load() < 2 {
		t.Errorf("only %d refusals: no retry happened", f.srv.Refused.Load())
	}
}

func TestClientSemaphore(t *testing.T) {
	f := newFixture(t)
	f.cfg.MaxSessions = 2
	c := f.dial(t)
	var wg sync.WaitGroup
	ctx := ctxTimeout(t, 30*time.Second)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Run(ctx, []string{"sleep", "0.2"}, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if m := f.srv.MaxActive.Load(); m > 2 || m < 1 {
		t.Errorf("server saw %d concurrent sessions, want at most MaxSessions=2", m)
	}
	if f.srv.Refused.Load() != 0 {
		t.Errorf("%d refusals with an unlimited server", f.srv.Refused.Load())
	}
}

func TestRunCancelReturnsPromptly(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	t0 := time.Now()
	_, err := c.Run(ctx, []string{"sh", "-c", "echo $$ > " + pidFile + "; exec sleep 30"}, nil)
	d := time.Since(t0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if d > 1300*time.Millisecond {
		t.Errorf("Run returned %v after start (cancel at 300ms), want within ~1s", d)
	}
	waitFor(t, 5*time.Second, "the signal request", func() bool { return f.srv.Signals.Load() == 1 })
	// The connection is still good for the next command.
	if res, err := c.Run(ctxTimeout(t, 10*time.Second), []string{"echo", "next"}, nil); err != nil || string(res.Stdout) != "next\n" {
		t.Errorf("Run after a cancel: %q %v", res.Stdout, err)
	}
	// The remote sleep is gone.
	pid, _ := os.ReadFile(pidFile)
	waitFor(t, 5*time.Second, "the remote process to end", func() bool {
		_, err := os.Stat("/proc/" + strings.TrimSpace(string(pid)))
		return len(pid) > 0 && errors.Is(err, os.ErrNotExist)
	})
}

func TestReconnectAfterDrop(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	ctx := ctxTimeout(t, 20*time.Second)
	if _, err := c.Run(ctx, []string{"true"}, nil); err != nil {
		t.Fatal(err)
	}
	f.srv.DropAll()
	waitFor(t, 5*time.Second, "the client to notice the drop", func() bool { cn, _ := c.current(); return cn == nil })
	res, err := c.Run(ctx, []string{"echo", "again"}, nil)
	if err != nil || string(res.Stdout) != "again\n" {
		t.Fatalf("Run after the connection died: %q %v", res.Stdout, err)
	}
	if n := f.srv.Conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (one redial)", n)
	}
}

func TestRunFailsWhenConnectionDiesMidCommand(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	time.AfterFunc(300*time.Millisecond, f.srv.DropAll)
	_, err := c.Run(ctxTimeout(t, 10*time.Second), []string{"sleep", "5"}, nil)
	if !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
}

func TestReconnectBackoffWhenSiteDown(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	f.srv.Close() // listener gone too
	waitFor(t, 5*time.Second, "the client to notice the drop", func() bool { cn, _ := c.current(); return cn == nil })
	_, err := c.Run(ctxTimeout(t, 10*time.Second), []string{"true"}, nil)
	if !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	c.mu.Lock()
	failures, next := c.failures, time.Until(c.nextDial)
	c.mu.Unlock()
	if failures != dialAttempts || next <= 0 {
		t.Errorf("failures %d, next dial in %v; want %d and > 0", failures, next, dialAttempts)
	}
	// A caller whose deadline ends before the backoff does is told at once.
	t0 := time.Now()
	_, err = c.Run(ctxTimeout(t, 50*time.Millisecond), []string{"true"}, nil)
	if !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), "backoff") || time.Since(t0) > 40*time.Millisecond {
		t.Errorf("got %v after %v, want an immediate backoff error", err, time.Since(t0))
	}
}

func TestKeepAlive(t *testing.T) {
	f := newFixture(t)
	f.cfg.KeepAlive = 50 * time.Millisecond
	c := f.dial(t)
	waitFor(t, 5*time.Second, "3 keepalives", func() bool { return f.srv.Keepalives.Load() >= 3 })
	if res, err := c.Run(ctxTimeout(t, 10*time.Second), []string{"echo", "alive"}, nil); err != nil || string(res.Stdout) != "alive\n" {
		t.Fatalf("Run with keepalives: %q %v", res.Stdout, err)
	}
	if n := f.srv.Conns.Load(); n != 1 {
		t.Errorf("%d connections; keepalives must not cause reconnects", n)
	}

	// A peer that stops answering is detected and replaced.
	f.srv.IgnoreKeepalive.Store(true)
	waitFor(t, 5*time.Second, "the client to drop the hung connection", func() bool { cn, _ := c.current(); return cn == nil })
	f.srv.IgnoreKeepalive.Store(false)
	if _, err := c.Run(ctxTimeout(t, 10*time.Second), []string{"true"}, nil); err != nil {
		t.Fatal(err)
	}
	if n := f.srv.Conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

func TestDialBoundedByContext(t *testing.T) {
	// A server that accepts TCP and then says nothing.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	cfg := Config{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, User: "u",
		KeyFiles: []string{newClientKey(t, "").Path}, InsecureIgnoreHostKey: true}
	t0 := time.Now()
	_, err = Dial(ctxTimeout(t, 300*time.Millisecond), cfg)
	if !errors.Is(err, backends.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("Dial took %v with a 300ms context", d)
	}
	// Without a deadline in ctx, DialTimeout bounds it.
	cfg.DialTimeout = 200 * time.Millisecond
	t0 = time.Now()
	if _, err = Dial(context.Background(), cfg); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want DeadlineExceeded", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("Dial took %v with DialTimeout 200ms", d)
	}
	// Nothing listening: unavailable.
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	cfg.Port = ln2.Addr().(*net.TCPAddr).Port
	ln2.Close()
	if _, err = Dial(context.Background(), cfg); !errors.Is(err, backends.ErrUnavailable) || !backends.Retryable(err) {
		t.Errorf("refused: got %v, want ErrUnavailable", err)
	}
}

func TestClosed(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Run(context.Background(), []string{"true"}, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
	if _, err := c.Stager(".").Put(context.Background(), strings.NewReader("x"), "x", 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close: %v, want ErrClosed", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{User: "u", UseAgent: true}, "host is empty"},
		{Config{Host: "h", UseAgent: true}, "user is empty"},
		{Config{Host: "h", User: "u", Port: 70000, UseAgent: true}, "port 70000"},
		{Config{Host: "h", User: "u", MaxSessions: -1, UseAgent: true}, "max sessions"},
	} {
		_, err := Dial(context.Background(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Dial(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
}

func TestRunBoundedWhenServerHangs(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	f.srv.HangOpens.Store(true)
	t0 := time.Now()
	_, err := c.Run(ctxTimeout(t, 300*time.Millisecond), []string{"true"}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want DeadlineExceeded", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("Run took %v with a 300ms deadline against a hung server", d)
	}
	_, err = c.Stager(f.srv.Dir).Put(ctxTimeout(t, 300*time.Millisecond), strings.NewReader("x"), "x", 0)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Put: got %v, want DeadlineExceeded", err)
	}
	f.srv.HangOpens.Store(false)
	if _, err := c.Run(ctxTimeout(t, 10*time.Second), []string{"true"}, nil); err != nil {
		t.Errorf("after the server recovered: %v", err)
	}
}

// TestLazyDialToADownSite: with Lazy, Dial to a site that is down returns
// a Client that says why, fails calls with ErrUnavailable, and connects
// once the site is up; without Lazy, Dial fails; and Lazy never excuses a
// changed host key.
func TestLazyDialToADownSite(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nobody listens there now
	key, host := newClientKey(t, ""), newEd25519Signer(t)
	kh := writeKnownHosts(t, knownhosts.Line([]string{fmt.Sprintf("[127.0.0.1]:%d", port)}, host.PublicKey()))
	cfg := Config{Host: "127.0.0.1", Port: port, User: "griduser", KeyFiles: []string{key.Path}, KnownHosts: []string{kh},
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx := ctxTimeout(t, 20*time.Second)

	if _, err := Dial(ctx, cfg); !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("Dial to a down site without Lazy = %v, want ErrUnavailable", err)
	}
	cfg.Lazy = true
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("Lazy Dial to a down site: %v", err)
	}
	defer c.Close()
	if err := c.Err(); !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Err() = %v, want ErrUnavailable naming %s", err, addr)
	}
	if _, err := c.Run(ctx, []string{"true"}, nil); !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("Run while down = %v, want ErrUnavailable", err)
	}
	srv := startServerOn(t, addr, key.Pub, host)
	waitFor(t, 15*time.Second, "a Run once the site is up", func() bool {
		res, err := c.Run(ctx, []string{"echo", "up"}, nil)
		return err == nil && string(res.Stdout) == "up\n"
	})
	if err := c.Err(); err != nil {
		t.Errorf("Err() once connected = %v, want nil", err)
	}

	// A changed host key is refused at once, Lazy or not.
	srv.SetHostKeys(newEd25519Signer(t))
	if _, err := Dial(ctx, cfg); !errors.Is(err, ErrHostKeyChanged) {
		t.Fatalf("Lazy Dial with a changed host key = %v, want ErrHostKeyChanged", err)
	}
}
