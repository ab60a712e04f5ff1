// Package sshdtest runs real OpenSSH servers (/usr/sbin/sshd) on
// loopback for tests: jump hosts, an sshd whose PAM asks a TOTP code
// (Debian's libpam-oath, codes from oathtool), an sshd that trusts a user
// CA and presents a host certificate. Keys and certificates are made with
// ssh-keygen at test time. Each server is stopped when its test ends.
// Everything skips, saying why, without root or the programs.
package sshdtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// Opts configures Start.
type Opts struct {
	User     string          // AllowUsers (default root)
	AuthKeys []ssh.PublicKey // authorized_keys; none: AuthorizedKeysFile none
	Extra    []string        // more sshd_config lines (they win: sshd takes a keyword's first value)
	ProgName string          // run sshd under this name (its PAM service name)
	// HostCert, if set, signs the host key (its .pub path) and returns the
	// certificate file for HostCertificate.
	HostCert func(t testing.TB, hostPub string) string
}

// Server is one running sshd.
type Server struct {
	Port    int
	HostKey ssh.PublicKey
	Dir     string
	Log     string
	cmd     *exec.Cmd
}

func Need(t testing.TB) {
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

// WorldDir is a temporary directory other users can read (sshd reads
// authorized_keys as the logging-in user).
func WorldDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gridsub-login-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func Keygen(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ssh-keygen", append([]string{"-q"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen %v: %v\n%s", args, err, out)
	}
}

// NewKeyFile makes an ed25519 key pair with ssh-keygen; it returns the
// private key path and the public key.
func NewKeyFile(t testing.TB, dir, name, passphrase string) (string, ssh.PublicKey) {
	t.Helper()
	p := filepath.Join(dir, name)
	Keygen(t, "-t", "ed25519", "-N", passphrase, "-C", name, "-f", p)
	return p, ReadPub(t, p+".pub")
}

