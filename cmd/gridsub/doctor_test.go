package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/backends/transport/sshdtest"
)

// doctorConfig writes a configuration with one SLURM site, siteA, reached
// as host through the OpenSSH configuration sshConfig.
func doctorConfig(t *testing.T, host, sshConfig, remoteDir string, more ...string) string {
	t.Helper()
	y := fmt.Sprintf(`sites:
  - name: siteA
    kind: slurm
    nodes: 8
    cores_per_node: 2
    h: 1.0
    partition: batch
    remote_dir: %q
    ssh:
      host: %q
      ssh_config: %q
%s
broker:
  policy: greedy-easy
  interval: 1s
`, remoteDir, host, sshConfig, strings.Join(more, "\n"))
	f := filepath.Join(t.TempDir(), "sites.yaml")
	if err := os.WriteFile(f, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

type doctorOut struct {
	OK    bool `json:"ok"`
	Steps []struct {
		Hop   string `json:"hop"`
		Step  string `json:"step"`
		OK    bool   `json:"ok"`
		Fix   string `json:"fix"`
		Error string `json:"error"`
	} `json:"steps"`
}

// doctor runs gridsub doctor siteA --output json and returns the steps.
func doctor(t *testing.T, cfg string) (int, doctorOut, string) {
	t.Helper()
	code, stdout, stderr := cli("--config", cfg, "doctor", "siteA", "--output", "json")
	var d doctorOut
	if err := json.Unmarshal([]byte(stdout), &d); err != nil {
		t.Fatalf("doctor printed no JSON (%v): %s\n%s", err, stdout, stderr)
	}
	return code, d, stdout
}

// stoppedAt checks that the last step failed at hop (a substring) and step.
func stoppedAt(t *testing.T, name string, code int, d doctorOut, raw, hop, step, errPart string) {
	t.Helper()
	if code != exitInternal || d.OK || len(d.Steps) == 0 {
		t.Errorf("%s: exit %d ok=%v, want a failure\n%s", name, code, d.OK, raw)
		return
	}
	last := d.Steps[len(d.Steps)-1]
	if last.OK || !strings.Contains(last.Hop, hop) || last.Step != step || last.Fix == "" || !strings.Contains(last.Error, errPart) {
		t.Errorf("%s: stopped at %q step %q (%s; fix %q), want %q step %q with %q\n%s", name, last.Hop, last.Step, last.Error, last.Fix, hop, step, errPart, raw)
	}
	for _, s := range d.Steps[:len(d.Steps)-1] {
		if !s.OK {
			t.Errorf("%s: an earlier step failed: %+v", name, s)
		}
	}
}

// TestDoctorWalksThePath runs gridsub doctor against real sshds: through
// two bastions to the SLURM testbed's login node from an ssh config alias
// (every step passes), then with the path broken in each way the issue
// names — an unknown alias, a refused connection at hop 2, a changed host
// key, no acceptable authentication, a remote dir that is not writable —
// and checks it names the failing hop and step and says what to do.
func TestDoctorWalksThePath(t *testing.T) {
	needSlurm(t)
	ch := sshdtest.NewChain(t)
	scratch := os.Getenv("GRIDSUB_SITEA_SCRATCH")
	if scratch == "" {
		t.Skip("testbed.env has no GRIDSUB_SITEA_SCRATCH")
	}
	base, err := os.ReadFile(ch.SSHConfig)
	if err != nil {
		t.Fatal(err)
	}
	closed := sshdtest.FreePort(t)
	extra := fmt.Sprintf(`Host deadbastion
  HostName 127.0.0.1
  Port %d
  User root
  IdentityFile %s
Host cluster-hop2down
  HostName 127.0.0.1
  Port %s
  ProxyJump bastion1,deadbastion
  IdentityFile %s
Host cluster-badkey
  HostName 127.0.0.1
  Port %s
  User %s
  IdentityFile %s
  IdentitiesOnly yes
  ProxyJump bastion1,bastion2
`, closed, ch.HopKey, os.Getenv("GRIDSUB_SITEA_SSH_PORT"), os.Getenv("GRIDSUB_SSH_KEY"),
		os.Getenv("GRIDSUB_SITEA_SSH_PORT"), os.Getenv("GRIDSUB_SSH_USER"), ch.HopKey)
	// Host blocks are matched first-wins: the new ones go before "Host *".
	conf := filepath.Join(ch.Home, ".ssh", "config2")
	if err := os.WriteFile(conf, []byte(extra+string(base)), 0o600); err != nil {
		t.Fatal(err)
	}

	code, d, raw := doctor(t, doctorConfig(t, "cluster", conf, scratch))
	if code != 0 || !d.OK {
		t.Fatalf("the good path: exit %d\n%s", code, raw)
	}
	var names []string
	for _, s := range d.Steps {
		names = append(names, s.Hop+"/"+s.Step)
	}
	for _, want := range []string{"jump host 1 of 2", "jump host 2 of 2", "login node", "/batch", "/remote dir", "/sftp"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("the good path's steps %v lack %q", names, want)
		}
	}

	code, d, raw = doctor(t, doctorConfig(t, "nosuchalias-gridsub-test", conf, scratch))
	stoppedAt(t, "unknown alias", code, d, raw, "nosuchalias-gridsub-test", "resolve", "unknown alias")

	code, d, raw = doctor(t, doctorConfig(t, "cluster-hop2down", conf, scratch))
	stoppedAt(t, "refused at hop 2", code, d, raw, "jump host 2 of 2", "connect", "refused")

	code, d, raw = doctor(t, doctorConfig(t, "cluster-badkey", conf, scratch))
	stoppedAt(t, "no acceptable auth", code, d, raw, "login node", "auth", "accepted none")

	code, d, raw = doctor(t, doctorConfig(t, "cluster", conf, "/root/gridsub-doctor-not-yours"))
	stoppedAt(t, "remote dir not writable", code, d, raw, "login node", "remote dir", "not writable")

	// Last, as it rewrites known_hosts: bastion 2 now shows bastion 1's key.
	ch.WriteKnownHosts(t, ch.B1.KnownHostsLine(),
		strings.Replace(ch.B1.KnownHostsLine(), fmt.Sprint(ch.B1.Port), fmt.Sprint(ch.B2.Port), 1), ch.LoginLine)
	code, d, raw = doctor(t, doctorConfig(t, "cluster", conf, scratch))
	stoppedAt(t, "changed host key", code, d, raw, "jump host 2 of 2", "host key", "host key changed")
}

// TestDoctorWrongTOTP: doctor against an sshd whose PAM asks a TOTP code,
// answered wrong, stops at the login node's auth step saying the answer
// was rejected; answered right, it passes the auth step.
func TestDoctorWrongTOTP(t *testing.T) {
	needSlurm(t)
	dir := sshdtest.WorldDir(t)
	key, pub := sshdtest.NewKeyFile(t, dir, "id", "")
	s := sshdtest.StartOTP(t, "root", []ssh.PublicKey{pub})
	kh := filepath.Join(dir, "known_hosts")
	os.WriteFile(kh, []byte(s.KnownHostsLine()+"\n"), 0o600)
	conf := filepath.Join(dir, "ssh_config")
	os.WriteFile(conf, []byte(fmt.Sprintf("Host otp\n  HostName 127.0.0.1\n  Port %d\n  User root\n  IdentityFile %s\n  UserKnownHostsFile %s\n", s.Port, key, kh)), 0o600)
	cfgFile := doctorConfig(t, "otp", conf, filepath.Join(dir, "jobs"))
	g := &globals{config: cfgFile, output: "json", logLevel: "error", stdout: &strings.Builder{}, stderr: &strings.Builder{}}
	answer := "000000"
	p := transport.PrompterFunc(func(_ context.Context, c transport.Challenge) ([]string, error) {
		return []string{answer}, nil
	})
	err := runDoctor(context.Background(), g, "siteA", p)
	out := g.stdout.(*strings.Builder).String()
	var d doctorOut
	json.Unmarshal([]byte(out), &d)
	stoppedAt(t, "wrong TOTP", doctorExit(err), d, out, "127.0.0.1", "auth", "rejected the answers")

	answer = s.Code(t, 30*time.Second)
	g.stdout = &strings.Builder{}
	runDoctor(context.Background(), g, "siteA", p)
	out = g.stdout.(*strings.Builder).String()
	d = doctorOut{}
	json.Unmarshal([]byte(out), &d)
	authOK := false
	for _, st := range d.Steps {
		authOK = authOK || (st.Step == "auth" && st.OK)
	}
	if !authOK {
		t.Errorf("the right code did not pass the auth step:\n%s", out)
	}
}

func doctorExit(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exitError); ok {
		return ee.code
	}
	return -1
}
