package transport

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gridsub/gridsub/backends/transport/sshdtest"
)

// TestJumpChainToSlurmLoginNode reaches the SLURM testbed's login node
// from a ~/.ssh/config alias through two bastion sshds: the alias is
// resolved by ssh -G, every hop's key is checked against hashed
// known_hosts entries, a real job runs through the chain, a dropped
// login-node connection is redialed through the kept hop connections, and
// a changed host key at any hop is refused naming the hop.
func TestJumpChainToSlurmLoginNode(t *testing.T) {
	ch := sshdtest.NewChain(t)
	var logs syncBuffer
	cfg := Config{Host: "cluster", SSHConfig: ch.SSHConfig, Logger: testLogger(t, &logs)}
	ctx := ctxTimeout(t, 120*time.Second)
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := len(c.cfg.Jumps); got != 2 || c.cfg.KeepAlive != 15*time.Second || c.cfg.DialTimeout != 20*time.Second {
		t.Errorf("resolved %d jumps, keepalive %s, timeout %s; want 2, 15s, 20s", got, c.cfg.KeepAlive, c.cfg.DialTimeout)
	}
	res, err := c.Run(ctx, []string{"sbatch", "--wait", "--parsable", "--output=/dev/null", "--wrap", "echo through-the-chain"}, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("a job through two jump hosts: %v exit %d %s", err, res.ExitCode, res.Stderr)
	}
	t.Logf("job %s ran through the chain", strings.TrimSpace(string(res.Stdout)))

	// Drop the login node's connection only: the next call redials it
	// through the hop connections kept from the first dial.
	c.mu.Lock()
	c.cur.ssh.Close()
	c.mu.Unlock()
	if _, err := c.Run(ctx, []string{"true"}, nil); err != nil {
		t.Fatalf("after the login node's connection dropped: %v", err)
	}
	if n := strings.Count(logs.String(), "hop=\"jump host"); n != 2 {
		t.Errorf("%d jump host connects, want 2 (each hop once, then reused):\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "server_version="); n != 2 {
		t.Errorf("%d login node connects, want 2", n)
	}

	// A changed key at each hop in turn is refused, naming the hop.
	other := sshdtest.NewChain(t) // other host keys
	for i, tc := range []struct {
		lines []string
		name  string
	}{
		{[]string{strings.Replace(other.B1.KnownHostsLine(), fmt.Sprint(other.B1.Port), fmt.Sprint(ch.B1.Port), 1), ch.B2.KnownHostsLine(), ch.LoginLine}, "jump host 1 of 2"},
		{[]string{ch.B1.KnownHostsLine(), strings.Replace(other.B2.KnownHostsLine(), fmt.Sprint(other.B2.Port), fmt.Sprint(ch.B2.Port), 1), ch.LoginLine}, "jump host 2 of 2"},
	} {
		ch.WriteKnownHosts(t, tc.lines...)
		_, err := Dial(ctxTimeout(t, 30*time.Second), cfg)
		if !errors.Is(err, ErrHostKeyChanged) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("case %d: changed key at %s: got %v", i, tc.name, err)
		}
	}
	// At the login node: its known_hosts line now carries a bastion's key.
	fields := strings.Fields(ch.LoginLine)
	ch.WriteKnownHosts(t, ch.B1.KnownHostsLine(), ch.B2.KnownHostsLine(),
		fields[0]+" "+strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ch.B1.HostKey))))
	_, err = Dial(ctxTimeout(t, 30*time.Second), cfg)
	if !errors.Is(err, ErrHostKeyChanged) || !strings.Contains(err.Error(), "login node") {
		t.Errorf("changed key at the login node: got %v", err)
	}
}

// TestSSHConfigRefusals: settings gridsub cannot honour are refused by
// name, through the real ssh -G.
func TestSSHConfigRefusals(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client (apt-get install openssh-client)")
	}
	dir := t.TempDir()
	for _, tc := range []struct{ line, want string }{
		{"ProxyCommand nc %h %p", "ProxyCommand"},
		{"StrictHostKeyChecking no", "StrictHostKeyChecking no"},
		{"UserKnownHostsFile /dev/null", "UserKnownHostsFile /dev/null"},
		{"HostKeyAlias other", "HostKeyAlias"},
		{"KnownHostsCommand /bin/true", "KnownHostsCommand"},
	} {
		f := filepath.Join(dir, "config")
		os.WriteFile(f, []byte("Host x\n  HostName 127.0.0.1\n  "+tc.line+"\n"), 0o600)
		_, err := Dial(ctxTimeout(t, 10*time.Second), Config{Host: "x", SSHConfig: f, KeyFiles: []string{"k"}})
		if !errors.Is(err, ErrSSHConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want ErrSSHConfig naming %s", tc.line, err, tc.want)
		}
	}
	// Explicit fields win over the file's.
	f := filepath.Join(dir, "config")
	os.WriteFile(f, []byte("Host y\n  HostName 10.9.8.7\n  User fileuser\n  Port 2222\n  ProxyJump a@b:99,c\n"), 0o600)
	got, err := ResolveSSHConfig(ctxTimeout(t, 10*time.Second), Config{Host: "y", SSHConfig: f, User: "me", Port: 23})
	if err != nil {
		t.Fatal(err)
	}
	if got.Host != "10.9.8.7" || got.User != "me" || got.Port != 23 || len(got.Jumps) != 2 ||
		got.Jumps[0].User != "a" || got.Jumps[0].Host != "b" || got.Jumps[0].Port != 99 || got.Jumps[1].Host != "c" {
		t.Errorf("resolved %+v", got)
	}
}