func ReadPub(t testing.TB, path string) ssh.PublicKey {
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

func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func Start(t testing.TB, o Opts) *Server {
	t.Helper()
	Need(t)
	dir := WorldDir(t)
	hostKey, hostPub := filepath.Join(dir, "host_ed25519"), (ssh.PublicKey)(nil)
	Keygen(t, "-t", "ed25519", "-N", "", "-f", hostKey)
	hostPub = ReadPub(t, hostKey+".pub")
	if o.User == "" {
		o.User = "root"
	}
	authz := "none"
	if len(o.AuthKeys) > 0 {
		authz = filepath.Join(dir, "authorized_keys")
		var b bytes.Buffer
		for _, k := range o.AuthKeys {
			b.Write(ssh.MarshalAuthorizedKey(k))
		}
		if err := os.WriteFile(authz, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &Server{Port: FreePort(t), HostKey: hostPub, Dir: dir, Log: filepath.Join(dir, "sshd.log")}
	// sshd takes the first value of a keyword: the extra lines go first.
	lines := append(append([]string(nil), o.Extra...),
		"ListenAddress 127.0.0.1",
		"Port "+strconv.Itoa(s.Port),
		"HostKey "+hostKey,
		"PidFile "+filepath.Join(dir, "sshd.pid"),
		"AuthorizedKeysFile "+authz,
		"StrictModes no",
		"PermitRootLogin prohibit-password",
		"AllowUsers "+o.User,
		"PasswordAuthentication no",
		"UseDNS no",
		"Subsystem sftp internal-sftp",
		"LogLevel VERBOSE",
	)
	if o.HostCert != nil {
		lines = append(lines, "HostCertificate "+o.HostCert(t, hostKey+".pub"))
	}
	if !hasPrefix(o.Extra, "UsePAM") {
		lines = append(lines, "UsePAM no", "KbdInteractiveAuthentication no")
	}
	conf := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := "/usr/sbin/sshd"
	if o.ProgName != "" {
		bin = filepath.Join(dir, o.ProgName)
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
			t.Logf("sshd log (%s):\n%s\n%s", o.ProgName, b, out)
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

func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// KnownHostsLine is the known_hosts line of its host key.
func (s *Server) KnownHostsLine() string {
	return fmt.Sprintf("[127.0.0.1]:%d %s", s.Port, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.HostKey))))
}

// Stop kills the sshd and the per-connection processes it started.
func (s *Server) Stop() {
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
func (s *Server) DropConnections() int {
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

// OTPServer is an sshd that asks a key and then a TOTP code through PAM
// (Debian's libpam-oath); code() gives the current code with oathtool.
type OTPServer struct {
	*Server
	secret string
}

// StartOTP runs sshd under a name of its own, so that its PAM service
// (/etc/pam.d/<name>, removed at the end) is pam_oath and no other sshd's.
func StartOTP(t testing.TB, user string, keys []ssh.PublicKey, extra ...string) *OTPServer {
	t.Helper()
	Need(t)
	if _, err := os.Stat("/lib/x86_64-linux-gnu/security/pam_oath.so"); err != nil {
		if m, _ := filepath.Glob("/lib/*/security/pam_oath.so"); len(m) == 0 {
			t.Skip("no pam_oath (apt-get install libpam-oath oathtool)")
		}
	}
	if _, err := exec.LookPath("oathtool"); err != nil {
		t.Skip("no oathtool (apt-get install oathtool)")
	}
	var rnd [20]byte
	rand.Read(rnd[:])
	secret := hex.EncodeToString(rnd[:])
	users := filepath.Join(WorldDir(t), "users.oath")
	if err := os.WriteFile(users, []byte(fmt.Sprintf("HOTP/T30 %s - %s\n", user, secret)), 0o600); err != nil {
		t.Fatal(err)
	}
	name := "gridsub-otp-" + hex.EncodeToString(rnd[:4])
	pam := filepath.Join("/etc/pam.d", name)
	conf := fmt.Sprintf("# written by gridsub's transport tests; removed when they end\n"+
		"auth required pam_oath.so usersfile=%s window=4 digits=6\n"+
		"account required pam_permit.so\nsession required pam_permit.so\n", users)
	if err := os.WriteFile(pam, []byte(conf), 0o644); err != nil {
		t.Skipf("cannot write a PAM service: %v", err)
	}
	t.Cleanup(func() { os.Remove(pam) })
	s := Start(t, Opts{User: user, AuthKeys: keys, ProgName: name, Extra: append([]string{
		"UsePAM yes",
		"PermitRootLogin yes", // else sshd feeds PAM a bad password for root
		"KbdInteractiveAuthentication yes",
		"AuthenticationMethods publickey,keyboard-interactive",
	}, extra...)})
	return &OTPServer{Server: s, secret: secret}
}

// code is the TOTP code of the time step at now+ahead (pam_oath refuses
// a code of a step already used, so a second login in the same 30 s uses
// the next step's, which its window accepts).
func (s *OTPServer) Code(t testing.TB, ahead time.Duration) string {
	t.Helper()
	at := time.Now().Add(ahead).UTC().Format("2006-01-02 15:04:05 UTC")
	out, err := exec.Command("oathtool", "--totp", "-N", at, s.secret).Output()
	if err != nil {
		t.Fatalf("oathtool: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// SlurmLogin is the SLURM testbed's login node of siteA (testbed.env),
// or a skip.
func SlurmLogin(t testing.TB) (port, user, key, knownHosts string) {
	t.Helper()
	port, user = os.Getenv("GRIDSUB_SITEA_SSH_PORT"), os.Getenv("GRIDSUB_SSH_USER")
	key, knownHosts = os.Getenv("GRIDSUB_SSH_KEY"), os.Getenv("GRIDSUB_SSH_KNOWN_HOSTS")
	if port == "" || user == "" || key == "" || knownHosts == "" {
		t.Skip("no SLURM testbed: bash scripts/slurm-testbed.sh start; source its testbed.env")
	}
	return
}

// Chain is two bastion sshds in front of the SLURM testbed's login node,
// and a test home whose .ssh/config has the alias "cluster" reaching it
// through them (ProxyJump bastion1,bastion2) and whose known_hosts holds
// every hop's key, hashed (ssh-keygen -H).
type Chain struct {
	B1, B2     *Server // the bastions
	Home       string
	SSHConfig  string // the test home's .ssh/config
	KnownHosts string
	HopKey     string
	LoginLine  string // the login node's known_hosts line
}

func NewChain(t testing.TB) *Chain {
	t.Helper()
	Need(t)
	port, user, key, kh := SlurmLogin(t)
	ch := &Chain{Home: WorldDir(t)}
	sshDir := filepath.Join(ch.Home, ".ssh")
	os.MkdirAll(sshDir, 0o700)
	var hopPub = readPubOf(t, filepath.Join(sshDir, "id_hop"), &ch.HopKey)
	bastion := Opts{AuthKeys: hopPub, Extra: []string{"AllowTcpForwarding yes", "PermitOpen any"}}
	ch.B1, ch.B2 = Start(t, bastion), Start(t, bastion)
	b, err := os.ReadFile(kh)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "[127.0.0.1]:"+port+" ") {
			ch.LoginLine = l
		}
	}
	if ch.LoginLine == "" {
		t.Fatalf("%s lists no key for [127.0.0.1]:%s", kh, port)
	}
	ch.KnownHosts = filepath.Join(sshDir, "known_hosts")
	ch.WriteKnownHosts(t, ch.B1.KnownHostsLine(), ch.B2.KnownHostsLine(), ch.LoginLine)
	ch.SSHConfig = filepath.Join(sshDir, "config")
	conf := fmt.Sprintf(`Host bastion1
  HostName 127.0.0.1
  Port %d
  User root
Host bastion2
  HostName 127.0.0.1
  Port %d
  User root
Host bastion*
  IdentityFile %s
  IdentitiesOnly yes
Host cluster
  HostName 127.0.0.1
  Port %s
  User %s
  IdentityFile %s
  IdentitiesOnly yes
  ProxyJump bastion1,bastion2
  ServerAliveInterval 15
  ConnectTimeout 20
Host *
  UserKnownHostsFile %s
`, ch.B1.Port, ch.B2.Port, ch.HopKey, port, user, key, ch.KnownHosts)
	if err := os.WriteFile(ch.SSHConfig, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return ch
}

func readPubOf(t testing.TB, path string, out *string) []ssh.PublicKey {
	t.Helper()
	Keygen(t, "-t", "ed25519", "-N", "", "-f", path)
	*out = path
	return []ssh.PublicKey{ReadPub(t, path+".pub")}
}

// WriteKnownHosts writes the lines and hashes them as ssh-keygen -H does.
func (ch *Chain) WriteKnownHosts(t testing.TB, lines ...string) {
	t.Helper()
	if err := os.WriteFile(ch.KnownHosts, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	Keygen(t, "-H", "-f", ch.KnownHosts)
	os.Remove(ch.KnownHosts + ".old")
	if b, _ := os.ReadFile(ch.KnownHosts); strings.Contains(string(b), "127.0.0.1") {
		t.Fatalf("known_hosts not hashed:\n%s", b)
	}
}
