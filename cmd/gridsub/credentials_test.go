package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRealSlurmPerUserCredentials runs one daemon for two users on the
// real SLURM testbed's siteA, whose login user is griduser (account
// gridsub). Alice stores her own identity there with `gridsub credentials
// add` — the testbed's second login, griduser2, its own key and its own
// account gridsub2 (the only one its association allows where accounting
// is enforced) — and bob stores none. Then:
//   - alice's job runs as griduser2 charged to gridsub2, bob's as griduser
//     (the jobs print `id -un` and $SLURM_JOB_ACCOUNT; read back through
//     `gridsub logs`, which reads through the owner's identity too);
//   - alice's cancel reaches slurmctld from griduser2's uid (its log);
//   - the key is held in a 0600 file in a 0700 directory, and is neither
//     in the job database nor in the daemon's log;
//   - bob can neither list, replace nor remove alice's credential; a key
//     that is not a key, an unknown site and an encrypted key are refused
//     naming the problem.
func TestRealSlurmPerUserCredentials(t *testing.T) {
	needSlurm(t)
	if testing.Short() {
		t.Skip("-short: runs jobs on the real SLURM testbed")
	}
	key2, login2 := os.Getenv("GRIDSUB_SSH_KEY2"), os.Getenv("GRIDSUB_SSH_USER2")
	if key2 == "" || login2 == "" {
		t.Skip("the SLURM testbed has no second login user (GRIDSUB_SSH_USER2/GRIDSUB_SSH_KEY2): restart it with the current scripts/slurm-testbed.sh")
	}
	u2, err := user.Lookup(login2)
	if err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	top := t.TempDir()
	state, sock := filepath.Join(top, "state"), filepath.Join(top, "gridsub.sock")
	conf := filepath.Join(top, "gridsub.yaml")
	os.WriteFile(conf, []byte(fmt.Sprintf(`sites:
  - name: siteA
    kind: slurm
    nodes: 8
    partition: batch
    remote_dir: %s
    ssh: {host: %s, port: %s, user: %s, key_file: %s, known_hosts: %s}
broker: {interval: 1s}
`, os.Getenv("GRIDSUB_SITEA_SCRATCH"), os.Getenv("GRIDSUB_SSH_HOST"), os.Getenv("GRIDSUB_SITEA_SSH_PORT"), os.Getenv("GRIDSUB_SSH_USER"),
		os.Getenv("GRIDSUB_SSH_KEY"), os.Getenv("GRIDSUB_SSH_KNOWN_HOSTS"))), 0o644)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	service := strings.Repeat("c", 40)
	logs := serveForUsers(t, bin, sock, time.Minute, []string{"serve", "--listen", addr, "--log-level", "debug"},
		envStateDir+"="+state, envSocket+"="+sock, "GRIDSUB_CONFIG="+conf, envToken+"="+service)
	t.Setenv(envSocket, sock)
	t.Setenv(envURL, "")
	t.Setenv("GRIDSUB_CONFIG", conf)
	tokens := map[string]string{}
	for _, u := range []string{"alice", "bob"} {
		code, tok, stderr := cli("token", "create", "--user", u)
		if tokens[u] = strings.TrimSpace(tok); code != 0 || tokens[u] == "" {
			t.Fatalf("token create %s: exit %d %q", u, code, stderr)
		}
	}
	// The daemon's own user (this process, on the socket) has no use for
	// a credential: its jobs use the site's configured login.
	if code, _, stderr := cli("credentials", "add", "siteA", "--key", key2); code == 0 || !strings.Contains(stderr, "the daemon's own user") {
		t.Errorf("credentials add as the daemon's own user: exit %d %q, want a refusal", code, stderr)
	}
	as := func(u string, args ...string) (int, string, string) {
		t.Setenv(envURL, "http://"+addr)
		t.Setenv(envToken, tokens[u])
		return cli(args...)
	}

	// Refusals that name the problem.
	notKey := filepath.Join(top, "notakey")
	os.WriteFile(notKey, []byte("hello\n"), 0o600)
	encrypted := filepath.Join(top, "enc")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "s3cret-pass", "-f", encrypted).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"credentials", "add", "siteA", "--key", notKey}, "not an OpenSSH or PEM private key"},
		{[]string{"credentials", "add", "siteA", "--key", encrypted}, "encrypted with a passphrase"},
		{[]string{"credentials", "add", "nosuch", "--key", key2}, `"nosuch"; known sites: siteA`},
		{[]string{"credentials", "add", "siteA", "--key", key2, "--remote-dir", "../../etc"}, "without '..'"},
		{[]string{"credentials", "add", "siteA", "--key", key2, "--user", "alice"}, "administrators only"},
	} {
		code, out, stderr := as("bob", c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("bob: gridsub %s: exit %d, want a refusal saying %q\nstdout %q\nstderr %q", strings.Join(c.args, " "), code, c.want, out, stderr)
		}
	}

	// Alice's identity at siteA.
	code, out, stderr := as("alice", "credentials", "add", "siteA", "--key", key2, "--remote-user", login2, "--account", "gridsub2",
		"--remote-dir", "gridsub-jobs")
	if code != 0 || !strings.Contains(out, "alice's jobs at siteA now run as "+login2) || !strings.Contains(out, "SHA256:") {
		t.Fatalf("alice: credentials add: exit %d %q %q", code, out, stderr)
	}
	if code, out, _ := as("alice", "credentials", "list"); code != 0 || !strings.Contains(out, login2) || !strings.Contains(out, "gridsub2") {
		t.Errorf("alice: credentials list: exit %d %q", code, out)
	}
	if code, out, _ := as("bob", "credentials", "list"); code != 0 || strings.Contains(out, login2) {
		t.Errorf("bob: credentials list shows alice's: exit %d %q", code, out)
	}
	for _, args := range [][]string{{"credentials", "list", "--user", "alice"}, {"credentials", "remove", "siteA", "--user", "alice"}} {
		if code, out, stderr := as("bob", args...); code == 0 || !strings.Contains(stderr, "administrators only") {
			t.Errorf("bob: gridsub %s: exit %d %q %q", strings.Join(args, " "), code, out, stderr)
		}
	}
	if code, _, stderr := as("bob", "credentials", "remove", "siteA"); code == 0 || !strings.Contains(stderr, "no such credential") {
		t.Errorf("bob: credentials remove siteA (he has none): exit %d %q", code, stderr)
	}
	keyBytes, err := os.ReadFile(key2)
	if err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(state, "credentials", "alice", "siteA", "key")
	if fi, err := os.Stat(held); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the held key %s: %v %v, want mode 0600", held, fi, err)
	}
	if fi, err := os.Stat(filepath.Dir(held)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the credential's directory: %v %v, want mode 0700", fi, err)
	}
	if b, _ := os.ReadFile(held); !bytes.Equal(b, keyBytes) {
		t.Fatal("the held key is not the key given")
	}

	// One job each: who runs it, charged to what.
	job := filepath.Join(top, "who.yaml")
	os.WriteFile(job, []byte("name: who\ncommand: [/bin/sh, -c, 'id -un; echo account=$SLURM_JOB_ACCOUNT']\nresources: {nodes: 1, walltime: 5m}\n"), 0o644)
	submit := func(u, file string) string {
		t.Helper()
		code, out, stderr := as(u, "submit", file)
		if id := strings.TrimSpace(out); code == 0 && id != "" {
			return id
		}
		t.Fatalf("%s: submit: exit %d %q %q", u, code, out, stderr)
		return ""
	}
	type jobView struct {
		State string `json:"state"`
		Comps []struct {
			RemoteID string `json:"remote_id"`
		} `json:"sites"`
	}
	wait := func(u, id string, states ...string) jobView {
		t.Helper()
		var j jobView
		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
			_, out, _ := as(u, "status", id, "-o", "json")
			if json.Unmarshal([]byte(out), &j) == nil && slices.Contains(states, j.State) {
				return j
			}
		}
		t.Fatalf("%s: job %s is %q after 3 minutes, want %v\n%s", u, id, j.State, states, logs)
		return j
	}
	aliceJob, bobJob := submit("alice", job), submit("bob", job)
	for u, id := range map[string]string{"alice": aliceJob, "bob": bobJob} {
		wait(u, id, "completed", "failed")
	}
	for _, c := range []struct{ user, id, want string }{
		{"alice", aliceJob, login2 + "\naccount=gridsub2\n"},
		{"bob", bobJob, os.Getenv("GRIDSUB_SSH_USER") + "\naccount="},
	} {
		code, out, stderr := as(c.user, "logs", c.id)
		if code != 0 || !strings.HasPrefix(out, c.want) {
			t.Errorf("%s's job ran as %q (exit %d, %q), want it to start with %q", c.user, out, code, stderr, c.want)
		}
	}
	if strings.Contains(mustLogs(as("bob", "logs", bobJob)), "gridsub2") {
		t.Error("bob's job was charged to alice's account")
	}

	// Alice's cancel comes from her login's uid.
	long := filepath.Join(top, "long.yaml")
	os.WriteFile(long, []byte("name: long\ncommand: [sleep, '600']\nresources: {nodes: 1, walltime: 20m}\n"), 0o644)
	longID := submit("alice", long)
	j := wait("alice", longID, "running")
	if len(j.Comps) != 1 || j.Comps[0].RemoteID == "" {
		t.Fatalf("alice's running job has no remote id: %+v", j)
	}
	if code, out, stderr := as("alice", "cancel", longID); code != 0 {
		t.Fatalf("alice: cancel: exit %d %q %q", code, out, stderr)
	}
	wait("alice", longID, "cancelled")
	ctld := filepath.Join(os.Getenv("GRIDSUB_TESTBED_DIR"), "siteA", "log", "slurmctld.log")
	re := regexp.MustCompile(`REQUEST_KILL_JOB JobId=` + regexp.QuoteMeta(j.Comps[0].RemoteID) + ` uid (\d+)`)
	var uids []string
	for deadline := time.Now().Add(30 * time.Second); len(uids) == 0 && time.Now().Before(deadline); time.Sleep(time.Second) {
		b, _ := os.ReadFile(ctld)
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			uids = append(uids, m[1])
		}
	}
	if len(uids) == 0 || slices.ContainsFunc(uids, func(u string) bool { return u != u2.Uid }) {
		t.Errorf("slurmctld saw the cancel of %s from uids %v, want only %s (%s)", j.Comps[0].RemoteID, uids, u2.Uid, login2)
	}

	// The key is in no database and no log.
	body := keyBody(keyBytes)
	for _, f := range []string{filepath.Join(state, "gridsub.db"), filepath.Join(state, "gridsub.db-wal")} {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(body)) {
			t.Errorf("%s holds the key", f)
		}
	}
	if strings.Contains(logs.String(), body) {
		t.Error("the daemon's log holds the key")
	}
	if !strings.Contains(logs.String(), "site credential stored") {
		t.Errorf("the daemon's log does not say a credential was stored:\n%s", logs)
	}

	// Removed: alice's next job runs as the site's login again.
	if code, out, stderr := as("alice", "credentials", "remove", "siteA"); code != 0 || !strings.Contains(out, "removed alice's credential at siteA") {
		t.Fatalf("alice: credentials remove: exit %d %q %q", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Dir(held)); !os.IsNotExist(err) {
		t.Errorf("the credential's directory is still there after remove: %v", err)
	}
	again := submit("alice", job)
	wait("alice", again, "completed", "failed")
	if out := mustLogs(as("alice", "logs", again)); !strings.HasPrefix(out, os.Getenv("GRIDSUB_SSH_USER")+"\n") {
		t.Errorf("after remove, alice's job ran as %q, want the site's login %s", out, os.Getenv("GRIDSUB_SSH_USER"))
	}
}

// keyBody is a line from the middle of a private key file: what a leak
// of it would contain.
func keyBody(key []byte) string {
	lines := strings.Split(strings.TrimSpace(string(key)), "\n")
	return lines[len(lines)/2]
}

func mustLogs(code int, out, stderr string) string {
	if code != 0 {
		return "exit " + fmt.Sprint(code) + ": " + stderr
	}
	return out
}
