package sshsite

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// maxStdin bounds what one remote command may read from its client (job
// wrappers are a few KiB).
const maxStdin = 16 << 20

// newServerConfig builds the SSH server configuration: one fresh ed25519
// host key, public-key authentication against the authorized keys for
// user (any user name when user is ""), nothing else.
func newServerConfig(user string, authorized []ssh.PublicKey) (*ssh.ServerConfig, ssh.PublicKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("sshsite: host key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("sshsite: host key: %w", err)
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(c ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if user != "" && c.User() != user {
				return nil, fmt.Errorf("user %q is not %q", c.User(), user)
			}
			kb := k.Marshal()
			for _, a := range authorized {
				if subtle.ConstantTimeCompare(a.Marshal(), kb) == 1 {
					return &ssh.Permissions{}, nil
				}
			}
			return nil, errors.New("key not authorized")
		},
		MaxAuthTries: 6,
	}
	cfg.AddHostKey(signer)
	return cfg, signer.PublicKey(), nil
}

// sshd is the site's login node.
type sshd struct {
	site *Site
	cfg  *ssh.ServerConfig
	ln   net.Listener
	wg   sync.WaitGroup

	mu        sync.Mutex
	conns     map[net.Conn]bool
	handshake int // connections still in their handshake
	done      bool
}

// serve accepts connections until the listener is closed. An error of
// Accept (out of file descriptors, a connection aborted before it was
// accepted) is waited out, never the end of the server; a connection over
// Config.MaxConns, or over the handshakes' share of it, is closed at once.
func (d *sshd) serve() {
	defer d.wg.Done()
	maxConns := d.site.cfg.MaxConns
	maxHandshakes := max(4, maxConns/4)
	wait := 5 * time.Millisecond
	for {
		c, err := d.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			d.site.log.Warn("sshd: accept failed; retrying", "err", err, "in", wait)
			time.Sleep(wait)
			wait = min(2*wait, time.Second)
			continue
		}
		wait = 5 * time.Millisecond
		d.mu.Lock()
		if d.done {
			d.mu.Unlock()
			c.Close()
			return
		}
		if len(d.conns) >= maxConns || d.handshake >= maxHandshakes {
			d.mu.Unlock()
			d.site.stats.refused.Add(1)
			c.Close()
			continue
		}
		d.conns[c] = true
		d.handshake++
		d.mu.Unlock()
		d.wg.Add(1)
		go d.conn(c)
	}
}

func (d *sshd) close() {
	d.mu.Lock()
	d.done = true
	for c := range d.conns {
		c.Close()
	}
	d.mu.Unlock()
	d.ln.Close()
	d.wg.Wait()
}

func (d *sshd) conn(c net.Conn) {
	defer d.wg.Done()
	shaking := true
	defer func() {
		d.mu.Lock()
		delete(d.conns, c)
		if shaking {
			d.handshake--
		}
		d.mu.Unlock()
		c.Close()
	}()
	// The handshake and authentication must be over within
	// HandshakeTimeout: a client that connects and says nothing holds a
	// descriptor for that long at most.
	c.SetDeadline(time.Now().Add(d.site.cfg.HandshakeTimeout))
	sc, chans, reqs, err := ssh.NewServerConn(c, d.cfg)
	d.mu.Lock()
	d.handshake--
	shaking = false
	d.mu.Unlock()
	if err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	d.site.stats.conns.Add(1)
	go ssh.DiscardRequests(reqs)
	// gone is closed when the client is: the commands of its sessions are
	// killed then, not left running for nobody.
	gone := make(chan struct{})
	go func() { sc.Wait(); close(gone) }()
	var wg sync.WaitGroup
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		d.site.stats.sessions.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.session(ch, creqs, gone)
		}()
	}
	sc.Close()
	wg.Wait()
}

// session serves one channel: one "exec" (run by /bin/sh in the home with
// the site's PATH) or the "sftp" subsystem; "env" is ignored, shells and
// terminals are refused.
func (d *sshd) session(ch ssh.Channel, reqs <-chan *ssh.Request, gone <-chan struct{}) {
	defer ch.Close()
	for req := range reqs {
		switch req.Type {
		case "exec":
			cmd, ok := sshString(req.Payload)
			req.Reply(ok, nil)
			if !ok {
				return
			}
			go ssh.DiscardRequests(reqs)
			code := d.exec(ch, cmd, gone)
			ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, uint32(code)))
			return
		case "subsystem":
			name, ok := sshString(req.Payload)
			if !ok || name != "sftp" {
				req.Reply(false, nil)
				continue
			}
			req.Reply(true, nil)
			go ssh.DiscardRequests(reqs)
			d.site.stats.sftp.Add(1)
			fsys := &rootFS{home: d.site.home, root: d.site.root, maxFile: d.site.cfg.MaxFileSize}
			srv := sftp.NewRequestServer(ch, fsys.handlers(), sftp.WithStartDirectory(d.site.home))
			srv.Serve()
			srv.Close()
			return
		default:
			req.Reply(false, nil)
		}
	}
}

func sshString(p []byte) (string, bool) {
	if len(p) < 4 {
		return "", false
	}
	n := binary.BigEndian.Uint32(p)
	if uint64(n) != uint64(len(p)-4) {
		return "", false
	}
	return string(p[4:]), true
}

// exec runs one command line as a login node would: /bin/sh -c line in
// the home, with the site's environment, its own process group (killed
// when the client goes away), stdin bounded.
func (d *sshd) exec(ch ssh.Channel, line string, gone <-chan struct{}) int {
	d.site.stats.commands.Add(1)
	if req, ok := d.site.direct(line); ok {
		// The command reads the channel only if it needs its stdin
		// (sbatch without a script); what it leaves is drained after.
		req.stdin = onceStdin(func(max int) ([]byte, error) { return readBounded(ch, max) })
		rep := d.site.runSafe(req)
		go io.Copy(io.Discard, io.LimitReader(ch, maxStdin))
		ch.Write(rep.Stdout)
		ch.Stderr().Write(rep.Stderr)
		return rep.Code
	}
	if nonce, cmds, ok := d.site.batchRequests(line); ok {
		go io.Copy(io.Discard, io.LimitReader(ch, maxStdin)) // a batch's commands read here-documents only
		return d.site.runBatch(ch, ch.Stderr(), nonce, cmds)
	}
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Dir = d.site.home
	cmd.Env = d.site.env()
	cmd.Stdout = ch
	cmd.Stderr = ch.Stderr()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		fmt.Fprintf(ch.Stderr(), "sshsite: %v\n", err)
		return 255
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(ch.Stderr(), "sshsite: %v\n", err)
		return 255
	}
	go func() {
		io.Copy(in, io.LimitReader(ch, maxStdin))
		in.Close()
	}()
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		select {
		case <-gone: // the client went away: its command goes with it
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-ended:
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	default:
		fmt.Fprintf(ch.Stderr(), "sshsite: %v\n", err)
		return 255
	}
}

// KnownHostsLine is the known_hosts line for a server at addr with key.
func KnownHostsLine(addr string, key ssh.PublicKey) string {
	return knownhosts.Line([]string{knownhosts.Normalize(addr)}, key)
}

// writeFileAtomic writes b to name (0644) through a temporary file.
func writeFileAtomic(name string, b []byte) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}
