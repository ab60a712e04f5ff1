package transport

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// The tests of this file run real OpenSSH servers (/usr/sbin/sshd) on
// loopback, started and stopped by each test: jump hosts, an sshd whose
// PAM asks a TOTP code (libpam-oath, codes from oathtool), an sshd that
// trusts a user CA and presents a host certificate. Keys and certificates
// are made at test time with ssh-keygen. They need root (sshd) and skip
// with the reason otherwise.

// sshdOpts configures startSSHD.
type sshdOpts struct {
	user     string          // AllowUsers (default root)
	authKeys []ssh.PublicKey // authorized_keys; none: AuthorizedKeysFile none
	extra    []string        // more sshd_config lines
	progName string          // run sshd under this name (its PAM service name)
	// hostCert, if set, signs the host key (its .pub path) and returns the
	// certificate file for HostCertificate.
	hostCert func(t testing.TB, hostPub string) string
}

// testSSHD is one running sshd.
type testSSHD struct {
	Port    int
	HostKey ssh.PublicKey
	Dir     string
	Log     string
	cmd     *exec.Cmd
}

func needSSHD(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a real sshd needs root")
	}
	for _, b := range []string{"/usr/sbin/sshd", "/usr/bin/ssh-keygen"} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("no %s (apt-get install openssh-server openssh-client)", b)
		}
	}
	if _, err := os.Stat("/run/sshd"); err != nil {
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Skipf("sshd privilege separation directory /run/sshd: %v", err)
		}
	}
}

// worldDir is a temporary directory other users can read (sshd reads
// authorized_keys as the logging-in user).
func worldDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gridsub-login-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func keygen(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ssh-keygen", append([]string{"-q"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen %v: %v\n%s", args, err, out)
	}
}

// newKeyFile makes an ed25519 key pair with ssh-keygen; it returns the
// private key path and the public key.
func newKeyFile(t testing.TB, dir, name, passphrase string) (string, ssh.PublicKey) {
	t.Helper()
	p := filepath.Join(dir, name)
	keygen(t, "-t", "ed25519", "-N", passphrase, "-C", name, "-f", p)
	return p, readPub(t, p+".pub")
}

func readPub(t testing.TB, path string) ssh.PublicKey {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func startSSHD(t testing.TB, o sshdOpts) *testSSHD {
	t.Helper()
	needSSHD(t)
	dir := worldDir(t)
	hostKey, hostPub := filepath.Join(dir, "host_ed25519"), (ssh.PublicKey)(nil)
	keygen(t, "-t", "ed25519", "-N", "", "-f", hostKey)
	hostPub = readPub(t, hostKey+".pub")
	if o.user == "" {
		o.user = "root"
	}
	authz := "none"
	if len(o.authKeys) > 0 {
		authz = filepath.Join(dir, "authorized_keys")
		var b bytes.Buffer
		for _, k := range o.authKeys {
			b.Write(ssh.MarshalAuthorizedKey(k))
		}
		if err := os.WriteFile(authz, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &testSSHD{Port: freePort(t), HostKey: hostPub, Dir: dir, Log: filepath.Join(dir, "sshd.log")}
	// sshd takes the first value of a keyword: the extra lines go first.
	lines := append(append([]string(nil), o.extra...),
		"ListenAddress 127.0.0.1",
		"Port "+strconv.Itoa(s.Port),
		"HostKey "+hostKey,
		"PidFile "+filepath.Join(dir, "sshd.pid"),
		"AuthorizedKeysFile "+authz,
		"StrictModes no",
		"PermitRootLogin prohibit-password",
		"AllowUsers "+o.user,
		"PasswordAuthentication no",
		"UseDNS no",
		"Subsystem sftp internal-sftp",
		"LogLevel VERBOSE",
	)
	if o.hostCert != nil {
		lines = append(lines, "HostCertificate "+o.hostCert(t, hostKey+".pub"))
	}
	if !hasPrefix(o.extra, "UsePAM") {
		lines = append(lines, "UsePAM no", "KbdInteractiveAuthentication no")
	}
	conf := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := "/usr/sbin/sshd"
	if o.progName != "" {
		bin = filepath.Join(dir, o.progName)
		if err := os.Symlink("/usr/sbin/sshd", bin); err != nil {
			t.Fatal(err)
		}
	}
	s.cmd = exec.Command(bin, "-D", "-f", conf, "-E", s.Log)
	if out, err := os.Create(filepath.Join(dir, "stdout")); err == nil {
		s.cmd.Stdout, s.cmd.Stderr = out, out
		defer out.Close()
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() || os.Getenv("DEBUG_SSHD") != "" {
			b, _ := os.ReadFile(s.Log)
			out, _ := os.ReadFile(filepath.Join(dir, "stdout"))
			t.Logf("sshd log (%s):\n%s\n%s", o.progName, b, out)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			c.Close()
			return s
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(s.Log)
			t.Fatalf("sshd did not listen on %d: %v\n%s", s.Port, err, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hasPrefix(lines []string, p string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

func (s *testSSHD) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// KnownHostsLine is the known_hosts line of its host key.
func (s *testSSHD) KnownHostsLine() string {
	return fmt.Sprintf("[127.0.0.1]:%d %s", s.Port, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.HostKey))))
}

// Stop kills the sshd and the per-connection processes it started.
func (s *testSSHD) Stop() {
	if s.cmd.Process == nil {
		return
	}
	s.DropConnections()
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

// DropConnections kills the per-connection sshd processes (children of
// the listener this test started, found by its pid): every client
// connection ends at once, as when a site's sshd is restarted.
func (s *testSSHD) DropConnections() int {
	pids := childPids(s.cmd.Process.Pid)
	for _, p := range pids {
		if pr, err := os.FindProcess(p); err == nil {
			pr.Kill()
		}
	}
	return len(pids)
}

// childPids lists the processes whose parent is pid (from /proc).
func childPids(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// countingPrompter answers from a function and counts what it was asked.
type countingPrompter struct {
	mu     sync.Mutex
	asked  []Challenge
	answer func(Challenge) ([]string, error)
}

func (p *countingPrompter) Prompt(_ context.Context, c Challenge) ([]string, error) {
	p.mu.Lock()
	p.asked = append(p.asked, c)
	p.mu.Unlock()
	return p.answer(c)
}

func (p *countingPrompter) count(kind string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.asked {
		if c.Kind == kind {
			n++
		}
	}
	return n
}

func testLogger(t testing.TB, buf *syncBuffer) *slog.Logger {
	if buf != nil {
		return slog.New(slog.NewTextHandler(buf, nil))
	}
	return slog.New(slog.NewTextHandler(testWriter{t.(*testing.T)}, nil))
}
