package transport

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// checkInsecureVsKnownHosts dials cfg's server (whose host key is hostKey)
// with InsecureIgnoreHostKey set and various known_hosts files: the flag
// lets through a host that known_hosts does not list (with a WARN), and
// nothing that contradicts it.
func checkInsecureVsKnownHosts(t *testing.T, cfg Config, hostKey ssh.PublicKey) {
	name := fmt.Sprintf("[%s]:%d", cfg.Host, cfg.Port)
	other := newEd25519Signer(t).PublicKey()
	emptyHome := t.TempDir()
	changedHome := t.TempDir()
	if err := os.MkdirAll(filepath.Join(changedHome, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(changedHome, ".ssh", "known_hosts"), []byte(knownHostsLineFor(name, other)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		knownHosts []string // nil: none configured (then ~/.ssh/known_hosts of home)
		home       string
		want       error // nil: connects
		warns      bool  // the NOT CHECKED warning is logged
	}{
		{"listed with this key", []string{writeKnownHosts(t, knownHostsLineFor(name, hostKey))}, emptyHome, nil, false},
		{"listed with a different key", []string{writeKnownHosts(t, knownHostsLineFor(name, other))}, emptyHome, ErrHostKeyChanged, false},
		{"this key revoked", []string{writeKnownHosts(t, "@revoked "+knownHostsLineFor(name, hostKey))}, emptyHome, ErrHostKeyRevoked, false},
		{"not listed", []string{writeKnownHosts(t, knownHostsLineFor("[127.0.0.1]:1", other))}, emptyHome, nil, true},
		{"file absent", []string{filepath.Join(t.TempDir(), "absent")}, emptyHome, nil, true},
		{"none configured, ~/.ssh/known_hosts lists a different key", nil, changedHome, ErrHostKeyChanged, false},
		{"none configured, no ~/.ssh/known_hosts", nil, emptyHome, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HOME", tc.home)
			var logs syncBuffer
			c := cfg
			c.InsecureIgnoreHostKey, c.KnownHosts = true, tc.knownHosts
			c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			cl, err := Dial(ctxTimeout(t, 20*time.Second), c)
			if cl != nil {
				cl.Close()
			}
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("Dial: %v", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("Dial: %v, want %v", err, tc.want)
			case tc.want != nil && !strings.Contains(err.Error(), "insecure_ignore_host_key skips the check only for hosts that known_hosts does not list"):
				t.Errorf("the error does not say why the flag did not apply: %v", err)
			}
			if got := strings.Contains(logs.String(), "NOT CHECKED"); got != tc.warns {
				t.Errorf("warning logged = %v, want %v; logs:\n%s", got, tc.warns, logs.String())
			}
		})
	}
}

// TestInsecureHostKeyVsKnownHosts runs the check against the in-process
// SSH server.
func TestInsecureHostKeyVsKnownHosts(t *testing.T) {
	f := newFixture(t)
	checkInsecureVsKnownHosts(t, f.cfg, f.host.PublicKey())
}

// TestPrivateSSHDInsecureHostKeyVsKnownHosts runs it against OpenSSH's
// sshd.
func TestPrivateSSHDInsecureHostKeyVsKnownHosts(t *testing.T) {
	cfg, _ := startPrivateSSHD(t)
	cb, err := knownHostsKey(cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkInsecureVsKnownHosts(t, cfg, cb)
}

// knownHostsKey reads the one host key the config's known_hosts lists.
func knownHostsKey(cfg Config) (ssh.PublicKey, error) {
	b, err := os.ReadFile(cfg.KnownHosts[0])
	if err != nil {
		return nil, err
	}
	_, _, key, _, _, err := ssh.ParseKnownHosts(b)
	return key, err
}
