package transport

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends/transport/sshdtest"
)

// TestCertificates: a user certificate signed with ssh-keygen -s is
// accepted by an sshd with TrustedUserCAKeys (and no authorized_keys); the
// sshd's host certificate is verified through a @cert-authority line; an
// expired or not yet valid certificate, user or host, is refused saying
// so with its validity window.
func TestCertificates(t *testing.T) {
	sshdtest.Need(t)
	dir := sshdtest.WorldDir(t)
	userCA, _ := sshdtest.NewKeyFile(t, dir, "user_ca", "")
	hostCA, _ := sshdtest.NewKeyFile(t, dir, "host_ca", "")
	key, _ := sshdtest.NewKeyFile(t, dir, "id_ed25519", "")
	signUser := func(validity string) {
		os.Remove(key + "-cert.pub")
		sshdtest.Keygen(t, "-s", userCA, "-I", "alice@gridsub-test", "-n", "root", "-V", validity, key+".pub")
	}
	hostValidity := "-5m:+1h"
	hostCert := func(t testing.TB, hostPub string) string {
		sshdtest.Keygen(t, "-s", hostCA, "-h", "-I", "login1.test", "-n", "127.0.0.1", "-V", hostValidity, hostPub)
		return strings.TrimSuffix(hostPub, ".pub") + "-cert.pub"
	}
	start := func() *sshdtest.Server {
		return sshdtest.Start(t, sshdtest.Opts{HostCert: hostCert, Extra: []string{"TrustedUserCAKeys " + userCA + ".pub"}})
	}
	caPub, err := os.ReadFile(hostCA + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	s := start()
	// Only the CA is known: no line for the host's own key.
	// (x/crypto's knownhosts matches a pattern's port exactly, so a
	// wildcard line like "@cert-authority * KEY" covers port 22 only: the
	// test servers' lines name their ports.)
	caLines := func(ports ...int) string {
		var b strings.Builder
		for _, p := range ports {
			fmt.Fprintf(&b, "@cert-authority [127.0.0.1]:%d %s\n", p, strings.TrimSpace(string(caPub)))
		}
		return b.String()
	}
	kh := writeKnownHosts(t, caLines(s.Port))
	cfg := Config{Host: "127.0.0.1", Port: s.Port, User: "root", KeyFiles: []string{key}, KnownHosts: []string{kh},
		Logger: testLogger(t, nil)}
	ctx := ctxTimeout(t, 60*time.Second)

	signUser("-5m:+1h")
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("user certificate + host certificate: %v", err)
	}
	if res, err := c.Run(ctx, []string{"echo", "ok"}, nil); err != nil || string(res.Stdout) != "ok\n" {
		t.Errorf("Run: %q %v", res.Stdout, err)
	}
	c.Close()
	if b, _ := os.ReadFile(s.Log); !strings.Contains(string(b), "Accepted publickey for root") || !strings.Contains(string(b), "alice@gridsub-test") {
		t.Errorf("sshd did not log a certificate login:\n%s", b)
	}

	for _, tc := range []struct{ validity, want string }{
		{"-2h:-1h", "expired at"},
		{"+1h:+2h", "not yet valid"},
	} {
		signUser(tc.validity)
		_, err := Dial(ctx, cfg)
		if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "valid from") {
			t.Errorf("user certificate %s: got %v, want ErrAuth saying %q with the window", tc.validity, err, tc.want)
		}
	}
	signUser("-5m:+1h")

	// A host certificate from another CA is not trusted.
	other, _ := sshdtest.NewKeyFile(t, dir, "other_ca", "")
	otherPub, _ := os.ReadFile(other + ".pub")
	cfg.KnownHosts = []string{writeKnownHosts(t, fmt.Sprintf("@cert-authority [127.0.0.1]:%d %s", s.Port, strings.TrimSpace(string(otherPub))))}
	if _, err := Dial(ctx, cfg); !errors.Is(err, ErrHostKeyUnknown) && !errors.Is(err, ErrHostKeyChanged) {
		t.Errorf("host certificate from an unknown CA: %v", err)
	}
	cfg.KnownHosts = []string{kh}

	for _, tc := range []struct{ validity, want string }{
		{"-2h:-1h", "expired at"},
		{"+1h:+2h", "not yet valid"},
	} {
		hostValidity = tc.validity
		s2 := start()
		cfg2 := cfg
		cfg2.Port = s2.Port
		cfg2.KnownHosts = []string{writeKnownHosts(t, caLines(s2.Port))}
		_, err := Dial(ctx, cfg2)
		if !errors.Is(err, ErrHostCertInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "valid from") {
			t.Errorf("host certificate %s: got %v", tc.validity, err)
		}
		s2.Stop()
	}
}
