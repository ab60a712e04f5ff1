package transport

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// testServer is an in-process SSH server on 127.0.0.1:0 for the tests. It
// runs exec requests for real with `sh -c <command>` (so quoting is tested
// end to end), serves SFTP with pkg/sftp, and can be told to misbehave:
// present other host keys, reject authentication, refuse sessions beyond a
// limit, or drop the connection after K bytes of SFTP upload.
type testServer struct {
	t    testing.TB
	ln   net.Listener
	Port int
	Dir  string // working directory of commands and sftp

	clientKey ssh.PublicKey

	mu       sync.Mutex
	hostKeys []ssh.Signer

	RejectAuth  atomic.Bool
	MaxSessions atomic.Int32 // per connection; 0 = unlimited
	DropAfter   atomic.Int64 // >0: drop the TCP connection once an sftp session has received this many bytes
	StallAfter  atomic.Int64 // >0: stop reading an sftp session after this many bytes, until Unstall
	unstall     chan struct{}
	unstallOnce sync.Once
	Conns       atomic.Int32 // connections accepted (handshake done)
	Keepalives  atomic.Int32 // keepalive@openssh.com requests received
	Refused     atomic.Int32 // session opens refused
	Signals     atomic.Int32 // signal requests received
	MaxActive   atomic.Int32 // most sessions seen open at once on one connection
	// IgnoreKeepalive: never answer keepalive requests (a hung peer).
	IgnoreKeepalive atomic.Bool
	// HangOpens: leave session opens unanswered (until the server closes).
	HangOpens atomic.Bool

	wg     sync.WaitGroup
	connMu sync.Mutex
	open   map[net.Conn]bool
}

// newHostSigner makes a fresh ed25519 host key.
func newEd25519Signer(t testing.TB) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	signerKeys.Store(s, priv)
	return s
}

// signerKeys maps test signers to their private keys (to write them out).
var signerKeys sync.Map

func newECDSASigner(t testing.TB) ssh.Signer {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// clientKey is a client key pair written to a temp file.
type clientKey struct {
	Path string
	Pub  ssh.PublicKey
}

func newClientKey(t testing.TB, passphrase string) clientKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var blk *pem.Block
	if passphrase == "" {
		blk, err = ssh.MarshalPrivateKey(priv, "test")
	} else {
		blk, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "test", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(p, pem.EncodeToMemory(blk), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return clientKey{Path: p, Pub: sp}
}

func startServer(t testing.TB, client ssh.PublicKey, hostKeys ...ssh.Signer) *testServer {
	t.Helper()
	return startServerOn(t, "127.0.0.1:0", client, hostKeys...)
}

// startServerOn is startServer listening on addr.
func startServerOn(t testing.TB, addr string, client ssh.PublicKey, hostKeys ...ssh.Signer) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if len(hostKeys) == 0 {
		hostKeys = []ssh.Signer{newEd25519Signer(t)}
	}
	s := &testServer{t: t, ln: ln, Port: ln.Addr().(*net.TCPAddr).Port, Dir: t.TempDir(),
		clientKey: client, hostKeys: hostKeys, open: map[net.Conn]bool{}, unstall: make(chan struct{})}
	if err := os.Mkdir(s.Home(), 0o755); err != nil {
		t.Fatal(err)
	}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.Close)
	return s
}

// Home is the HOME of commands run by the server (a sandbox, so that a
// quoting bug running "rm -rf ~" would only hit test files).
func (s *testServer) Home() string { return filepath.Join(s.Dir, "home") }

// SetHostKeys changes the keys presented to later connections.
func (s *testServer) SetHostKeys(keys ...ssh.Signer) {
	s.mu.Lock()
	s.hostKeys = keys
	s.mu.Unlock()
}

// Unstall lets stalled sftp sessions go on (to their end).
func (s *testServer) Unstall() { s.unstallOnce.Do(func() { close(s.unstall) }) }

// Close stops the listener and drops every connection.
func (s *testServer) Close() {
	s.Unstall()
	s.ln.Close()
	s.DropAll()
	s.wg.Wait()
}

// DropAll closes every open TCP connection.
func (s *testServer) DropAll() {
	s.connMu.Lock()
	for c := range s.open {
		c.Close()
	}
	s.connMu.Unlock()
}

// KnownHostsLine is the known_hosts line for key at this server.
func (s *testServer) KnownHostsLine(key ssh.PublicKey) string {
	return knownhosts.Line([]string{fmt.Sprintf("[127.0.0.1]:%d", s.Port)}, key)
}

func (s *testServer) config() *ssh.ServerConfig {
	conf := &ssh.ServerConfig{
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if s.RejectAuth.Load() {
				return nil, errors.New("rejected by test")
			}
			if s.clientKey == nil || string(key.Marshal()) != string(s.clientKey.Marshal()) {
				return nil, errors.New("unknown key")
			}
			return &ssh.Permissions{}, nil
		},
	}
	s.mu.Lock()
	for _, k := range s.hostKeys {
		conf.AddHostKey(k)
	}
	s.mu.Unlock()
	return conf
}

func (s *testServer) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.connMu.Lock()
		s.open[nc] = true
		s.connMu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(nc)
			s.connMu.Lock()
			delete(s.open, nc)
			s.connMu.Unlock()
		}()
	}
}

