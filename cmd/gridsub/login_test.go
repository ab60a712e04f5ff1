package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gridsub/gridsub/backends/transport/sshdtest"
	"github.com/gridsub/gridsub/bridge/api"
)

// TestDaemonLoginTOTP is the acceptance for one-time passwords,
// against the real SLURM testbed behind a second login node: a real sshd
// whose PAM asks a TOTP code (pam_oath; codes from oathtool) on top of the
// key. The daemon starts with the site "needs login"; `gridsub login`
// answers on stdin through the daemon's socket; 50 jobs run without a
// second question; the connection is dropped while jobs run there; the
// site shows "needs login" (not down), the jobs keep their state; `gridsub
// login` again restores it and every job completes, each submitted once.
func TestDaemonLoginTOTP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	needSlurm(t)
	scratch := os.Getenv("GRIDSUB_SITEA_SCRATCH")
	tb := os.Getenv("GRIDSUB_TESTBED_DIR")
	setEnv := ""
	if b, err := os.ReadFile(filepath.Join(tb, "siteA", "ssh", "sshd_config")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "SetEnv ") {
				setEnv = l
			}
		}
	}
	if setEnv == "" || scratch == "" {
		t.Skip("the SLURM testbed's siteA sshd_config has no SetEnv line (scripts/slurm-testbed.sh writes it)")
	}
	user, key := os.Getenv("GRIDSUB_SSH_USER"), os.Getenv("GRIDSUB_SSH_KEY")
	pub := sshdtest.ReadPub(t, key+".pub")
	s := sshdtest.StartOTP(t, user, []ssh.PublicKey{pub}, setEnv, "MaxSessions 64")
	dir := sshdtest.WorldDir(t)
	kh := filepath.Join(dir, "known_hosts")
	os.WriteFile(kh, []byte(s.KnownHostsLine()+"\n"), 0o600)
	cfg := filepath.Join(dir, "sites.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`sites:
  - name: siteA
    kind: slurm
    nodes: 8
    cores_per_node: 2
    h: 1.0
    partition: batch
    remote_dir: %q
    ssh:
      host: 127.0.0.1
      port: %d
      user: %s
      key_file: %q
      known_hosts: %q
broker:
  policy: greedy-easy
  interval: 1s
  poll_interval: 1s
  cron:
    health: "@every 2s"
`, filepath.Join(scratch, "otp-"+filepath.Base(dir)), s.Port, user, key, kh)), 0o600)

	bin := buildBinary(t)
	state, sock := filepath.Join(dir, "state"), filepath.Join(dir, "gridsub.sock")
	t.Setenv(envSocket, sock)
	p := startServe(t, bin, state, sock, "--config", cfg)
	ac := api.NewUnixClient(sock)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	siteStatus := func() string {
		r, err := ac.SiteStatus(ctx)
		if err != nil || len(r.Details) != 1 {
			t.Fatalf("sites: %v %+v", err, r)
		}
		return r.Details[0].Status
	}
	waitStatus := func(prefix string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for !strings.HasPrefix(siteStatus(), prefix) {
			if time.Now().After(deadline) {
				t.Fatalf("site status %q, want %q\n%s", siteStatus(), prefix, p.logs)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitStatus("needs login")
	if st := siteStatus(); !strings.Contains(st, "gridsub login siteA") {
		t.Errorf("the status does not say what to do: %q", st)
	}
	code, stdout, stderr := cli("sites")
	if code != 0 || !strings.Contains(stdout, "needs login") {
		t.Errorf("gridsub sites: exit %d\n%s%s", code, stdout, stderr)
	}

	login := func(otp string) {
		t.Helper()
		cmd := exec.Command(bin, "login", "siteA")
		cmd.Env = append(os.Environ(), envSocket+"="+sock)
		cmd.Stdin = strings.NewReader(otp + "\n")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "logged in to siteA") {
			t.Fatalf("gridsub login: %v\n%s\n%s", err, out, p.logs)
		}
		if !strings.Contains(string(out), "One-time password") {
			t.Errorf("the question was not shown: %s", out)
		}
	}
	code0 := s.Code(t, 0)
	login(code0)
	waitStatus("ok")

	job := filepath.Join(dir, "job.yaml")
	os.WriteFile(job, []byte("name: otp\ncommand: [/bin/true]\nresources: {nodes: 1, walltime: 10m}\n"), 0o644)
	var ids []string
	submit := func(file string) {
		t.Helper()
		code, stdout, stderr := cli("submit", file, "--out-dir", filepath.Join(dir, "out"))
		if code != 0 {
			t.Fatalf("submit: %d %s %s", code, stdout, stderr)
		}
		ids = append(ids, strings.TrimSpace(stdout))
	}
	for range 50 {
		submit(job)
	}
	waitAll := func(states ...string) {
		t.Helper()
		deadline := time.Now().Add(4 * time.Minute)
		for {
			_, stdout, _ := cli("list", "-o", "json")
			var js []listedJob
			json.Unmarshal([]byte(stdout), &js)
			n := 0
			for _, j := range js {
				for _, st := range states {
					if j.State == st {
						n++
					}
				}
			}
			if n == len(ids) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d jobs in %v:\n%s\n%s", n, len(ids), states, stdout, p.logs)
			}
			time.Sleep(time.Second)
		}
	}
	waitAll("completed")

	// Jobs running at the site when its connection drops.
	long := filepath.Join(dir, "long.yaml")
	os.WriteFile(long, []byte("name: otp-long\ncommand: [/bin/sleep, '20']\nresources: {nodes: 1, walltime: 10m}\n"), 0o644)
	for range 3 {
		submit(long)
	}
	waitAll("completed", "running")
	if n := s.DropConnections(); n == 0 {
		t.Fatal("the daemon held no connection to drop")
	}
	waitStatus("needs login")
	_, stdout, _ = cli("list", "-o", "json")
	var js []listedJob
	json.Unmarshal([]byte(stdout), &js)
	for _, j := range js {
		if j.State != "completed" && j.State != "running" {
			t.Errorf("job %s is %s while the site needs a login, want it to keep its state", j.ID, j.State)
		}
	}
	login(s.Code(t, 30*time.Second))
	waitAll("completed")

	// Each job was submitted once; the one-time codes never reached the log.
	for _, id := range ids {
		_, out, _ := cli("events", id)
		if n := strings.Count(out, "submitted-remote"); n != 1 {
			t.Errorf("job %s was submitted %d times:\n%s", id, n, out)
		}
	}
	if strings.Contains(p.logs.String(), code0) {
		t.Error("a one-time code reached the daemon's log")
	}
	b, _ := os.ReadFile(s.Log)
	if n := strings.Count(string(b), "Accepted keyboard-interactive/pam"); n != 2 {
		t.Errorf("%d keyboard-interactive logins at the sshd, want 2 (one per gridsub login)", n)
	}
	for _, want := range []string{"site needs login", "site login done"} {
		if !strings.Contains(p.logs.String(), want) {
			t.Errorf("the daemon's log lacks %q", want)
		}
	}
	p.term(t, sock)
}