func (s *testServer) serveConn(nc net.Conn) {
	defer nc.Close()
	sc, chans, reqs, err := ssh.NewServerConn(nc, s.config())
	if err != nil {
		return
	}
	defer sc.Close()
	s.Conns.Add(1)
	go func() {
		for r := range reqs {
			if r.Type == "keepalive@openssh.com" {
				s.Keepalives.Add(1)
				if s.IgnoreKeepalive.Load() {
					continue
				}
			}
			if r.WantReply {
				r.Reply(false, nil) // like OpenSSH: "failure", which still proves liveness
			}
		}
	}()
	var active atomic.Int32
	var sessions sync.WaitGroup
	defer sessions.Wait()
	for nch := range chans {
		if nch.ChannelType() != "session" {
			nch.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		if s.HangOpens.Load() {
			continue // never answered; the client must not wait forever
		}
		if max := s.MaxSessions.Load(); max > 0 && active.Load() >= max {
			s.Refused.Add(1)
			nch.Reject(ssh.Prohibited, "open failed")
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		n := active.Add(1)
		for m := s.MaxActive.Load(); n > m && !s.MaxActive.CompareAndSwap(m, n); m = s.MaxActive.Load() {
		}
		sessions.Add(1)
		go func() {
			defer sessions.Done()
			// Count the session as gone before the client can see it close.
			s.serveSession(nc, ch, creqs, func() { active.Add(-1) })
		}()
	}
}

type execMsg struct{ Command string }
type exitStatusMsg struct{ Status uint32 }
type signalMsg struct{ Signal string }

func (s *testServer) serveSession(nc net.Conn, ch ssh.Channel, reqs <-chan *ssh.Request, ended func()) {
	defer ch.Close()
	defer ended()
	var cmd *exec.Cmd
	done := make(chan struct{})
	started := false
	for {
		select {
		case <-done:
			return
		case r, ok := <-reqs:
			if !ok {
				// The client closed the channel: like a hung-up terminal.
				if cmd != nil && cmd.Process != nil {
					syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
					<-done
				}
				return
			}
			switch {
			case r.Type == "exec" && !started:
				var m execMsg
				if err := ssh.Unmarshal(r.Payload, &m); err != nil {
					r.Reply(false, nil)
					continue
				}
				started = true
				cmd = exec.Command("sh", "-c", m.Command)
				cmd.Dir = s.Dir
				cmd.Env = append(os.Environ(), "HOME="+s.Home())
				cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				if err := cmd.Start(); err != nil {
					r.Reply(false, nil)
					return
				}
				r.Reply(true, nil)
				go func() {
					err := cmd.Wait()
					code := 0
					var ee *exec.ExitError
					if errors.As(err, &ee) {
						code = ee.ExitCode()
						if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
							code = 128 + int(ws.Signal())
						}
					}
					ch.SendRequest("exit-status", false, ssh.Marshal(exitStatusMsg{uint32(code)}))
					close(done)
				}()
			case r.Type == "subsystem" && !started:
				var m execMsg
				ssh.Unmarshal(r.Payload, &m)
				if m.Command != "sftp" {
					r.Reply(false, nil)
					continue
				}
				started = true
				r.Reply(true, nil)
				go func() {
					defer close(done)
					var rd io.Reader = ch
					if k := s.DropAfter.Load(); k > 0 {
						rd = &dropReader{r: ch, left: k, drop: func() {
							s.DropAfter.Store(0)
							nc.Close()
						}}
					} else if k := s.StallAfter.Load(); k > 0 {
						rd = &dropReader{r: ch, left: k, drop: func() {
							s.StallAfter.Store(0)
							<-s.unstall
						}}
					}
					srv, err := sftp.NewServer(struct {
						io.Reader
						io.WriteCloser
					}{rd, ch}, sftp.WithServerWorkingDirectory(s.Dir))
					if err != nil {
						return
					}
					srv.Serve()
					srv.Close()
					ch.SendRequest("exit-status", false, ssh.Marshal(exitStatusMsg{0}))
				}()
			case r.Type == "signal":
				s.Signals.Add(1)
				var m signalMsg
				ssh.Unmarshal(r.Payload, &m)
				if cmd != nil && cmd.Process != nil && m.Signal == "TERM" {
					syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
				}
			default:
				if r.WantReply {
					r.Reply(r.Type == "env", nil)
				}
			}
		}
	}
}

// dropReader closes the connection once more than left bytes were read.
type dropReader struct {
	r    io.Reader
	left int64
	drop func()
	once sync.Once
}

func (d *dropReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	d.left -= int64(n)
	if d.left < 0 {
		d.once.Do(d.drop)
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
}

// writeKnownHosts writes lines to a temp known_hosts file.
func writeKnownHosts(t testing.TB, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// delayProxy forwards TCP connections to target, delivering every chunk
// `delay` after it was read in each direction (a round trip of 2*delay),
// without limiting bandwidth: a WAN-like link on loopback.
func delayProxy(t testing.TB, target string, delay time.Duration) int {
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
			go delayCopy(out, in, delay)
			go delayCopy(in, out, delay)
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func delayCopy(dst, src net.Conn, delay time.Duration) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	q := make(chan chunk, 4096)
	go func() {
		defer close(q)
		for {
			b := make([]byte, 64<<10)
			n, err := src.Read(b)
			if n > 0 {
				q <- chunk{b[:n], time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.b); err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
}
